"""Waits by a console's grammar (`runwatch.emitters.stalls`, `Waits._generic_wait`): a line
that says something waits, said again and again or saying it lasted a minute, is its
process's wait when no framework's reader knows it; the next line that is no wait ends it, so
only a console that ends in it hung there.

Lines marked with a URL are as users posted them there. The rest are wordings written for
these tests, of no framework: what is tested is the grammar, not a framework's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runwatch.diagnose import diagnose
from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.logparse import Found

#: https://github.com/vllm-project/vllm/issues/14025 (vLLM V0's OpenAI server at DEBUG: the
#: API server's client has had no output from its engine process, every ten seconds)
MQ = "DEBUG 02-27 20:{m:02d}:{s:02d} client.py:192] Waiting for output from MQLLMEngine.\n"
#: vLLM V1's stats line (loggers.py): `Waiting` is a count there, no wait
STATS = (
    "INFO 02-27 20:21:{s:02d} [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 35.2 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 0.1%, Prefix cache hit rate: 0.0%\n"
)


def mq(count: int) -> str:
    """`count` of #14025's lines, ten seconds apart from 20:17:48."""
    return "".join(MQ.format(m=17 + (48 + 10 * k) // 60, s=(48 + 10 * k) % 60)
                   for k in range(count))  # fmt: skip


def statuses(text: str) -> list[dict[str, Any]]:
    parser = LineParser()
    found: list[Found] = []
    for line in text.splitlines():
        found += parser.parse(line)
    return [f for k, f in found if k == "rank.status"]


def stalled(tmp_path: Path, text: str) -> list[str]:
    """The summaries of ranks_stalled's firings `runwatch diagnose` gives the text."""
    log = tmp_path / "console.log"
    log.write_text(text)
    alerts = diagnose([log]).alerts
    return [a.summary for a in alerts if a.rule == "ranks_stalled" and a.state == "firing"]


def test_a_wait_said_again_and_again_at_the_console_s_end_is_its_hang(tmp_path: Path) -> None:
    """#14025's console ends in seventeen of its waiting lines: the process waited there, and
    the rule names the wait in the line's own words."""
    (summary,) = stalled(tmp_path, mq(17))
    assert "Waiting for output from MQLLMEngine" in summary
    assert statuses(mq(3))[0] == {
        "rank": 0, "world_size": 1, "phase": "Waiting for output from MQLLMEngine", "waited": 0.0
    }  # fmt: skip
    assert statuses(mq(2)) == []  # said twice: not yet a wait


def test_a_wait_the_console_goes_on_after_is_no_hang(tmp_path: Path) -> None:
    """The same lines with the engine's stats after them: the console went on, and the
    stats line's `Waiting: 0 reqs` is a count, not a wait."""
    text = mq(17) + STATS.format(s=0)
    assert stalled(tmp_path, text) == []
    assert statuses(text)[-1] == {"rank": 0, "world_size": 1, "phase": "exited"}
    assert statuses(STATS.format(s=0) * 5) == []


def test_a_wait_line_that_says_it_lasted_a_minute_is_a_wait(tmp_path: Path) -> None:
    """One line that states a minute or more of waiting is enough, in any unit; less is a
    pause. The phase leaves the duration out (the same wait, said later, is the same phase)."""
    line = "[rank3]: trainer still waiting for the rollout workers for {n}\n"
    (found,) = statuses(line.format(n="120 seconds"))
    assert (found["rank"], found["phase"], found["waited"]) == (
        3, "waiting for the rollout workers", 120.0)  # fmt: skip
    assert statuses(line.format(n="2 minutes"))[0]["waited"] == 120.0
    assert statuses(line.format(n="90000 ms"))[0]["waited"] == 90.0
    assert statuses(line.format(n="30 seconds")) == []
    assert stalled(tmp_path, "2025-01-02 03:04:05 " + line.format(n="120 seconds"))


def test_timeouts_backoffs_idle_servers_and_code_are_no_waits() -> None:
    """A timeout or a failure is the collectives' and the catalogue's to read; a backoff, a
    server idle for its next request, a traceback's frame in `wait` are no stall."""
    lines = [
        "worker 2 timed out after waiting for 600 seconds",
        "waiting 120 seconds before retrying the download",
        "Server idle, waiting for new requests (300 seconds so far)",
        '  File "/usr/lib/python3.10/threading.py", line 324, in wait',
        "    self.not_empty.wait(remaining)",
        "ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress",
    ]
    for line in lines:
        assert statuses(f"{line}\n" * 4) == [], line


def test_watch_s_scanner_reads_the_waits_and_the_line_that_ends_them() -> None:
    """`runwatch watch` reads only lines with a marker -- and, while such a wait is open, the
    line after it, whatever it holds: a plain line ends the wait, as diagnose reads it."""
    parser = LineParser()
    scanner = LineScanner(parser)
    waiting = scanner.feed(mq(3).encode())
    assert [f["phase"] for k, f in waiting if k == "rank.status"] == [
        "Waiting for output from MQLLMEngine"]  # fmt: skip
    went_on = scanner.feed(b"saving checkpoint to /ckpt\n")
    assert [f["phase"] for k, f in went_on if k == "rank.status"] == ["exited"]
    assert not parser.following
