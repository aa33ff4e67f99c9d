"""How `runwatch diagnose` reads the corpus of real consoles (issue 41,
tests/fixtures/consoles/corpus/): the development part asserted exactly -- every label met,
every control silent, and each excerpt no reader can place held to what it fires now, with
the reason -- and the held-out part read whole without a crash. Its figures are reported by
scripts/corpus_report.py, never asserted: it is not tuned on, so no test here looks at its
labels or names one of its files."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "consoles" / "corpus"
DEV: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "MANIFEST.toml").read_text())


def _report() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "corpus_report", ROOT / "scripts" / "corpus_report.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["corpus_report"] = module
    spec.loader.exec_module(module)
    return module


REPORT = _report()

#: development excerpts no general rule reads (yet): the rules they fire instead of their
#: labels', and why. A change that reads one fails here too -- then it moves out of this list.
MISSES: dict[str, tuple[list[str], str]] = {
    "exception_roll_actor_worker_error_traceback": (
        [], "ROLL's decorator logs a traceback at ERROR and the paste cuts it before its "
        "exception line: nothing names the exception or says it was uncaught"),
    "fatal_prime_rl_verifiers_connection_error_exiting": (
        [], "loguru's `An error has been caught in function '_run'` (its catch decorator, after "
        "which a program may go on) and a traceback cut before its exception line"),
    "fatal_ray_memory_low_killing_task_ip_prefix": (
        [], "Ray 2.1's `System memory low at node ... killing latest task` is not in the "
        "fatal-error catalogue"),
    "fatal_vllm_omni_orchestrator_crashed_500": (
        [], "an exception line logged at ERROR with no frames before it, and the API server "
        "answers on (500): a logged error by the grammar"),
    "nccl_c10d_tcpstore_timeouterror_backtick": (
        ["collective_timeout"], "the TimeoutError follows a code line that lost its "
        "indentation (`return TCPStore(`), no frames: no traceback to read"),
    "nccl_gloo_connect_full_mesh_timeout": (
        ["component_failed"], "gloo's `connectFullMesh failed ... Connect timeout` is no "
        "timed-out collective the collective reader knows"),
    "nccl_llamafactory_line_numbered_flight_recorder": (
        [], "only the flight recorder's wait and `taking the entire process down`, no "
        "watchdog line naming the collective"),
    "stalled_horovod_ready_ranks_after_bar": (
        [], "Horovod's stall warning (ranks that did not submit a tensor) has no reader"),
    "stalled_horovod_stall_inspector_mpirun": (
        [], "Horovod's stall inspector has no reader"),
}  # fmt: skip


@pytest.mark.parametrize("ident", sorted(DEV))
def test_a_development_excerpt_raises_exactly_what_its_labels_say(ident: str) -> None:
    entry = DEV[ident]
    result = REPORT.run_one(CORPUS / "dev" / f"{ident}.log", entry["rules"])
    assert result.crash is None, result.crash
    expected, why = MISSES.get(ident, (sorted(entry["rules"]), ""))
    assert result.fired == sorted(expected), (why or "labels not met", result.summaries)
    if not entry["rules"]:
        assert result.fired == [], "a healthy control raised an alert"


def test_every_listed_miss_is_a_development_excerpt_with_a_reason() -> None:
    assert set(MISSES) <= set(DEV)
    assert all(why for _, why in MISSES.values())


def test_the_held_out_part_is_read_whole_without_a_crash() -> None:
    """Read, not scored: its figures are scripts/corpus_report.py's to print."""
    files = sorted((CORPUS / "heldout").glob("*.log"))
    assert len(files) >= 50
    crashes = sum(REPORT.run_one(path, []).crash is not None for path in files)
    assert crashes == 0, f"{crashes} held-out excerpts crashed the reader"
