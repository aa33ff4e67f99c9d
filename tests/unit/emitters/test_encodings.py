"""A UTF-16 log (Windows PowerShell 5's `>` writes one, after its byte order mark) reads as its
UTF-8 twin: `AsUtf8` on its own, fed in any pieces; `runwatch diagnose` through the commands'
line reader; `runwatch watch` through its output reader."""

from __future__ import annotations

import codecs
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runwatch.commands.lines import read_lines
from runwatch.diagnose import diagnose
from runwatch.emitters.console import LineParser
from runwatch.emitters.encodings import AsUtf8
from runwatch.emitters.watch import OutputReader

#: written for this test: a step line, then an uncaught traceback (a non-ASCII name in it, and
#: a character outside the BMP, which UTF-16 writes as a surrogate pair)
TEXT = (
    "step 1 loss 0.5\r\n"
    "Traceback (most recent call last):\r\n"
    '  File "/app/entraînement.py", line 10, in <module>\r\n'
    "    main()\r\n"
    "RuntimeError: CUDA error: out of memory \U0001f525\r\n"
)
ENCODED = {
    "utf-16-le": codecs.BOM_UTF16_LE + TEXT.encode("utf-16-le"),
    "utf-16-be": codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
    # (UTF-32 LE's mark begins with UTF-16 LE's: two more bytes tell them apart)
    "utf-32-le": codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"),
    "utf-32-be": codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"),
    "utf-8": TEXT.encode(),
}


def fed(data: bytes, size: int) -> bytes:
    text = AsUtf8()
    out = b"".join(text.feed(data[i : i + size]) for i in range(0, len(data), size))
    return out + text.feed(b"", final=True)


@pytest.mark.parametrize("encoding", sorted(ENCODED))
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1 << 16])
def test_any_pieces_of_either_give_the_utf8_text(encoding: str, size: int) -> None:
    assert fed(ENCODED[encoding], size) == TEXT.encode()


def test_bytes_without_a_mark_pass_as_they_are() -> None:
    """Not UTF-8 (a Latin-1 byte), or one byte alone: the readers' own decoding decides."""
    for data in (b"caf\xe9\n", b"x", b"\xff", b""):
        assert fed(data, 1) == data
    broken = codecs.BOM_UTF16_LE + "ab".encode("utf-16-le") + b"\x00\xd8"  # a lone surrogate
    assert fed(broken, 3) == "ab\ufffd".encode()


def test_diagnose_reads_a_utf16_file_as_its_utf8_twin(tmp_path: Path) -> None:
    results = []
    for encoding, data in sorted(ENCODED.items()):
        log = tmp_path / f"{encoding}.log"
        log.write_bytes(data)
        with ExitStack() as stack:
            lines = list(read_lines([str(log)], stack))
        assert [raw for _, _, raw in lines] == TEXT.encode().splitlines(keepends=True)
        found = diagnose([log], lines=lambda path, lines=lines: ((n, r) for _, n, r in lines))
        results.append([(a.rule, a.summary.split(": ", 1)[1]) for a in found.alerts])
    assert all(result == results[0] for result in results)
    assert results[0][0][0] == "component_failed"


def test_watch_reads_a_utf16_output_as_its_utf8_twin() -> None:
    def kinds(data: bytes) -> list[tuple[str, str]]:
        parser = LineParser()
        reader = OutputReader(parser)
        found = [f for i in range(0, len(data), 5) for f in reader.feed(data[i : i + 5])]
        found += reader.finish() + parser.finish()  # (the output's end: `Watcher.pump`)
        return [(kind, str(fields.get("error", ""))) for kind, fields in found]

    plain = kinds(ENCODED["utf-8"])
    assert ("component.failed", "RuntimeError: CUDA error: out of memory \U0001f525") in plain
    assert kinds(ENCODED["utf-16-le"]) == plain


def test_the_year_a_utf16_file_s_dates_say_is_the_year_of_its_short_stamps(tmp_path: Path) -> None:
    """vLLM's `04-29 00:53:54` names no year: the file's first full date does (`_first_date`),
    read as its UTF-8 twin's."""
    text = (
        "INFO 04-29 00:53:54 [train.py:10] step 1 loss 0.5\r\n"
        "INFO 04-29 00:54:54 [train.py:10] step 2 loss nan\r\n"
        "2023-04-29 00:55:00 launcher: job ended\r\n"
    )
    log = tmp_path / "utf16.log"
    log.write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    with ExitStack() as stack:
        lines = list(read_lines([str(log)], stack))
    found = diagnose([log], lines=lambda path: ((n, r) for _, n, r in lines))
    years = {datetime.fromtimestamp(e.ts, UTC).year for e in found.events}
    assert years == {2023}


def test_the_progress_of_a_utf16_file_is_its_bytes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a terminal a bar shows how much of the file is read: the file's bytes, which a
    UTF-16 file has twice as many of as its UTF-8 text -- the bar ends at its size."""
    from runwatch.commands import lines

    advanced: list[int] = []

    class Bar:
        def __init__(self, stack: ExitStack) -> None:
            pass

        def start(self, label: str, total: int | None) -> int:
            return 0

        def advance(self, task: int, n: int) -> None:
            advanced.append(n)

        def finish(self, task: int) -> None:
            pass

    monkeypatch.setattr(lines, "_RichProgress", Bar)
    monkeypatch.setattr(lines.sys.stderr, "isatty", lambda: True)
    path = tmp_path / "ps5.log"
    path.write_bytes(ENCODED["utf-16-le"] * 200)
    with ExitStack() as stack:
        for _ in read_lines([str(path)], stack, progress=True):
            pass
    assert sum(advanced) == path.stat().st_size
