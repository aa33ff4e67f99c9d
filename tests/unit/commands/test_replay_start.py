"""`runwatch replay` as a program: it ends without freeing its objects, its output whole, and
its start loads no library its work does not need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import printed_by_fresh_interpreter

from runwatch.dev.scenarios import SCENARIOS
from runwatch.stream.rules import BUILTIN_RULES, CONTRACT_RULES

PROGRAM = "import sys; from runwatch.cli import main; sys.exit(main())"


def _trace(directory: Path) -> Path:
    """A recorded run whose zero reward makes transitions (ids numbered, alerts printed)."""
    trace = directory / "zero_reward.jsonl"
    trace.write_text("".join(json.dumps(e) + "\n" for e in SCENARIOS["zero_reward"]()))
    return trace


def test_the_program_ends_at_once_with_every_transition_written(tmp_path: Path) -> None:
    """Run as the program (no argv given to `main`), replay ends through `os._exit`: what it
    wrote to a pipe and its status are those of `main` called in process."""
    trace = _trace(tmp_path)
    in_process = subprocess.run(
        [sys.executable, "-c", f"from runwatch.cli import main; main(['replay', {str(trace)!r}])"],
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    program = subprocess.run(
        [sys.executable, "-c", PROGRAM, "replay", str(trace)],
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    assert program.stdout == in_process.stdout
    assert program.stdout.count(b"\n") >= 1


def test_replay_numbers_transitions_without_openssl_and_starts_without_statistics(
    tmp_path: Path,
) -> None:
    """A transition's id is CPython's own SHA-1: no OpenSSL loaded, though the trace's
    transitions are numbered; the rules' medians import `statistics` when one is asked for,
    so an empty trace's start loads none. (Traces that are files: replay refuses /dev/null,
    and a refused start imports nothing.)"""
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    code = (
        "import sys\n"
        "from runwatch.cli import main\n"
        f"empty = main(['replay', {str(empty)!r}])\n"
        "print(empty, 'statistics' in sys.modules)\n"
        f"status = main(['replay', {str(_trace(tmp_path))!r}])\n"
        "print(status, '_hashlib' in sys.modules)\n"
    )
    printed = printed_by_fresh_interpreter(code).splitlines()
    assert [line for line in printed if not line.startswith("{")] == ["0 False", "0 False"]
    assert len(printed) > 2  # (the trace's transitions, between the two answers)


def test_a_replay_of_the_seven_starts_without_the_fleet_stage(tmp_path: Path) -> None:
    """With `shared_cause` off (the contract's seven alone) no fleet incident is judged: its
    stage is not imported."""
    seven = tmp_path / "seven.toml"
    seven.write_text("".join(f"[rules.{r.id}]\nenabled = false\n" for r in BUILTIN_RULES
                             if r.id not in CONTRACT_RULES))  # fmt: skip
    code = (
        "import sys\n"
        "from runwatch.cli import main\n"
        f"status = main(['replay', {str(_trace(tmp_path))!r}, '--config', {str(seven)!r}])\n"
        "print(status, 'runwatch.stream.fleet.stage' in sys.modules)\n"
    )
    assert printed_by_fresh_interpreter(code).splitlines()[-1] == "0 False"
