"""The tables of docs/rules.md, docs/contract.md and docs/catalogue.md made from the code:
the rules', the event kinds', the fatal-error catalogue's (emitters/catalogue.toml) and the
declared waits' (emitters/waits.toml).

    .venv/bin/python -m harness.docs.tables           # rewrites the tables
    .venv/bin/python -m harness.docs.tables --check   # exit 1 if a checked-in one differs

Each built-in rule (`runwatch.stream.rules.BUILTIN_RULES`, found in its modules) says when it fires
(`Rule.fires_when`, with `{param}` for a default), its severity and its parameter model; each
event kind (`runwatch.emitters.events.KNOWN_KINDS`, found as its model is defined) its fields,
their types and notes, when it is emitted, and which of its fields the contract pins. The
tables are written between `<!-- NAME:begin -->` and `<!-- NAME:end -->` markers, so a
default or a field changed in a model (or a signature added to the catalogue) changes the
docs with one command (`make docs`), and tests/unit/test_rule_docs.py and
tests/unit/emitters/test_kinds.py fail until it is run.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from runwatch.emitters import schema
from runwatch.emitters.bounds import INT64_MAX, INT64_MIN
from runwatch.emitters.catalogue import CATALOGUE, load_read
from runwatch.emitters.events import KNOWN_KINDS, Event
from runwatch.emitters.schema import FieldShape, Maybe, OneOf, Shape, fields_of
from runwatch.emitters.waits import DECLARED
from runwatch.stream.rules import BUILTIN_RULES, Rule
from runwatch.stream.rules.base import Params

ROOT = Path(__file__).resolve().parents[2]
#: parameters every rule takes, described once under the tables
COMMON = frozenset(Params.__struct_fields__)


def defaults(rule: type[Rule[Any]]) -> dict[str, Any]:
    """A rule's parameters at their defaults, by the names a config file uses."""
    model = rule.params_model()
    return {
        f.encode_name: getattr(model, f.name)
        for f in msgspec.structs.fields(rule.params_model)
        if f.name not in COMMON
    }


def _value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return json.dumps(value, ensure_ascii=False)


def fires_when(rule: type[Rule[Any]]) -> str:
    model = rule.params_model()
    return rule.fires_when.format(**{n: getattr(model, n) for n in model.__struct_fields__})


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


def read_table() -> str:
    """The frameworks read for the catalogue that give it nothing (its `[[read]]` entries)."""
    rows = ["| framework | versions read | source | what it writes instead |",
            "|---|---|---|---|"]  # fmt: skip
    for r in load_read():
        rows.append(
            f"| {_cell(r.framework)} | {_cell(r.versions)} | {_cell(r.source)} | {_cell(r.found)} |"
        )
    return "\n".join(rows)


def waits_table() -> str:
    """Every wait of the declared-waits catalogue: where it comes from and how it is read."""
    rows = ["| framework | wait | versions read | source | who waits | phase | a line shows |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for w in DECLARED.waits:
        shows = ("the seconds it states" if "n" in w.pattern.groupindex
                 else "the run's time so far" if w.elapsed is not None
                 else f"{w.every:g} s")  # fmt: skip
        if w.lasted:
            shows += f"; a wait from {w.lasted:g} s"
        rows.append(
            f"| {_cell(w.framework)} | `{_cell(w.pattern.pattern)}` | {_cell(w.versions)} "
            f"| {_cell(w.source)} | {w.component} | `{w.phase}` | {shows} |"
        )
    return "\n".join(rows)


def _type_doc(shape: Shape) -> str:
    """A value's type as the table of kinds writes it: `int`, `float 0..1`, `{str: float or
    null}`, `` `ok` / `error` ``."""
    if isinstance(shape, schema.Num):
        name = shape.type.__name__
        if (shape.ge, shape.le) == (INT64_MIN, INT64_MAX):
            return name  # every integer of an event is 64-bit (contract §1)
        if shape.ge is not None and shape.le is not None:
            return f"{name} {_value(shape.ge)}..{_value(shape.le)}"
        return name
    if isinstance(shape, schema.Text):
        return "str"
    if isinstance(shape, schema.Flag):
        return "bool"
    if isinstance(shape, OneOf):
        return " / ".join(f"`{v}`" for v in shape.values)
    if isinstance(shape, schema.MapOf):
        return f"{{{_type_doc(shape.key)}: {_type_doc(shape.value)}}}"
    if isinstance(shape, schema.ListOf):
        most = f"at most {shape.max_length}" if shape.max_length is not None else "any number"
        return f"{most} of {_type_doc(shape.item)}"
    if isinstance(shape, schema.Object):
        return "{" + ", ".join(_field_doc(f) for f in fields_of(shape.model)) + "}"
    if isinstance(shape, Maybe):
        return f"{_type_doc(shape.inner)} or null"
    return "any"


def _field_doc(field: FieldShape) -> str:
    """One field as the contract's table writes it: "`name` type [opt] [(note)]"; a required
    choice of values as "`name`: `a` / `b`"."""
    shape = field.shape.inner if isinstance(field.shape, Maybe) else field.shape
    typed = field.shape_doc or _type_doc(shape)
    text = f"`{field.name}`{':' if field.required and isinstance(shape, OneOf) else ''} {typed}"
    text += "" if field.required else " opt"
    return text + (f" ({field.note})" if field.note else "")


def kind_fields(model: type[Event], which: str = "all") -> list[FieldShape]:
    """A kind's own fields: "all", "pinned" (those the contract's table pins, in its order),
    or "added" (the others)."""
    own = {f.name: f for f in fields_of(model, Event.model_fields)}
    pinned = model.pinned or ()
    if which == "pinned":
        return [own[name] for name in pinned]
    return [f for f in own.values() if which == "all" or f.name not in pinned]


def _kind_row(kind: str, fields: list[FieldShape], when: str) -> str:
    return f"| `{kind}` | {'; '.join(_field_doc(f) for f in fields)} | {when} |"


def kinds_table() -> str:
    """The contract's table of kinds the rules read (section 1), made from the models: the
    kinds and fields it pins, in its words."""
    rows = ["| kind | fields | emitted when |", "|---|---|---|"]
    for kind, model in KNOWN_KINDS.items():
        if model.pinned is not None:
            rows.append(_kind_row(kind, kind_fields(model, "pinned"), model.emitted_when))
    return "\n".join(rows)


def added_kinds_table() -> str:
    """What this implementation adds to section 1's table: its kinds, and its fields of the
    contract's kinds."""
    rows = ["| kind | fields | emitted when |", "|---|---|---|"]
    for kind, model in KNOWN_KINDS.items():
        added = kind_fields(model, "added")
        if model.pinned is None:
            rows.append(_kind_row(kind, added, model.emitted_when))
        elif added:
            rows.append(_kind_row(kind, added, "as in section 1; these fields are additions"))
    return "\n".join(rows)


TABLES = {
    ROOT / "docs" / "rules.md": {"rules:summary": readme_table},
    ROOT / "docs" / "contract.md": {
        "events:kinds": kinds_table,
        "events:added": added_kinds_table,
        "rules:parameters": contract_table,
        "rules:incidents": incidents_table,
    },
    ROOT / "docs" / "catalogue.md": {
        "rules:catalogue": catalogue_table,
        "read:catalogue": read_table,
        "waits:catalogue": waits_table,
    },
}


def _marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {name}:begin[^>]*-->\n)(.*?)(<!-- {name}:end -->)", re.S)


def render(text: str, tables: dict[str, Callable[[], str]]) -> str:
    """`text` with each marked table replaced by what the rules say now."""
    for name, make in tables.items():
        pattern = _marked(name)
        if pattern.search(text) is None:
            raise ValueError(f"no <!-- {name}:begin --> ... end --> markers")
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
            print(f"{where}: generated tables are stale; run make docs", file=sys.stderr)
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
