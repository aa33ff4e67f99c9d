"""The corpora of real consoles (tests/fixtures/consoles/corpus/ to corpus39/, issue 41) are well
formed: every file is in its part's manifest and every entry has its file, each file starts with
its source, the held-out files are the bytes whose hashes were recorded when the
corpus was split (so a later edit of a held-out excerpt fails here), the split is the one each
corpus' split.py makes from the labels, and no thread is used twice, across the corpora and
field/. How the reader does on them is reported by scripts/corpus_report.py, not here."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from dataclasses import dataclass, field
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


#: The corpora collected off GitHub's issues on purpose: corpus57's request was consoles posted
#: on forums, Q&A sites and blogs (the README's section on it), so its sources are any public
#: https address; every other corpus' source is a GitHub thread.
OFF_GITHUB = frozenset({"corpus57"})


def _file_problems(corpus: str, part: str, ident: str) -> list[str]:
    entry = PARTS[corpus][part][ident]
    lines = (CONSOLES / corpus / part / f"{ident}.log").read_text(encoding="utf-8").splitlines()
    checks = {
        "the first line is not '# source: ' and the manifest's source": lines[0]
        == f"# source: {entry['source']}",
        "the source is not a GitHub thread": entry["source"].startswith("https://github.com/")
        or (corpus in OFF_GITHUB and entry["source"].startswith("https://")),
        "the second line is not '# what happened: ' and the manifest's": lines[1]
        == f"# what happened: {entry['happened']}",
        "no excerpt after the header": any(line.strip() for line in lines[2:]),
        "the excerpt would be taken for the header": not lines[2].startswith("#"),
    }
    return [f"{corpus}/{part}/{ident}: {what}" for what, ok in checks.items() if not ok]


def _label_problems(corpus: str, part: str, ident: str) -> list[str]:
    entry = PARTS[corpus][part][ident]
    checks = {
        "no framework": bool(entry["framework"]),
        "a rule the corpus does not know": set(entry["rules"]) <= set(SPLIT[corpus].CLASSES),
        "a non-finite metric names no key": "non_finite_metric" not in entry["rules"]
        or bool(entry.get("keys")),
        "a step that is not an integer": isinstance(entry.get("step", 0), int),
    }
    return [f"{corpus}/{part}/{ident}: {what}" for what, ok in checks.items() if not ok]


@pytest.mark.parametrize("corpus", CORPORA)
def test_each_file_starts_with_its_source_and_what_happened_and_has_its_labels(
    corpus: str,
) -> None:
    """One test per corpus, naming every excerpt that fails (one per excerpt made thousands
    of tests, most of the corpus files' cost in the inner loop)."""
    problems = [
        problem
        for part in ("dev", "heldout")
        for ident in PARTS[corpus][part]
        for problem in _file_problems(corpus, part, ident) + _label_problems(corpus, part, ident)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("corpus", CORPORA)
def test_each_held_out_file_is_the_bytes_recorded_at_the_split(corpus: str) -> None:
    edited = [
        f"{corpus}/heldout/{ident}.log was edited after the split"
        for ident, entry in PARTS[corpus]["heldout"].items()
        if hashlib.sha256((CONSOLES / corpus / "heldout" / f"{ident}.log").read_bytes()).hexdigest()
        != entry["sha256"]
    ]
    assert not edited, "\n".join(edited)


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


@dataclass(frozen=True)
class Asked:
    """What a corpus was collected to hold, as its request put it (the README's section on
    the corpus says why): its size, frameworks, healthy controls (at least; at most
    `controls_tenths` tenths of it), failures and rules at least; about a third held out."""

    what: str
    size: tuple[int, int | None]
    frameworks: int
    controls: int
    controls_tenths: int | None = None
    failures: int = 0
    rules: dict[str, int] = field(default_factory=dict)


# fmt: off
CF, CT, NF, RS, IS = ("component_failed", "collective_timeout", "non_finite_metric",
                      "ranks_stalled", "inference_stalled")
ASKED = {
    "corpus": Asked("the issue's corpus: 150 or more from 15 or more frameworks", (150, None),
                    15, 25),
    "corpus2": Asked("weighted to non-finite metrics and component failures", (90, None), 15,
                     25, rules={NF: 30, CF: 25}),
    "corpus3": Asked("the same weights, more controls", (90, None), 15, 30,
                     rules={NF: 30, CF: 35}),
    "corpus4": Asked("trainers, engines and launchers the first three had little of", (60, None),
                     30, 15, rules={NF: 10, CF: 25, CT: 5}),
    "corpus5": Asked("non-finite metrics in many shapes, engine and launcher failures, traps",
                     (60, None), 30, 15, rules={NF: 15, CF: 25, CT: 5}),
    "corpus6": Asked("line shapes unlike the earlier corpora's", (50, 80), 30, 15,
                     rules={NF: 15, CF: 15}),
    "corpus7": Asked("RL on Ray, engine deaths, NCCL and gloo, OOM kills, torchrun, SLURM",
                     (50, 70), 20, 10, rules={CF: 20, CT: 8, NF: 5}),
    "corpus8": Asked("HCCL, heartbeat monitor, Ray Train/Tune, lmdeploy, TGI, TRT-LLM, JAX",
                     (50, 70), 25, 10, 3, rules={CF: 20, CT: 8, NF: 4}),
    "corpus9": Asked("ColossalAI, TPUs, ROCm, Ascend, Kubernetes, SLURM, OOM killer, bad GPUs",
                     (50, 70), 35, 10, 3, rules={CF: 25, CT: 4, NF: 4}),
    "corpus10": Asked("launchers, orchestrators and device runtimes", (45, 60), 30, 9, 3,
                      rules={CF: 25, CT: 4}),
    "corpus11": Asked("TPU/JAX runtimes, PhysX, signal handlers, MXNet, XGBoost, Kubeflow",
                      (45, 60), 35, 9, 3, rules={CF: 25}),
    "corpus12": Asked("what runwatch's users run, a quarter trap controls", (45, 60), 25, 11, 3,
                      rules={CF: 28, CT: 4, NF: 2}),
    "corpus13": Asked("what runwatch's users run, engines idle or waiting as controls", (40, 60),
                      20, 11, 3, rules={CF: 20, CT: 4, NF: 4, RS: 2, IS: 1}),
    "corpus14": Asked("the LLM training, RL and inference world, a third controls", (50, 65), 25,
                      15, 4, rules={CF: 25, CT: 4, NF: 5, RS: 1}),
    "corpus15": Asked("axolotl, Unsloth, engine start-up deaths, NCCL network errors, signals",
                      (60, 75), 15, 18, 4, rules={CF: 30, CT: 3, NF: 4, RS: 1}),
    "corpus16": Asked("wordings and paste shapes the earlier corpora have few of", (60, 75), 15,
                      18, 4, rules={CF: 30, CT: 5, NF: 4, RS: 1}),
    "corpus17": Asked("more wordings, traps: null in JSON logs, huge finite gradients", (60, 75),
                      15, 18, 4, rules={CF: 30, CT: 3, NF: 4, RS: 2}),
    "corpus18": Asked("LLM post-training and engines: weight syncs, engine watchdogs", (60, 75),
                      12, 18, 4, rules={CF: 25, CT: 6, NF: 2, RS: 2, IS: 2}),
    "corpus19": Asked("general ML training and launchers: odd metric syntaxes, rank waits",
                      (60, 75), 12, 18, 4, rules={CF: 25, CT: 4, NF: 8, RS: 3}),
    "corpus20": Asked("false alerts and the weakest classes: thirty or more trap controls",
                      (55, 75), 12, 30, failures=25, rules={NF: 6, RS: 4, CT: 4, CF: 10}),
    "corpus21": Asked("LLM RL stacks: rank and engine waits, odd non-finite lines, trap controls",
                      (45, 75), 15, 20, failures=25, rules={RS: 6, NF: 6, CT: 5, CF: 10}),
    "corpus22": Asked("rank waits, collective timeouts, launchers in new wordings; a third traps",
                      (48, 75), 15, 16, failures=25, rules={RS: 10, CT: 5, CF: 10}),
    "corpus23": Asked("as users meet them: LLM RL stacks first, classes as threads show them",
                      (48, 75), 15, 17, failures=25, rules={CF: 10, CT: 4}),
    "corpus24": Asked("weighted to hangs, deaths and traps an RL training cluster meets",
                      (42, 75), 15, 15, failures=25, rules={CF: 12, RS: 4, IS: 4, NF: 3, CT: 2}),
    "corpus25": Asked("out of sample: RL stacks, engines and launchers; about a third traps",
                      (45, 75), 15, 15, failures=25, rules={CF: 12, NF: 3, RS: 3, CT: 3}),
    "corpus26": Asked("hangs and collective timeouts in any wording; about 40% trap controls",
                      (48, 75), 15, 20, failures=25, rules={RS: 10, CT: 8, CF: 12}),
    "corpus27": Asked("out of sample, weighted to hangs (about 15); about 40% trap controls",
                      (45, 60), 15, 18, failures=25, rules={RS: 12, CT: 7, CF: 10}),
    "corpus28": Asked("out of sample, weighted like users post; 35-40% trap controls",
                      (45, 60), 15, 17, failures=25, rules={CF: 12, RS: 7, CT: 6, NF: 4}),
    "corpus29": Asked("out of sample, RL stacks and their engines as users post; 35-40% traps",
                      (45, 60), 15, 17, failures=25, rules={CF: 15, RS: 6, CT: 4, NF: 1}),
    "corpus30": Asked("out of sample, the training substrate, like users post; 35-40% traps",
                      (45, 60), 15, 17, failures=25, rules={CF: 12, RS: 7, CT: 6, NF: 6}),
    "corpus31": Asked("out of sample, hangs: rank, engine and scheduler waits; 35-40% traps",
                      (45, 60), 15, 16, 4, failures=28, rules={RS: 28}),
    "corpus32": Asked("out of sample, hangs and non-finite metrics as users post; 35-40% traps",
                      (45, 60), 15, 18, 4, failures=28, rules={NF: 12, CT: 9, RS: 6, IS: 1}),
    "corpus33": Asked("out of sample, the LLM RL stacks and their engines as users post; traps",
                      (45, 60), 15, 16, 4, failures=29,
                      rules={CF: 18, CT: 9, RS: 1, "zero_reward": 1}),
    "corpus34": Asked("out of sample, the LLM RL trainers as users post; 35-40% traps (36 found)",
                      (35, 60), 14, 13, 4, failures=23, rules={CF: 23}),
    "corpus35": Asked("out of sample, what runs under LLM RL training as users post; traps",
                      (45, 60), 15, 17, 4, failures=28,
                      rules={CF: 19, CT: 5, RS: 3, NF: 2, IS: 1}),
    "corpus36": Asked("out of sample, hangs and non-finite metrics, any trainer; traps (35 found)",
                      (35, 60), 15, 14, 4, failures=21,
                      rules={NF: 9, CF: 7, RS: 2, IS: 2, CT: 1}),
    "corpus37": Asked("out of sample, the 2025-26 LLM RL stacks as users post; traps (35 found)",
                      (35, 60), 15, 14, 4, failures=21, rules={CF: 15, CT: 7}),
    "corpus38": Asked("out of sample, LLM training and serving stacks in Chinese threads; traps",
                      (45, 60), 15, 17, 4, failures=28, rules={CF: 13, CT: 10, NF: 5}),
    "corpus39": Asked("out of sample, training jobs as launchers and schedulers show them; traps",
                      (45, 60), 15, 17, 4, failures=28, rules={CF: 25, CT: 3, RS: 1}),
    "corpus40": Asked("out of sample, LLM RL post-training in the RL frameworks' forks (33 found)",
                      (33, 60), 15, 11, 4, failures=22, rules={CF: 22}),
    "corpus41": Asked("out of sample, the inference side of RL jobs and what hosts it; traps",
                      (40, 60), 15, 16, 4, failures=29, rules={CF: 25, CT: 3, IS: 1}),
    "corpus42": Asked("out of sample, LLM pre-training and fine-tuning at scale as users post",
                      (40, 60), 15, 15, 4, failures=25, rules={CF: 16, CT: 5, NF: 5}),
    "corpus43": Asked("out of sample, LLM training and serving on non-NVIDIA accelerators; traps",
                      (43, 60), 15, 16, 4, failures=27, rules={CF: 24, CT: 2, NF: 1}),
    "corpus44": Asked("out of sample, the LLM RL post-training frameworks as users run them (35)",
                      (35, 60), 15, 13, 4, failures=22, rules={CF: 19, CT: 3}),
    "corpus45": Asked("out of sample, the layers under RL jobs as users post; traps (24 found)",
                      (24, 60), 15, 9, 4, failures=15, rules={CF: 13, CT: 1, NF: 1}),
    "corpus46": Asked("out of sample, schedulers, launchers, training stacks; traps (35 found)",
                      (35, 60), 15, 14, 4, failures=21, rules={CF: 18, CT: 1, NF: 2}),
    "corpus47": Asked("out of sample, RL libraries and simulators outside LLMs; traps (42)",
                      (42, 60), 15, 15, 4, failures=27, rules={CF: 22, CT: 2, NF: 3}),
    "corpus48": Asked("out of sample, consoles pasted in LLM stacks' pull requests (7 found)",
                      (7, 60), 3, 5, failures=2, rules={CF: 2}),
    "corpus49": Asked("out of sample, hangs as users post them: stacks, barriers, engines (35)",
                      (35, 60), 15, 12, 4, failures=23, rules={CF: 8, RS: 6, IS: 6, CT: 4}),
    "corpus50": Asked("out of sample, zero reward, weight syncs, stalled engines: traps (29)",
                      (29, 60), 19, 19, failures=10, rules={CF: 10}),
    "corpus51": Asked("out of sample, hangs, deaths and traps of less covered stacks (28)",
                      (28, 60), 15, 9, 4, failures=19,
                      rules={CF: 8, RS: 6, CT: 3, NF: 2}),
    "corpus52": Asked("out of sample, wide: the frameworks and launchers less covered (36)",
                      (36, 60), 15, 13, 4, failures=23,
                      rules={CF: 13, NF: 7, CT: 2, RS: 1}),
    "corpus53": Asked("out of sample, newer RL stacks and engines (2025-26) and traps (33)",
                      (33, 60), 15, 12, 4, failures=21,
                      rules={CF: 14, CT: 4, NF: 2, IS: 1}),
    "corpus54": Asked("out of sample, pre-training, fine-tuning and serving stacks, traps (34)",
                      (34, 60), 20, 10, 4, failures=24,
                      rules={CF: 19, CT: 5, NF: 5}),
    "corpus55": Asked("out of sample, GPU-cluster training beyond LLM RL, and traps (30)",
                      (30, 60), 20, 8, 4, failures=22,
                      rules={CF: 15, CT: 5, NF: 7}),
    "corpus56": Asked("out of sample, LLM fine-tuning on one node or a few, and traps (30)",
                      (30, 60), 19, 11, 4, failures=19,
                      rules={CF: 12, CT: 4, NF: 3}),
    "corpus57": Asked("out of sample, consoles posted outside GitHub issues: forums, Q&A, blogs"
                      " (28)", (28, 45), 20, 11, 4, failures=17,
                      rules={CF: 9, CT: 6, NF: 1, RS: 1}),
    "corpus58": Asked("out of sample, the LLM RL post-training stacks users run, 2025-2026"
                      " threads (20)", (20, 40), 10, 7, 4, failures=13, rules={CF: 13}),
    "corpus59": Asked("out of sample, frameworks and launchers no earlier corpus cites (28)",
                      (24, 36), 10, 11, 4, failures=17, rules={CF: 9, NF: 5, CT: 3}),
    "corpus60": Asked("out of sample, stalls and hangs whose console shows how long, and"
                      " slow-but-healthy traps (24)", (24, 36), 8, 10, 7, failures=8,
                      rules={IS: 4, CF: 4, RS: 1}),
    "corpus61": Asked("out of sample, training and serving consoles of 2025-2026 threads no"
                      " earlier corpus cites (27)", (24, 36), 10, 10, 4, failures=17,
                      rules={CF: 15, NF: 2}),
}
# fmt: on


def test_every_corpus_says_what_it_was_asked_to_hold() -> None:
    assert set(ASKED) == set(CORPORA)


@pytest.mark.parametrize("corpus", CORPORA)
def test_a_corpus_has_the_size_and_weight_it_was_asked_for(corpus: str) -> None:
    asked, entries = ASKED[corpus], _entries(corpus)
    low, high = asked.size
    assert low <= len(entries) <= (high or len(entries)), asked.what
    assert len({e["framework"] for e in entries}) >= asked.frameworks, asked.what
    controls = sum(1 for e in entries if not e["rules"])
    assert controls >= asked.controls, asked.what
    assert asked.controls_tenths is None or controls * 10 <= len(entries) * asked.controls_tenths
    assert len(entries) - controls >= asked.failures, asked.what
    for rule, least in asked.rules.items():
        assert sum(1 for e in entries if rule in e["rules"]) >= least, (rule, asked.what)
    assert len(PARTS[corpus]["heldout"]) * 3 >= len(entries) - 3  # about one third held out
