"""The native parts of the live worker's per-event path (setup.py builds them where a C
compiler is): each mirrors Python that stays beside it as its reference and its fallback."""

from __future__ import annotations

import importlib
from typing import Any


def native(module: str, name: str) -> Any:
    """`name` of the native `module`, where the install built it; None where it did not."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:  # (a machine without a C compiler: the Python it mirrors)
        return None
