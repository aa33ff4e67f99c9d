"""Warnings an emitter says once per process: a training job's log must not fill with one
complaint repeated at every step (what it drops is counted in its heartbeats instead)."""

from __future__ import annotations

import logging

log = logging.getLogger("runwatch.emitters")

_SAID: set[str] = set()


def say_once(message: str) -> None:
    """Log `message` as a warning the first time it is said in this process."""
    if message not in _SAID:
        _SAID.add(message)
        log.warning("%s", message)
