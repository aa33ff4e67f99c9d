"""Errors of the stream core."""

from runwatch.emitters.exceptions import RunwatchError


class InvalidEvent(RunwatchError, ValueError):
    """An input that is not a contract event; `reason` says why in one line, `kind` which
    of a few classes of why it is (a bounded label for metrics: too_large, too_deep,
    not_json, not_an_object, schema, bad_time, refused_by_rules, failed_in_rules)."""

    def __init__(self, reason: str, kind: str = "schema") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class InvalidAlert(RunwatchError, ValueError):
    """An input that is not a contract alert transition (section 3); `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ConfigError(RunwatchError, ValueError):
    """A rules config (file or run.started.config) that cannot be used; names the bad key.
    `where`: the bad key's path in the document (`("rules", "zero_reward", "steps")`), for
    a reader that can tell its line."""

    def __init__(self, message: str, where: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.where = where


class PortUnavailable(RunwatchError, OSError):
    """An HTTP endpoint (/metrics, /healthz, /readyz) that cannot listen where asked (the port
    is in use, or not allowed); the message says which in one line."""


class CheckpointError(RunwatchError):
    """A checkpoint that cannot be used (damaged, another format or layout, other rules);
    `reason` says which in one line. The caller rebuilds from its input instead."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StopConsuming(RunwatchError):
    """Raised by a handler that cannot go on (say, Slack refused the token): the loop stops at
    once, commits nothing more, and `run` raises it to whoever started the loop."""


class SnapshotFailed(RunwatchError):
    """The child that pickled the state did not finish (killed, out of memory)."""


class WorkerStartFailed(RunwatchError):
    """The worker could not set up its topics or metrics endpoint; the message says why."""

    status = 1


class InvalidFleetRecord(RunwatchError, ValueError):
    """A record of the fleet topic (`runwatch.stream.fleet.wire`) that cannot be used;
    `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PartitionLost(RunwatchError):
    """A worker's producer of one input partition was fenced -- another worker took the
    partition over -- or failed for good: nothing more goes out for that partition here."""
