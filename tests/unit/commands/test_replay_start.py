"""`runwatch replay` as a program: it ends without freeing its objects, its output whole, and
its start loads no library its work does not need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runwatch.dev.scenarios import SCENARIOS
from runwatch.stream.rules import BUILTIN_RULES, CONTRACT_RULES

PROGRAM = "import sys; from runwatch.cli import main; sys.exit(main())"


def test_the_program_ends_at_once_with_every_transition_written(tmp_path: Path) -> None:
    """Run as the program (no argv given to `main`), replay ends through `os._exit`: what it
    wrote to a pipe and its status are those of `main` called in process."""
    trace = tmp_path / "zero_reward.jsonl"
    trace.write_text("".join(json.dumps(e) + "\n" for e in SCENARIOS["zero_reward"]()))
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


def test_replay_starts_without_openssl_or_statistics() -> None:
    """A transition's id is CPython's own SHA-1 (no OpenSSL loaded at start); the rules'
    medians import `statistics` when one is asked for."""
    code = (
        "import sys\n"
        "from runwatch.cli import main\n"
        "main(['replay', '/dev/null'])\n"
        "print(sorted(m for m in sys.modules if m in ('_hashlib', 'statistics')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_replay_of_the_seven_starts_without_the_fleet_stage(tmp_path: Path) -> None:
    """With `shared_cause` off (the contract's seven alone) no fleet incident is judged: its
    stage is not imported."""
    seven = tmp_path / "seven.toml"
    seven.write_text("".join(f"[rules.{r.id}]\nenabled = false\n" for r in BUILTIN_RULES
                             if r.id not in CONTRACT_RULES))  # fmt: skip
    code = (
        "import sys\n"
        "from runwatch.cli import main\n"
        f"main(['replay', '/dev/null', '--config', {str(seven)!r}])\n"
        "print('runwatch.stream.fleet.stage' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "False"
