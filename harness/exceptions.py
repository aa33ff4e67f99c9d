"""The harness's errors: a browser, a verl wheel or a vLLM server the tests need and cannot
have; each says why in one line."""

from runwatch.emitters.exceptions import RunwatchError


class NoBrowser(RunwatchError):
    """Chromium or its driver is not installed."""


class VerlWheelError(RunwatchError, RuntimeError):
    """The verl wheel could not be fetched; the message says why."""


class VllmError(RunwatchError, RuntimeError):
    """The vLLM environment or server could not be made ready; the message says why."""
