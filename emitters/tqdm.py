"""`from runwatch.emitters.tqdm import tqdm`: tqdm that also emits `progress` events.

A drop-in subclass: the bar looks and behaves the same. It emits at most once per
`emit_interval` seconds per bar (default 1), plus on close and reset, so a bar in a hot loop
costs one clock read per refresh. The emitter is `emitter=` or the process default
(`runwatch.emitters.default`); with neither, nothing is emitted. The event's `name` is
`name=`, else the bar's description, else "progress".
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from tqdm import tqdm as _tqdm  # type: ignore[import-untyped]

from runwatch.emitters.default import default_emitter
from runwatch.emitters.emitter import Emitter

__all__ = ["tqdm", "trange"]


class tqdm(_tqdm):  # type: ignore[misc]  # noqa: N801  (the name users import)
    """tqdm.tqdm, plus `progress` events; extra keywords: emitter, name, emit_interval."""

    def __init__(
        self,
        *args: Any,
        emitter: Emitter | None = None,
        name: str | None = None,
        emit_interval: float = 1.0,
        **kwargs: Any,
    ) -> None:
        self._rw_emitter = emitter if emitter is not None else default_emitter()
        self._rw_name = name
        self._rw_interval = emit_interval
        self._rw_last = float("-inf")
        self._rw_sent: tuple[int, int | None] | None = None
        super().__init__(*args, **kwargs)
        if not self.disable:
            self._rw_emit(force=True)

    def _rw_emit(self, force: bool = False) -> None:
        em = self._rw_emitter
        if em is None:
            return
        now = time.monotonic()
        if not force and now - self._rw_last < self._rw_interval:
            return
        n = int(self.n)
        total = int(self.total) if self.total is not None and self.total >= 0 else None
        if (n, total) == self._rw_sent:
            return
        self._rw_last, self._rw_sent = now, (n, total)
        name = self._rw_name or (self.desc or "").rstrip(": ").strip() or "progress"
        fields: dict[str, Any] = {"name": name[:200], "n": n}
        if total is not None:
            fields["total"] = total
        with contextlib.suppress(ValueError, TypeError):  # never break the loop it watches
            em.emit("progress", **fields)

    def update(self, n: float | None = 1) -> bool | None:
        shown: bool | None = super().update(n)
        if not self.disable:
            done = self.total is not None and self.n >= self.total
            self._rw_emit(force=done)
        return shown

    def reset(self, total: float | None = None) -> None:
        super().reset(total)
        if not self.disable:
            self._rw_emit(force=True)

    def close(self) -> None:
        if not self.disable and not getattr(self, "_rw_closed", False):
            self._rw_closed = True
            self._rw_emit(force=True)
        super().close()


def trange(*args: Any, **kwargs: Any) -> tqdm:
    """`tqdm(range(*args), **kwargs)`, as tqdm.trange."""
    return tqdm(range(*args), **kwargs)
