"""Reading JSON Lines input for a command: files in the order given (`-` is standard input),
each line with its file and number, and at a terminal a progress bar on standard error."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import count, repeat
from typing import IO, Any

from runwatch.exceptions import CommandError
from runwatch.stream.refused import Refused

Line = tuple[str, int, bytes]


def report_invalid(bad: Refused) -> None:
    """A refused line on standard error: `FILE:LINE: invalid event: reason`."""
    print(f"{bad.where}: invalid event: {bad.reason}", file=sys.stderr)


def must_exist(files: list[str]) -> None:
    """One line naming the first file that is not there, before any is read."""
    for name in files:
        if name != "-" and not os.path.isfile(name):
            raise CommandError(f"{name}: no such file")


def read_lines(files: list[str], stack: ExitStack, *, progress: bool = False) -> Iterator[Line]:
    """(file, line number, raw line) of every line; with `progress`, a bar while reading
    when standard error is a terminal."""
    bar: Any = _RichProgress(stack) if progress and sys.stderr.isatty() else None
    for name in files:
        stream: IO[bytes]
        if name == "-":
            stream, label = sys.stdin.buffer, "<stdin>"
        else:
            stream, label = stack.enter_context(open(name, "rb")), name  # noqa: SIM115
        if bar is None:  # (no call per line: a replay reads millions)
            yield from zip(repeat(label), count(1), stream)
            continue
        task = bar.start(label, None if name == "-" else os.path.getsize(name))
        for number, raw in enumerate(stream, 1):
            bar.advance(task, len(raw))
            yield label, number, raw
        bar.finish(task)


class _RichProgress:
    """A progress bar on stderr, for long files read at a terminal."""

    def __init__(self, stack: ExitStack) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self._p = stack.enter_context(
            Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
        )
        self._pending = 0

    def start(self, label: str, total: int | None) -> int:
        return int(self._p.add_task(label, total=total))

    def advance(self, task: int, n: int) -> None:
        self._pending += n
        if self._pending >= 1 << 20:
            self._p.advance(task, self._pending)  # type: ignore[arg-type]
            self._pending = 0

    def finish(self, task: int) -> None:
        self._p.advance(task, self._pending)  # type: ignore[arg-type]
        self._pending = 0
