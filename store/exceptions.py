"""Errors of the store, each worded for the person at the terminal."""

from runwatch.emitters.exceptions import RunwatchError


class StoreError(RunwatchError):
    """Base class of the store's errors; the message is one line meant for a person."""


class NotAStore(StoreError):
    """The path is missing, is not a DuckDB file, or holds no runwatch history."""


class StoreLocked(StoreError):
    """Another process holds the file for writing (or reading) for longer than we waited."""


class QueryRefused(StoreError):
    """A statement that would change the history, or reach outside it, on a read connection."""


class QueryFailed(StoreError):
    """DuckDB refused a query; the message is DuckDB's own."""


class NoSuchRun(StoreError):
    """The history has no run of that id (the message names the closest)."""
