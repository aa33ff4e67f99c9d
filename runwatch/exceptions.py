"""The errors of the console script, its commands, the notifier, `runwatch serve` and the dev
tools: each a `RunwatchError` whose message is one line for the person at the terminal."""

from runwatch.emitters.exceptions import RunwatchError


class MissingExtra(RunwatchError):
    """A command needs a library that comes with one of runwatch's extras."""


class CommandError(RunwatchError):
    """A command that cannot do what it was asked, with its exit status (`RunwatchError`)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


class ConfigProblem(RunwatchError):
    """The notifier's Slack settings (the config file's [slack] table and the flags) cannot be
    used; the message names the key."""


class DeliveryStopped(RunwatchError):
    """Told to stop while a transition was still waiting for Slack: it was not sent."""


class TokenMissing(RunwatchError):
    """No usable Slack bot token (a token file that cannot be read or is empty, or none
    given); the message says where it looked."""


class SlackError(RunwatchError):
    """A Slack call that failed for good (or ran out of retries); never carries the token."""

    def __init__(
        self, method: str, error: str, *, retryable: bool, needed: str | None = None
    ) -> None:
        more = f" (needs the {needed} scope)" if needed else ""
        super().__init__(f"slack {method} failed: {error}{more}")
        self.method = method
        self.error = error
        self.retryable = retryable
        self.needed = needed  # with missing_scope: the scope Slack says the call needs


class LogsInUse(RunwatchError):
    """Another process serves from the same logs (two services would say everything twice)."""


class KafkaBrokerError(RunwatchError, RuntimeError):
    """The broker could not be fetched, started or stopped; the message says why."""


class SecureSetupError(RunwatchError, RuntimeError):
    """Certificates could not be made; the message says why."""
