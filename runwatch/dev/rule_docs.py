"""The rule tables of docs/rules.md and docs/contract.md, made from the rules themselves, and
the fatal-error catalogue's table of docs/catalogue.md, made from emitters/catalogue.toml.

    .venv/bin/python -m runwatch.dev.rule_docs           # rewrites the tables
    .venv/bin/python -m runwatch.dev.rule_docs --check   # exit 1 if a checked-in one differs

Each built-in rule (`runwatch.stream.rules.BUILTIN_RULES`, found in its modules) says when it fires
(`Rule.fires_when`, with `{param}` for a default), its severity and its parameter model; the
tables are written between `<!-- rules:NAME:begin -->` and `<!-- rules:NAME:end -->`
markers, so a default changed in a model (or a signature added to the catalogue) changes the
docs with one command (`make docs`), and tests/unit/test_rule_docs.py fails until it is run.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runwatch.emitters.catalogue import CATALOGUE
from runwatch.stream.rules import BUILTIN_RULES, Rule
from runwatch.stream.rules.base import Params

ROOT = Path(__file__).resolve().parents[2]
#: parameters every rule takes, described once under the tables
COMMON = frozenset(Params.model_fields)


def defaults(rule: type[Rule[Any]]) -> dict[str, Any]:
    """A rule's parameters at their defaults, by the names a config file uses."""
    model = rule.params_model()
    return {
        info.alias or name: getattr(model, name)
        for name, info in rule.params_model.model_fields.items()
        if name not in COMMON
    }


def _value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return json.dumps(value, ensure_ascii=False)


def fires_when(rule: type[Rule[Any]]) -> str:
    model = rule.params_model()
    return rule.fires_when.format(**{n: getattr(model, n) for n in rule.params_model.model_fields})


def readme_table() -> str:
    rows = ["| rule | severity | fires when |", "|---|---|---|"]
    rows += [f"| `{r.id}` | {r.severity} | {fires_when(r)} |" for r in BUILTIN_RULES]
    return "\n".join(rows)


def contract_table() -> str:
    """Each rule with when it fires and its parameters: what the contract says of a rule
    whose section-7 prose has not been written, and what that prose is checked against."""
    rows = ["| rule id | severity | fires when | parameters (default) |", "|---|---|---|---|"]
    for r in BUILTIN_RULES:
        params = ", ".join(f"`{k}` ({_value(v)})" for k, v in defaults(r).items()) or "—"
        rows.append(f"| `{r.id}` | {r.severity} | {fires_when(r)} | {params} |")
    return "\n".join(rows)


def incidents_table() -> str:
    """Which rule's alert explains which in an incident (`Rule.explains`)."""
    rows = ["| rule id | its alert explains those of |", "|---|---|"]
    for r in BUILTIN_RULES:
        if r.explains:
            rows.append(f"| `{r.id}` | {', '.join(f'`{x}`' for x in sorted(r.explains))} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def catalogue_table() -> str:
    """Every signature of the fatal-error catalogue: where it comes from and what it names."""
    rows = ["| framework | signature | versions read | source | component | means |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for s in CATALOGUE.signatures:
        rows.append(
            f"| {_cell(s.framework)} | `{_cell(s.pattern.pattern)}` | {_cell(s.versions)} "
            f"| {_cell(s.source)} | {s.component} | {s.meaning.replace('_', ' ')} |"
        )
    return "\n".join(rows)


TABLES = {
    ROOT / "docs" / "rules.md": {"summary": readme_table},
    ROOT / "docs" / "contract.md": {"parameters": contract_table, "incidents": incidents_table},
    ROOT / "docs" / "catalogue.md": {"catalogue": catalogue_table},
}


def _marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- rules:{name}:begin[^>]*-->\n)(.*?)(<!-- rules:{name}:end -->)", re.S)


def render(text: str, tables: dict[str, Callable[[], str]]) -> str:
    """`text` with each marked table replaced by what the rules say now."""
    for name, make in tables.items():
        pattern = _marked(name)
        if pattern.search(text) is None:
            raise ValueError(f"no <!-- rules:{name}:begin --> ... end --> markers")
        table = make().replace("\\", "\\\\")
        text = pattern.sub(rf"\g<1>{table}\n\g<3>", text)
    return text


def stale() -> list[Path]:
    """The files whose tables differ from what the rules say."""
    out = []
    for path, tables in TABLES.items():
        text = path.read_text(encoding="utf-8")
        if render(text, tables) != text:
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        out = stale()
        for path in out:
            where = path.relative_to(ROOT)
            print(f"{where}: rule tables are stale; run make docs", file=sys.stderr)
        return 1 if out else 0
    for path, tables in TABLES.items():
        text = path.read_text(encoding="utf-8")
        new = render(text, tables)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
