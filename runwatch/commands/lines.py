"""Reading JSON Lines input for a command: files in the order given (`-` is standard input),
each line with its file and number, in batches of what the input has ready, and at a
terminal a progress bar on standard error."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from typing import IO, Any

from runwatch.emitters.encodings import AsUtf8
from runwatch.exceptions import CommandError
from runwatch.stream.refused import Refused
from runwatch.stream.replay import Batches, Chunk

#: bytes asked of the input at a time: a file gives this many (about a thousand events), a
#: pipe what it holds, up to this
CHUNK = 1 << 18


def report_invalid(bad: Refused) -> None:
    """A refused line on standard error: `FILE:LINE: invalid event: reason`."""
    print(f"{bad.where}: invalid event: {bad.reason}", file=sys.stderr)


def must_exist(files: list[str]) -> None:
    """One line naming the first file that is not there, before any is read."""
    for name in files:
        if name != "-" and not os.path.isfile(name):
            raise CommandError(f"{name}: no such file")


def read_lines(files: list[str], stack: ExitStack, *, progress: bool = False) -> Batches:
    """(file, line number, raw line) of every line, in batches of what the input had ready
    (`Batches`: a pipe's lines reach the reader as they come, not a full batch later); with
    `progress`, a bar while reading when standard error is a terminal."""
    return Batches(_batches(files, stack, progress))


def _batches(files: list[str], stack: ExitStack, progress: bool) -> Iterator[Chunk]:
    bar: Any = _RichProgress(stack) if progress and sys.stderr.isatty() else None
    for name in files:
        stream: IO[bytes]
        if name == "-":
            stream, label = sys.stdin.buffer, "<stdin>"
        else:
            stream, label = stack.enter_context(open(name, "rb")), name  # noqa: SIM115
        task = None
        if bar is not None:
            task = bar.start(label, None if name == "-" else os.path.getsize(name))
        number, read = 1, 0
        for data in _read_chunks(stream):
            if bar is not None:  # the file's bytes, not the text's (a UTF-16 file's is half)
                at = stream.tell() if stream.seekable() else read + len(data)
                bar.advance(task, at - read)
                read = at
            lines = io.BytesIO(data).readlines()
            yield Chunk(label, number, data, lines)
            number += len(lines)
        if bar is not None:
            bar.finish(task)


def _reads(stream: IO[bytes]) -> Iterator[bytes]:
    """What each read of `stream` brought, as UTF-8 (`AsUtf8`: a UTF-16 file's text). `read1`
    takes what a pipe holds without waiting for more."""
    read1 = stream.read1 if hasattr(stream, "read1") else stream.read
    text = AsUtf8()
    while chunk := read1(CHUNK):
        if out := text.feed(chunk):
            yield out
    if out := text.feed(b"", final=True):
        yield out


def _read_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """The text of `stream` in pieces of whole lines (the last perhaps without its newline):
    what one read brought in whole. A line longer than a read is kept in pieces until its
    end comes."""
    pieces: list[bytes] = []  # the start of a line whose end has not come
    for chunk in _reads(stream):
        end = chunk.rfind(b"\n")
        if end < 0:
            pieces.append(chunk)
            continue
        if pieces:
            pieces.append(chunk)
            chunk = b"".join(pieces)
            end += len(chunk) - len(pieces[-1])
            pieces = []
        if end + 1 < len(chunk):
            pieces.append(chunk[end + 1 :])
            chunk = chunk[: end + 1]
        yield chunk
    if pieces:
        yield b"".join(pieces)


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
