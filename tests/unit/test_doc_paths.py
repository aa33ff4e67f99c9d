"""Every file a doc or a module docstring names exists: a newcomer who follows a pointer
(`stream/kafka/checkpoints.py`, `scripts/trl_env.sh`) must find it. Names are read from the
README, docs/, the fixtures' notes, and the docstrings of every module of the project.

And no module docstring of the packages or the harness quotes a measured figure: figures
belong in bench/RESULTS.md, with the machine and the date, where a re-run replaces them; a
docstring points to its section."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: top folders of the repository a pointer can start with
TOPS = ("runwatch", "emitters", "stream", "store", "harness", "bench", "scripts", "tests",
        "docs", "examples", "dashboards", "helm")  # fmt: skip
POINTER = re.compile(
    rf"(?<![\w./-])((?:{'|'.join(TOPS)})/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(?:py|sh|md|toml|json|yaml|jsonl|log))"
)
#: the installed package's subpackages live at the top of the repository
PACKAGE = {"runwatch/emitters/": "emitters/", "runwatch/stream/": "stream/",
           "runwatch/store/": "store/"}  # fmt: skip
#: names that stand for a file the reader makes (a how-to's example)
MADE_BY_THE_READER = {"stream/rules/my_rule.py", "tests/unit/stream/rules/test_my_rule.py"}


@functools.cache
def _docs() -> dict[str, str]:
    """Each doc's text and each module's docstring, by path; read once a process (every
    module parsed), for the three checks that read them."""
    texts = {p.relative_to(ROOT).as_posix(): p.read_text() for p in
             [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
              *sorted((ROOT / "tests" / "fixtures").rglob("README.md"))]}  # fmt: skip
    for top in ("runwatch", "emitters", "stream", "store", "harness", "bench", "scripts",
                "dashboards"):  # fmt: skip
        for path in sorted((ROOT / top).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text()))
            if doc:
                texts[path.relative_to(ROOT).as_posix()] = doc
    return texts


def _exists(name: str) -> bool:
    for installed, here in PACKAGE.items():
        if name.startswith(installed):
            name = here + name[len(installed) :]
    return name in MADE_BY_THE_READER or (ROOT / name).exists()


def test_every_file_a_doc_names_exists() -> None:
    missing = sorted(
        f"{where}: {name}"
        for where, text in _docs().items()
        for name in set(POINTER.findall(text))
        if not _exists(name)
    )
    assert missing == []


def test_the_check_finds_pointers() -> None:
    found = {n for text in _docs().values() for n in POINTER.findall(text)}
    assert "stream/kafka/checkpoints.py" in found
    assert len(found) > 50
    assert not _exists("stream/kafka/no_such_module.py")


#: a measured figure: a cost with its unit, an approximate amount, a ratio, a rate, "about N
#: s" -- not a parameter ("a 64 KiB limit", "10 s after the last beat")
FIGURE = re.compile(
    r"~\s?\d[\d.,]*\s?(?:µs|us|ns|ms|s|x|×|%|[KMG]i?B)(?!\w)"
    r"|\d[\d.,]*\s?(?:µs|ns)(?!\w)"
    r"|\d[\d.,]*\s?(?:x|×|times) (?:faster|slower|cheaper|larger|smaller|less|more)(?!\w)"
    r"|\d[\d.,]*k?\s?(?:events|records|lines|requests|POSTs|rows)/s(?!\w)"
    r"|(?<!\w)(?:about|roughly|takes|costs?) \d[\d.,]*\s?(?:s|ms|µs|[KMG]i?B|%)(?!\w)"
    r"|\d[\d.,]*\s?s instead of \d"
)


def test_no_module_docstring_quotes_a_figure() -> None:
    quoted = sorted(
        f"{where}: {m.group(0)!r}"
        for where, text in _docs().items()
        if where.split("/")[0] in ("runwatch", "emitters", "stream", "store", "harness")
        for m in FIGURE.finditer(text)
    )
    assert quoted == [], "point to bench/RESULTS.md instead"


@pytest.mark.parametrize(
    ("text", "figure"),
    [("starts in about 0.3 s instead of 0.9 s", True), ("takes ~1.6 s (bench)", True),
     ("~4x slower to write", True), ("7 µs per record", True), ("at 20k events/s", True),
     ("a 64 KiB limit", False), ("fires 10 s after the last beat", False),
     ("schema version 39", False)],
)  # fmt: skip
def test_the_figure_check_tells_a_figure_from_a_parameter(text: str, figure: bool) -> None:
    assert bool(FIGURE.search(text)) is figure
