"""The root of every error runwatch raises on purpose, so callers can catch ours only."""


class RunwatchError(Exception):
    """Base class of runwatch's own errors."""
