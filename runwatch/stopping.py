"""How a long-running command learns it should stop: SIGTERM (Kubernetes, `kill`) and Ctrl-C
set one event that its loop checks, so it finishes the batch in hand and closes cleanly."""

from __future__ import annotations

import signal
import threading
from typing import Any


def stop_on_signals(
    *signums: signal.Signals,
) -> threading.Event:
    """An event set by any of `signums` (default SIGTERM and SIGINT); main thread only."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for signum in signums or (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    return stop
