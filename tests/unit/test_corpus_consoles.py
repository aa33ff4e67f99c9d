"""The corpora of real consoles (tests/fixtures/consoles/corpus/ to corpus20/, issue 41) are well
formed: every file is in its part's manifest and every entry has its file, each file starts with
its source, the held-out files are the bytes whose hashes were recorded when the
corpus was split (so a later edit of a held-out excerpt fails here), the split is the one each
corpus' split.py makes from the labels, and no thread is used twice, across the corpora and
field/. How the reader does on them is reported by scripts/corpus_report.py, not here."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from scripts.corpus_report import CONSOLES, CORPORA


def _manifest(corpus: str, name: str) -> dict[str, dict[str, Any]]:
    return tomllib.loads((CONSOLES / corpus / name).read_text(encoding="utf-8"))


def _split(corpus: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{corpus}_split", CONSOLES / corpus / "split.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PARTS = {
    corpus: {
        "dev": _manifest(corpus, "MANIFEST.toml"),
        "heldout": _manifest(corpus, "HELDOUT.toml"),
    }
    for corpus in CORPORA
}
SPLIT = {corpus: _split(corpus) for corpus in CORPORA}
ENTRIES = sorted(
    (corpus, part, ident)
    for corpus, parts in PARTS.items()
    for part, manifest in parts.items()
    for ident in manifest
)
HELD = sorted((corpus, ident) for corpus in CORPORA for ident in PARTS[corpus]["heldout"])


def _entries(corpus: str) -> list[dict[str, Any]]:
    return [*PARTS[corpus]["dev"].values(), *PARTS[corpus]["heldout"].values()]


def test_every_corpus_folder_is_one_of_the_corpora() -> None:
    """The corpora are the folders, found: one split and manifested is never left unread."""
    folders = {p.parent.name for p in CONSOLES.glob("corpus*/split.py")}
    assert len(folders) >= 10
    assert set(CORPORA) == folders


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("part", ["dev", "heldout"])
def test_every_file_of_a_part_is_in_its_manifest_and_every_entry_has_its_file(
    corpus: str, part: str
) -> None:
    files = {p.name for p in (CONSOLES / corpus / part).iterdir()}
    assert files == {f"{i}.log" for i in PARTS[corpus][part]}


@pytest.mark.parametrize("corpus", CORPORA)
def test_no_excerpt_is_in_both_parts(corpus: str) -> None:
    assert not set(PARTS[corpus]["dev"]) & set(PARTS[corpus]["heldout"])


def test_no_thread_is_used_twice_across_the_corpora_and_field() -> None:
    sources = [e["source"] for corpus in CORPORA for e in _entries(corpus)]
    assert len(sources) == len(set(sources))
    field = tomllib.loads((CONSOLES / "field" / "MANIFEST.toml").read_text())
    assert not set(sources) & {e["source"] for e in field.values()}


@pytest.mark.parametrize(("corpus", "part", "ident"), ENTRIES)
def test_a_file_starts_with_its_source_and_what_happened(
    corpus: str, part: str, ident: str
) -> None:
    entry = PARTS[corpus][part][ident]
    lines = (CONSOLES / corpus / part / f"{ident}.log").read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"# source: {entry['source']}"
    assert entry["source"].startswith("https://github.com/")
    assert lines[1] == f"# what happened: {entry['happened']}"
    assert any(line.strip() for line in lines[2:]), "no excerpt after the header"
    assert not lines[2].startswith("#"), "the excerpt would be taken for the header"


@pytest.mark.parametrize(("corpus", "part", "ident"), ENTRIES)
def test_an_entry_has_its_labels(corpus: str, part: str, ident: str) -> None:
    entry = PARTS[corpus][part][ident]
    assert entry["framework"]
    assert set(entry["rules"]) <= set(SPLIT[corpus].CLASSES)
    if "non_finite_metric" in entry["rules"]:
        assert entry["keys"], "a non-finite metric names its key"
    if "step" in entry:
        assert isinstance(entry["step"], int)


@pytest.mark.parametrize(("corpus", "ident"), HELD)
def test_a_held_out_file_is_the_bytes_recorded_at_the_split(corpus: str, ident: str) -> None:
    data = (CONSOLES / corpus / "heldout" / f"{ident}.log").read_bytes()
    assert hashlib.sha256(data).hexdigest() == PARTS[corpus]["heldout"][ident]["sha256"], (
        f"{corpus}/heldout/{ident}.log was edited after the split"
    )


@pytest.mark.parametrize("corpus", CORPORA)
def test_the_split_is_the_one_split_py_makes_from_the_labels(corpus: str) -> None:
    parts = PARTS[corpus]
    assert SPLIT[corpus].assign({**parts["dev"], **parts["heldout"]}) == set(parts["heldout"])
    assert SPLIT[corpus].check() == []


@pytest.mark.parametrize("corpus", CORPORA[1:])
def test_a_later_corpus_is_split_by_the_first_corpus_procedure_with_its_own_seed(
    corpus: str,
) -> None:
    impl = SPLIT[corpus]._impl
    assert Path(impl.__file__).resolve() == (CONSOLES / "corpus" / "split.py").resolve()
    assert CONSOLES / corpus == impl.HERE
    assert impl.SEED == SPLIT[corpus].SEED
    assert len({SPLIT[c].SEED for c in CORPORA}) == len(CORPORA)


def _count(entries: list[dict[str, Any]], rule: str) -> int:
    return sum(1 for e in entries if rule in e["rules"])


def test_the_first_corpus_has_the_size_the_issue_asks_for() -> None:
    entries = _entries("corpus")
    assert len(entries) >= 150
    assert len({e["framework"] for e in entries}) >= 15
    assert sum(1 for e in entries if not e["rules"]) >= 25
    assert len(PARTS["corpus"]["heldout"]) * 3 >= len(entries) - 3  # about one third held out


def test_the_second_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    entries = _entries("corpus2")
    assert len(entries) >= 90
    assert len({e["framework"] for e in entries}) >= 15
    assert sum(1 for e in entries if not e["rules"]) >= 25
    assert _count(entries, "non_finite_metric") >= 30
    assert _count(entries, "component_failed") >= 25
    assert len(PARTS["corpus2"]["heldout"]) * 3 >= len(entries) - 3


def test_the_third_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    entries = _entries("corpus3")
    assert len(entries) >= 90
    assert len({e["framework"] for e in entries}) >= 15
    assert sum(1 for e in entries if not e["rules"]) >= 30
    assert _count(entries, "non_finite_metric") >= 30
    assert _count(entries, "component_failed") >= 35
    assert len(PARTS["corpus3"]["heldout"]) * 3 >= len(entries) - 3


def test_the_fourth_corpus_has_the_size_and_breadth_it_was_asked_for() -> None:
    """Sixty or more excerpts from trainers, engines and launchers the first three had little of."""
    entries = _entries("corpus4")
    assert len(entries) >= 60
    assert len({e["framework"] for e in entries}) >= 30
    assert sum(1 for e in entries if not e["rules"]) >= 15
    assert _count(entries, "non_finite_metric") >= 10
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 5
    assert len(PARTS["corpus4"]["heldout"]) * 3 >= len(entries) - 3


def test_the_fifth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Sixty or more excerpts weighted where the reader was weakest: non-finite metrics in many
    trainers' and loggers' shapes, engines' and launchers' component failures, trap controls."""
    entries = _entries("corpus5")
    assert len(entries) >= 60
    assert len({e["framework"] for e in entries}) >= 30
    assert sum(1 for e in entries if not e["rules"]) >= 15
    assert _count(entries, "non_finite_metric") >= 15
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 5
    assert len(PARTS["corpus5"]["heldout"]) * 3 >= len(entries) - 3


def test_the_sixth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Fifty to eighty excerpts unlike the earlier corpora's: non-finite metrics in many more
    trainers' and loggers' line shapes, engines' and launchers' component failures, trap
    controls."""
    entries = _entries("corpus6")
    assert 50 <= len(entries) <= 80
    assert len({e["framework"] for e in entries}) >= 30
    assert sum(1 for e in entries if not e["rules"]) >= 15
    assert _count(entries, "non_finite_metric") >= 15
    assert _count(entries, "component_failed") >= 15
    assert len(PARTS["corpus6"]["heldout"]) * 3 >= len(entries) - 3


def test_the_seventh_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Fifty to seventy excerpts from the trainers and launchers the earlier corpora cover thinly
    (RL frameworks on Ray, vLLM and SGLang engine deaths, NCCL and gloo wordings, OOM kills,
    torchrun and SLURM consoles), about a fifth of them healthy controls."""
    entries = _entries("corpus7")
    assert 50 <= len(entries) <= 70
    assert len({e["framework"] for e in entries}) >= 20
    assert sum(1 for e in entries if not e["rules"]) >= 10
    assert _count(entries, "component_failed") >= 20
    assert _count(entries, "collective_timeout") >= 8
    assert _count(entries, "non_finite_metric") >= 5
    assert len(PARTS["corpus7"]["heldout"]) * 3 >= len(entries) - 3


def test_the_eighth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Fifty to seventy excerpts of frameworks, launchers and wordings the earlier corpora cover
    thinly (Ascend's HCCL, torch's heartbeat monitor, Ray Train and Tune, lmdeploy, TGI,
    TensorRT-LLM, JAX, SLURM steps), about a fifth to a quarter of them healthy controls that
    look alarming."""
    entries = _entries("corpus8")
    assert 50 <= len(entries) <= 70
    assert len({e["framework"] for e in entries}) >= 25
    assert 10 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 3 // 10
    assert _count(entries, "component_failed") >= 20
    assert _count(entries, "collective_timeout") >= 8
    assert _count(entries, "non_finite_metric") >= 4
    assert len(PARTS["corpus8"]["heldout"]) * 3 >= len(entries) - 3


def test_the_ninth_corpus_has_the_size_and_breadth_it_was_asked_for() -> None:
    """Fifty to seventy excerpts wider than the earlier corpora in frameworks, launchers and
    devices (ColossalAI, torch_xla on TPUs, ROCm, Ascend, Kubernetes and Kubeflow, SLURM, the
    kernel's OOM killer, ECC and fallen-off-the-bus GPUs), about a fifth to a quarter of them
    healthy controls that look alarming."""
    entries = _entries("corpus9")
    assert 50 <= len(entries) <= 70
    assert len({e["framework"] for e in entries}) >= 35
    assert 10 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 3 // 10
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 4
    assert _count(entries, "non_finite_metric") >= 4
    assert len(PARTS["corpus9"]["heldout"]) * 3 >= len(entries) - 3


def test_the_tenth_corpus_has_the_size_and_breadth_it_was_asked_for() -> None:
    """Forty-five to sixty excerpts spread over launchers, orchestrators and device runtimes
    (torch elastic, DeepSpeed's launcher, Open MPI, YARN, Kubernetes and Kubeflow pod
    statuses, glog FATAL lines with and without their prefix, gloo peers, Ascend, ROCm and
    TPU runtimes, Ray), about a fifth to a quarter of them healthy controls that look
    alarming."""
    entries = _entries("corpus10")
    assert 45 <= len(entries) <= 60
    assert len({e["framework"] for e in entries}) >= 30
    assert 9 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 3 // 10
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 4
    assert len(PARTS["corpus10"]["heldout"]) * 3 >= len(entries) - 3


def test_the_eleventh_corpus_has_the_size_and_breadth_it_was_asked_for() -> None:
    """Forty-five to sixty excerpts from programs and runtimes the first ten corpora hold few
    of (TPU and JAX runtimes, Isaac Lab's PhysX, Paddle's and glog's signal handlers, MXNet,
    XGBoost on Spark, Kubeflow's operator, the kernel's Killed and SIGFPE), about a fifth to a
    quarter of them healthy controls that look alarming."""
    entries = _entries("corpus11")
    assert 45 <= len(entries) <= 60
    assert len({e["framework"] for e in entries}) >= 35
    assert 9 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 3 // 10
    assert _count(entries, "component_failed") >= 25
    assert len(PARTS["corpus11"]["heldout"]) * 3 >= len(entries) - 3


def test_the_twelfth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Forty-five to sixty excerpts weighted towards what runwatch's users run (verl and its
    forks, OpenRLHF, ms-swift, NeMo-RL, slime, ROLL, Unsloth, vLLM and SGLang engines, Ray,
    torch distributed and elastic, torchrun, mpirun, SLURM, Kubernetes), about a quarter of
    them healthy controls that look alarming (loss-scale overflow skips, preemption and
    retraction warnings, NCCL and scheduler warnings, exceptions ignored at shutdown)."""
    entries = _entries("corpus12")
    assert 45 <= len(entries) <= 60
    assert len({e["framework"] for e in entries}) >= 25
    assert 11 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 3 // 10
    assert _count(entries, "component_failed") >= 28
    assert _count(entries, "collective_timeout") >= 4
    assert _count(entries, "non_finite_metric") >= 2
    assert len(PARTS["corpus12"]["heldout"]) * 3 >= len(entries) - 3


def test_the_thirteenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """About forty-five excerpts weighted towards what runwatch's users run (verl and its forks,
    NeMo-RL, slime, TRL, LLaMA-Factory, vLLM V0/V1 and SGLang engines, Ray, torch distributed,
    torchrun, accelerate, mpirun, SLURM), about a quarter of them healthy controls that look
    alarming (loss-scale overflow notes, c10d and barrier warnings, exceptions ignored at exit,
    an idle engine, an engine client waiting at start-up)."""
    entries = _entries("corpus13")
    assert 40 <= len(entries) <= 60
    assert len({e["framework"] for e in entries}) >= 20
    assert 11 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 3 // 10
    assert _count(entries, "component_failed") >= 20
    assert _count(entries, "collective_timeout") >= 4
    assert _count(entries, "non_finite_metric") >= 4
    assert _count(entries, "ranks_stalled") >= 2
    assert _count(entries, "inference_stalled") >= 1
    assert len(PARTS["corpus13"]["heldout"]) * 3 >= len(entries) - 3


def test_the_fourteenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Fifty to sixty-five excerpts across the LLM training, RL and inference world (verl,
    OpenRLHF, TRL, ms-swift, LLaMA-Factory, Unsloth, SkyRL, AReaL, NeMo-RL, Megatron,
    DeepSpeed, vLLM and SGLang, Ray and RLlib, torchrun and torch elastic, Horovod, fairseq),
    about two thirds failures whose signal is in the text and a third healthy controls, many
    of them traps (loss-scale overflow skips, warnings and retries, busy or idle engines)."""
    entries = _entries("corpus14")
    assert 50 <= len(entries) <= 65
    assert len({e["framework"] for e in entries}) >= 25
    assert 15 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 4 // 10
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 4
    assert _count(entries, "non_finite_metric") >= 5
    assert _count(entries, "ranks_stalled") >= 1
    assert len(PARTS["corpus14"]["heldout"]) * 3 >= len(entries) - 3


def test_the_fifteenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Sixty or more excerpts from fifteen or more trainers, engines and launchers, weighted to
    the ones earlier corpora have few of (axolotl, Unsloth, SGLang's and vLLM's start-up and
    scheduler deaths, NCCL's own network errors, Slurm and torch elastic's signals, segfaults),
    about two thirds failures whose signal is in the text and a third healthy controls, many
    of them traps (errors logged and survived, weight-update requests answered, huge finite
    gradient norms, exit-time warnings)."""
    entries = _entries("corpus15")
    assert 60 <= len(entries) <= 75
    assert len({e["framework"] for e in entries}) >= 15
    assert 18 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 4 // 10
    assert _count(entries, "component_failed") >= 30
    assert _count(entries, "collective_timeout") >= 3
    assert _count(entries, "non_finite_metric") >= 4
    assert _count(entries, "ranks_stalled") >= 1
    assert len(PARTS["corpus15"]["heldout"]) * 3 >= len(entries) - 3


def test_the_sixteenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Sixty or more excerpts from fifteen or more trainers, engines and launchers (vLLM V0 and V1,
    verl and its forks, SGLang, Ray, torch distributed, Unsloth, Lightning, DeepSpeed, TRL,
    ms-swift, NeMo-RL, AReaL, PRIME-RL, EasyR1, slime, Megatron, Ascend), in wordings and paste
    shapes the earlier corpora have few of, about two thirds failures whose signal is in the text
    and a third healthy controls, many of them traps (start-ups, survived warnings, slow but
    moving engines, store barriers that fill)."""
    entries = _entries("corpus16")
    assert 60 <= len(entries) <= 75
    assert len({e["framework"] for e in entries}) >= 15
    assert 18 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 4 // 10
    assert _count(entries, "component_failed") >= 30
    assert _count(entries, "collective_timeout") >= 5
    assert _count(entries, "non_finite_metric") >= 4
    assert _count(entries, "ranks_stalled") >= 1
    assert len(PARTS["corpus16"]["heldout"]) * 3 >= len(entries) - 3


def test_the_seventeenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Sixty or more excerpts from fifteen or more trainers, engines and launchers (torch
    distributed, vLLM V0/V1 and vllm-ascend, verl and EasyR1, TRL, ms-swift, SkyRL, RLinf, Ray,
    SGLang, DeepSpeed, Megatron, NeMo Automodel, Lightning, Horovod, SLURM, Open MPI, NCCL,
    TensorFlow, Keras, JAX, Paddle, fairseq, mmdet), in wordings the earlier corpora have few of,
    about two thirds failures whose signal is in the text and a third healthy controls, many of
    them traps (start-ups, survived warnings, finite losses before a NaN the text lacks, null in
    a JSON log, huge but finite gradients)."""
    entries = _entries("corpus17")
    assert 60 <= len(entries) <= 75
    assert len({e["framework"] for e in entries}) >= 15
    assert 18 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 4 // 10
    assert _count(entries, "component_failed") >= 30
    assert _count(entries, "collective_timeout") >= 3
    assert _count(entries, "non_finite_metric") >= 4
    assert _count(entries, "ranks_stalled") >= 2
    assert len(PARTS["corpus17"]["heldout"]) * 3 >= len(entries) - 3


def test_the_eighteenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Sixty or more excerpts from twelve or more LLM post-training frameworks and inference
    engines (verl, OpenRLHF, TRL, AReaL, slime, SkyRL, NeMo-RL, EasyR1, Unsloth, ms-swift,
    LLaMA-Factory, torchtune, axolotl, vLLM V0/V1 and vllm-ascend, SGLang, lmdeploy, TensorRT-LLM,
    Ray, DeepSpeed, Megatron), weighted to what the older corpora have few of (weight-sync
    failures, store waits of a weight sync, engine watchdogs, declared waits of an engine), about
    two thirds failures whose signal is in the text and a third healthy controls, many of them
    traps (start-ups, a serving engine's stats, zero losses and rewards, huge finite losses, an
    inf request rate in a benchmark summary, a warning that a hang is possible)."""
    entries = _entries("corpus18")
    assert 60 <= len(entries) <= 75
    assert len({e["framework"] for e in entries}) >= 12
    assert 18 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 4 // 10
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 6
    assert _count(entries, "non_finite_metric") >= 2
    assert _count(entries, "ranks_stalled") >= 2
    assert _count(entries, "inference_stalled") >= 2
    assert len(PARTS["corpus18"]["heldout"]) * 3 >= len(entries) - 3


def test_the_nineteenth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Sixty or more excerpts from twelve or more trainers and launchers of general ML training
    (not the LLM-RL frameworks and engines of corpus18: Paddle, TensorFlow, JAX and XLA, torch
    distributed and elastic, Horovod, Open MPI, MPICH, SLURM, detectron2, mmdet, fairseq,
    Lightning, NeMo, transformers, accelerate, diffusers, ColossalAI, MindSpore, DGL, RLlib,
    stable-baselines3), about two thirds failures whose signal is in the text -- weighted to
    non-finite metrics in unusual syntaxes, ranks waiting on each other, timeouts in new
    wordings and deaths reported by launchers -- and a third healthy controls, many of them
    traps (start-ups, warnings, fp16 overflow skips that go on, zero losses, finite lines before
    a NaN the text lacks)."""
    entries = _entries("corpus19")
    assert 60 <= len(entries) <= 75
    assert len({e["framework"] for e in entries}) >= 12
    assert 18 <= sum(1 for e in entries if not e["rules"]) <= len(entries) * 4 // 10
    assert _count(entries, "component_failed") >= 25
    assert _count(entries, "collective_timeout") >= 4
    assert _count(entries, "non_finite_metric") >= 8
    assert _count(entries, "ranks_stalled") >= 3
    assert len(PARTS["corpus19"]["heldout"]) * 3 >= len(entries) - 3


def test_the_twentieth_corpus_has_the_size_and_weight_it_was_asked_for() -> None:
    """Fifty-five or more excerpts from twelve or more frameworks of an LLM-RL cluster's stack and
    of general training (torch, torchrun, DeepSpeed, vLLM, Ray, verl, TensorFlow, JAX, Lightning,
    transformers, NCCL, SLURM, MindSpore, Horovod, xgboost ...), weighted to measure false alerts
    and the weakest classes: at least thirty healthy controls that are traps (tracebacks and
    warnings of programs that went on or ended well, retries, compile fallbacks, NCCL/Gloo/c10d
    warnings, fp16 overflow skips, zero losses, finished benchmarks and fits) and at least
    twenty-five failures, weighted to non-finite metrics in odd syntaxes and ranks waiting on each
    other, with collective timeouts and component failures in new wordings."""
    entries = _entries("corpus20")
    assert 55 <= len(entries) <= 75
    assert len({e["framework"] for e in entries}) >= 12
    assert sum(1 for e in entries if not e["rules"]) >= 30
    assert sum(1 for e in entries if e["rules"]) >= 25
    assert _count(entries, "non_finite_metric") >= 6
    assert _count(entries, "ranks_stalled") >= 4
    assert _count(entries, "collective_timeout") >= 4
    assert _count(entries, "component_failed") >= 10
    assert len(PARTS["corpus20"]["heldout"]) * 3 >= len(entries) - 3
