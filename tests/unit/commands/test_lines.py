"""Reading a command's input in batches of what it has ready (`commands.lines`): the same
lines, numbered the same, as iterating the file line by line, however the reads cut it."""

from __future__ import annotations

import io
import random
from contextlib import ExitStack
from pathlib import Path

from runwatch.commands.lines import _read_chunks, read_lines


class Reads:
    """A stream whose every `read1` brings the next of the given pieces: where a pipe's
    reads happen to cut the text."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)

    def read1(self, size: int) -> bytes:
        piece = self.pieces.pop(0) if self.pieces else b""
        assert len(piece) <= size
        return piece


def line_chunks(stream: Reads) -> list[list[bytes]]:
    """The lines of each piece the reader hands on (as `read_lines` splits them)."""
    return [io.BytesIO(data).readlines() for data in _read_chunks(stream)]


LINES = [b'{"a": 1}\n', b'{"b":\r 2}\n', b"\n", b"x" * 5000 + b"\n", b"not json\n",
         b'{"last": true}']  # fmt: skip
TEXT = b"".join(LINES)


def test_the_lines_are_the_file_lines_however_the_reads_cut_them() -> None:
    assert len(TEXT.splitlines()) > len(LINES)  # (a `\r` inside a line does not end it)
    rng = random.Random(5)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(TEXT)), rng.randint(0, 12)))
        pieces = [TEXT[a:b] for a, b in zip([0, *cuts], [*cuts, len(TEXT)], strict=True)]
        chunks = line_chunks(Reads(pieces))
        assert all(chunks)
        got = [line for chunk in chunks for line in chunk]
        assert got == LINES


def test_a_read_that_ends_mid_line_holds_that_line_back() -> None:
    chunks = line_chunks(Reads([b"one\ntw", b"o\nthree\n"]))
    assert chunks == [[b"one\n"], [b"two\n", b"three\n"]]


def test_files_are_numbered_as_lines(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"1\n2\n3")
    second.write_bytes(b"4\n")
    with ExitStack() as stack:
        lines = read_lines([str(first), str(second)], stack)
        assert list(lines) == [(str(first), 1, b"1\n"), (str(first), 2, b"2\n"),
                               (str(first), 3, b"3"), (str(second), 1, b"4\n")]  # fmt: skip
