"""How runwatch speaks on standard error: one line per message, `runwatch COMMAND: message`.

Set up once by the console script for the command it runs (`setup`); modules log through
their `runwatch.*` loggers or call `say` for a status line, and errors meant for the person at
the terminal are `RunwatchError`s, printed once by `runwatch.cli` the same way (`error`).
Other libraries' loggers (Kafka clients, Faust) show warnings and worse with the same prefix.

A command whose work imports nothing that logs (`runwatch replay`) sets up `lazily`: the
`logging` package (with `traceback`, `threading`, `string`: bench/RESULTS.md, "replay") is
loaded by its first message, not by its start -- a replay with nothing to say never loads it.
"""

from __future__ import annotations

import sys
from typing import Any

LOGGER = "runwatch"
#: `logging.INFO`, without importing `logging` to name it
INFO = 20

#: (command, level) of a `setup` made lazily, waiting for the first message; None: none
_waiting: tuple[str, int] | None = None
#: the handler class `setup` installs (and replaces on the next call), made with the first
_handler_class: Any = None


def setup(command: str, level: int = INFO, *, lazily: bool = False) -> None:
    """Route runwatch's log records (at `level` and above) and other libraries' warnings to
    standard error as `runwatch COMMAND: message`. Idempotent; the latest call wins.
    `lazily`: where `logging` is not loaded yet, at the first `say` or `error` (for a command
    that loads no library that logs through it)."""
    global _waiting, _handler_class
    if lazily and "logging" not in sys.modules:
        _waiting = (command, level)
        return
    _waiting = None
    import logging

    if _handler_class is None:
        _handler_class = type("_Ours", (logging.StreamHandler,), {"__module__": __name__})
    formatter = logging.Formatter(f"runwatch {command}: %(message)s")
    for logger, at in ((logging.getLogger(LOGGER), level), (logging.getLogger(), logging.WARNING)):
        for old in [h for h in logger.handlers if isinstance(h, _handler_class)]:
            logger.removeHandler(old)
        handler = _handler_class(sys.stderr)
        handler.setFormatter(formatter)
        logger.addHandler(handler)
        logger.setLevel(at)
    logging.getLogger(LOGGER).propagate = False


def _logger() -> Any:
    """runwatch's logger, set up first if a lazy `setup` waits."""
    if _waiting is not None:
        setup(*_waiting)
    import logging

    return logging.getLogger(LOGGER)


def say(message: str) -> None:
    """A status line for the person running the command."""
    _logger().info(message)


def error(message: str) -> None:
    """An error for the person running the command: one line, no traceback."""
    _logger().error("%s", message)
