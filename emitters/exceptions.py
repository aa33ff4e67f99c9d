"""The emitters' errors, and the root of every error runwatch raises on purpose
(`RunwatchError`), so callers can catch ours only."""


class RunwatchError(Exception):
    """Base class of runwatch's own errors. Its message is one line for the person at the
    terminal; `status` is the exit status a command ends with when the error stops it."""

    #: 2: the command line, a file or the input is wrong (a subclass or an instance may say
    #: 1: what it needs, a broker or a service, is not there)
    status: int = 2


class CatalogueError(RunwatchError, ValueError):
    """The catalogue's data is not what the loader reads (a test and the import say which)."""


class KafkaSecurityError(RunwatchError, ValueError):
    """A Kafka security setting is wrong; the message is one line that says which and why."""


class ScrapeError(RunwatchError):
    """The server did not give usable metrics; `str()` is the state, e.g. "connection refused"."""
