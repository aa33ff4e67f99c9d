"""The corpus of real consoles (tests/fixtures/consoles/corpus/, issue 41) is well formed: every
file is in its part's manifest and every entry has its file, each file starts with its source,
the held-out files are the bytes whose hashes were recorded when the corpus was split (so a
later edit of a held-out excerpt fails here), and the split is the one split.py makes from the
labels. How the reader does on the corpus is reported by scripts/corpus_report.py, not here."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CONSOLES = Path(__file__).resolve().parents[1] / "fixtures" / "consoles"
CORPUS = CONSOLES / "corpus"
DEV: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "MANIFEST.toml").read_text())
HELD: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "HELDOUT.toml").read_text())
PARTS = {"dev": DEV, "heldout": HELD}
ENTRIES = sorted((part, ident) for part, manifest in PARTS.items() for ident in manifest)


def _split() -> ModuleType:
    spec = importlib.util.spec_from_file_location("corpus_split", CORPUS / "split.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPLIT = _split()


@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_file_of_a_part_is_in_its_manifest_and_every_entry_has_its_file(part: str) -> None:
    assert {p.name for p in (CORPUS / part).iterdir()} == {f"{i}.log" for i in PARTS[part]}


def test_no_excerpt_is_in_both_parts_and_no_thread_is_used_twice() -> None:
    assert not set(DEV) & set(HELD)
    sources = [e["source"] for e in (*DEV.values(), *HELD.values())]
    assert len(sources) == len(set(sources))
    field = tomllib.loads((CONSOLES / "field" / "MANIFEST.toml").read_text())
    assert not set(sources) & {e["source"] for e in field.values()}


@pytest.mark.parametrize(("part", "ident"), ENTRIES)
def test_a_file_starts_with_its_source_and_what_happened(part: str, ident: str) -> None:
    entry = PARTS[part][ident]
    lines = (CORPUS / part / f"{ident}.log").read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"# source: {entry['source']}"
    assert entry["source"].startswith("https://github.com/")
    assert lines[1] == f"# what happened: {entry['happened']}"
    assert any(line.strip() for line in lines[2:]), "no excerpt after the header"


@pytest.mark.parametrize(("part", "ident"), ENTRIES)
def test_an_entry_has_its_labels(part: str, ident: str) -> None:
    entry = PARTS[part][ident]
    assert entry["framework"]
    assert set(entry["rules"]) <= set(SPLIT.CLASSES)
    if "non_finite_metric" in entry["rules"]:
        assert entry["keys"], "a non-finite metric names its key"
    if "step" in entry:
        assert isinstance(entry["step"], int)


@pytest.mark.parametrize("ident", sorted(HELD))
def test_a_held_out_file_is_the_bytes_recorded_at_the_split(ident: str) -> None:
    data = (CORPUS / "heldout" / f"{ident}.log").read_bytes()
    assert hashlib.sha256(data).hexdigest() == HELD[ident]["sha256"], (
        f"heldout/{ident}.log was edited after the split"
    )


def test_the_split_is_the_one_split_py_makes_from_the_labels() -> None:
    assert SPLIT.assign({**DEV, **HELD}) == set(HELD)
    assert SPLIT.check() == []


def test_the_corpus_has_the_size_the_issue_asks_for() -> None:
    entries = [*DEV.values(), *HELD.values()]
    assert len(entries) >= 150
    assert len({e["framework"] for e in entries}) >= 15
    assert sum(1 for e in entries if not e["rules"]) >= 25
    assert len(HELD) * 3 >= len(entries) - 3  # about one third held out
