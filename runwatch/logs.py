"""How runwatch speaks on standard error: one line per message, `runwatch COMMAND: message`.

Set up once by the console script for the command it runs (`setup`); modules log through
their `runwatch.*` loggers or call `say` for a status line, and errors meant for the person at
the terminal are `RunwatchError`s, printed once by `runwatch.cli` the same way. Other
libraries' loggers (Kafka clients, Faust) show warnings and worse with the same prefix.
"""

from __future__ import annotations

import logging
import sys

LOGGER = "runwatch"


class _Ours(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `setup` installs (and replaces on the next call)."""


def setup(command: str, level: int = logging.INFO) -> None:
    """Route runwatch's log records (at `level` and above) and other libraries' warnings to
    standard error as `runwatch COMMAND: message`. Idempotent; the latest call wins."""
    formatter = logging.Formatter(f"runwatch {command}: %(message)s")
    for logger, at in ((logging.getLogger(LOGGER), level), (logging.getLogger(), logging.WARNING)):
        for old in [h for h in logger.handlers if isinstance(h, _Ours)]:
            logger.removeHandler(old)
        handler = _Ours(sys.stderr)
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        logger.setLevel(at)
    logging.getLogger(LOGGER).propagate = False


def say(message: str) -> None:
    """A status line for the person running the command."""
    logging.getLogger(LOGGER).info(message)
