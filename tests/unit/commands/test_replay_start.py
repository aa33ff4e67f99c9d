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
    seven = _seven(tmp_path)
    code = (
        "import sys\n"
        "from runwatch.cli import main\n"
        f"status = main(['replay', {str(_trace(tmp_path))!r}, '--config', {str(seven)!r}])\n"
        "print(status, 'runwatch.stream.fleet.stage' in sys.modules)\n"
    )
    assert printed_by_fresh_interpreter(code).splitlines()[-1] == "0 False"


def _seven(directory: Path) -> Path:
    seven = directory / "seven.toml"
    seven.write_text("".join(f"[rules.{r.id}]\nenabled = false\n" for r in BUILTIN_RULES
                             if r.id not in CONTRACT_RULES))  # fmt: skip
    return seven


def test_a_replay_generates_no_code_and_loads_no_logging(tmp_path: Path) -> None:
    """Replay's records are msgspec structs, not dataclasses (a dataclass compiles the
    source of its methods when its module loads: bench/RESULTS.md, "replay", round 9),
    and with nothing to say it never loads `logging` (`logs.setup(lazily=True)`): with every
    rule (the fleet stage too) and with the seven, on a trace that makes transitions."""
    trace, seven = _trace(tmp_path), _seven(tmp_path)
    code = (
        "import dataclasses, sys\n"
        "from runwatch.cli import main\n"
        f"main(['replay', {str(trace)!r}])\n"
        f"main(['replay', {str(trace)!r}, '--config', {str(seven)!r}])\n"
        "made = [f'{name}.{k}' for name, module in list(sys.modules.items())\n"
        "        if name.startswith('runwatch') for k, c in vars(module).items()\n"
        "        if isinstance(c, type) and c.__module__ == name and dataclasses.is_dataclass(c)]\n"
        "print(sorted(made), 'logging' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.count("\n") >= 2  # (transitions made and written, by both)
    assert done.stderr.strip() == "[] False"


def test_a_replay_that_skips_a_line_says_so_once_logging_loads(tmp_path: Path) -> None:
    """The lazy setup still words the summary as every command does (`runwatch replay: `),
    the first time the command has something to say."""
    trace = _trace(tmp_path)
    trace.write_text(trace.read_text() + "not json\n")
    program = subprocess.run([sys.executable, "-c", PROGRAM, "replay", str(trace)],
                             capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    said = program.stderr.splitlines()
    assert said[0].startswith(f"{trace}:")
    assert "invalid event" in said[0]
    assert said[-1].startswith("runwatch replay: ")
    assert "1 invalid lines skipped" in said[-1]
