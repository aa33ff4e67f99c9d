"""The root of every error runwatch raises on purpose, so callers can catch ours only."""


class RunwatchError(Exception):
    """Base class of runwatch's own errors. Its message is one line for the person at the
    terminal; `status` is the exit status a command ends with when the error stops it."""

    #: 2: the command line, a file or the input is wrong (a subclass or an instance may say
    #: 1: what it needs, a broker or a service, is not there)
    status: int = 2
