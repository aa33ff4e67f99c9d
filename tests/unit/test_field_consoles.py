"""Consoles users posted when their runs hung or died (tests/fixtures/consoles/field/): each
raises, through `runwatch diagnose`'s reading, the alerts its text supports and no other,
with the evidence in the summary; every healthy control raises none."""

from __future__ import annotations

import tomllib
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from runwatch.diagnose import diagnose

FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "consoles" / "field"
MANIFEST: dict[str, dict[str, Any]] = tomllib.loads((FIELD / "MANIFEST.toml").read_text())


def test_every_console_of_the_folder_is_in_the_manifest_with_its_source() -> None:
    assert {p.stem for p in FIELD.glob("*.log")} == set(MANIFEST)
    for name, entry in MANIFEST.items():
        head = (FIELD / f"{name}.log").read_text(encoding="utf-8").splitlines()[0]
        if entry["source"] == "render.py":
            assert head.startswith("# rendered by render.py"), name
        else:
            assert head == f"# source: {entry['source']}", name


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_a_console_raises_what_its_text_supports(name: str) -> None:
    entry = MANIFEST[name]
    found = diagnose([FIELD / f"{name}.log"], day=date(2026, 11, 24))
    firing = [a for a in found.alerts if a.state == "firing"]
    assert sorted({a.rule for a in firing}) == sorted(entry["rules"]), [a.summary for a in firing]
    said = " | ".join(a.summary for a in firing)
    for text in entry.get("evidence", []):
        assert text in said, f"{text!r} not in {said!r}"
