"""The docs say what the rules do: the generated tables are current, and every severity and
default the contract's prose states is the one the rule's model has."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from harness.docs import tables
from runwatch.stream.rules import BUILTIN_RULES

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "contract.md"
RULES = {r.id: r for r in BUILTIN_RULES}
#: "`name` (value)": a parameter and its default as the prose writes them
PARAM = re.compile(r"`(\w+)` \((-?[\d.]+(?:e-?\d+)?|\[[^\]]*\])\)")
#: "`rule` (severity)" or "`a` and `b` (severity)": where the prose defines rules
DEFINES = re.compile(r"`(\w+)`(?: and `(\w+)`)? \((critical|warning|info)\)")


def _same(stated: str, default: Any) -> bool:
    value = json.loads(stated)
    if isinstance(value, list):
        return value == default
    return isinstance(default, int | float) and float(value) == float(default)


def _section(text: str, number: int) -> str:
    start = text.index(f"\n## {number}.")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_generated_tables_are_current() -> None:
    assert tables.stale() == [], "run `make docs`"


def test_the_tables_list_every_built_in_rule_with_its_defaults() -> None:
    table = tables.contract_table()
    for rule in BUILTIN_RULES:
        assert f"| `{rule.id}` | {rule.severity} | {tables.fires_when(rule)} |" in table
    assert "`timeout` (60)" in table.split("`heartbeat_lost`")[1].split("\n")[0]


def test_section_4_states_each_rule_as_its_model_has_it() -> None:
    rows = [line for line in _section(CONTRACT.read_text(), 4).splitlines()
            if line.startswith("| `")]  # fmt: skip
    assert len(rows) == 7
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        rule = RULES[cells[0].strip("`")]
        assert cells[1] == rule.severity, rule.id
        defaults = tables.defaults(rule)
        for name, stated in PARAM.findall(cells[-1]):
            assert name in defaults, (rule.id, name)
            assert _same(stated, defaults[name]), (rule.id, name, stated, defaults[name])


def _prose_segments() -> list[tuple[list[str], str, str]]:
    """(rules, severity, text) for every place section 7 defines rules."""
    text = _section(CONTRACT.read_text(), 7).split("### The built-in rules")[0]
    marks = list(DEFINES.finditer(text))
    out = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        ids = [x for x in m.groups()[:2] if x]
        out.append((ids, m.group(3), text[m.end() : end]))
    return out


def test_section_7_states_each_rule_as_its_model_has_it() -> None:
    """The prose is optional for a new rule (the generated table describes every one), but
    what it states must hold."""
    segments = [s for s in _prose_segments() if all(i in RULES for i in s[0])]
    named = {m for m in DEFINES.findall(_section(CONTRACT.read_text(), 7)) for m in m[:2] if m}
    assert named <= set(RULES), f"the contract describes no such rules: {named - set(RULES)}"
    checked = 0
    for ids, severity, text in segments:
        for rule_id in ids:
            rule = RULES[rule_id]
            assert severity == rule.severity, rule_id
            defaults = tables.defaults(rule)
            for name, stated in PARAM.findall(text):
                if name in defaults:
                    assert _same(stated, defaults[name]), (rule_id, name, stated)
                    checked += 1
    assert checked > 20  # the prose does state defaults: this test reads them


@pytest.mark.parametrize("rule", BUILTIN_RULES, ids=lambda r: r.id)
def test_every_rule_says_when_it_fires(rule: Any) -> None:
    assert rule.fires_when
    assert tables.fires_when(rule)
