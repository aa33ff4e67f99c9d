"""The process-wide emitter that integrations use when they are not handed one.

Built on first use from the environment: `RUNWATCH_RUN` and a destination the `Emitter`
reads from it, such as `RUNWATCH_KAFKA` or `RUNWATCH_SPOOL`; the component from
`RUNWATCH_COMPONENT`, default `trainer`. Without that environment there is none, and
integrations such as the tqdm bar just do their plain job.
"""

from __future__ import annotations

import threading

from runwatch.emitters import env
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
            if env.get(env.RUN):
                try:
                    _DEFAULT = Emitter(component=env.get(env.COMPONENT) or "trainer")
                except ValueError:  # no destination configured, or a bad setting
                    _DEFAULT = None
    return _DEFAULT


def set_default_emitter(emitter: Emitter | None) -> None:
    """Use this emitter (or none) wherever an integration is not handed one."""
    global _DEFAULT, _TRIED
    with _LOCK:
        _DEFAULT, _TRIED = emitter, True
