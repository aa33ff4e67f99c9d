"""The process-wide emitter that integrations use when they are not handed one.

Built on first use from the environment (`RUNWATCH_RUN` and `RUNWATCH_KAFKA` or
`RUNWATCH_SPOOL`; component from `RUNWATCH_COMPONENT`, default `trainer`). Without that
environment there is none, and integrations such as the tqdm bar just do their plain job.
"""

from __future__ import annotations

import os
import threading

from runwatch.emitters.emitter import Emitter

_LOCK = threading.Lock()
_DEFAULT: Emitter | None = None
_TRIED = False


def default_emitter() -> Emitter | None:
    """The shared emitter, or None when the environment names no run or destination."""
    global _DEFAULT, _TRIED
    if _TRIED:
        return _DEFAULT
    with _LOCK:
        if not _TRIED:
            _TRIED = True
            env = os.environ
            if env.get("RUNWATCH_RUN") and (env.get("RUNWATCH_KAFKA") or env.get("RUNWATCH_SPOOL")):
                _DEFAULT = Emitter(component=env.get("RUNWATCH_COMPONENT") or "trainer")
    return _DEFAULT


def set_default_emitter(emitter: Emitter | None) -> None:
    """Use this emitter (or none) wherever an integration is not handed one."""
    global _DEFAULT, _TRIED
    with _LOCK:
        _DEFAULT, _TRIED = emitter, True
