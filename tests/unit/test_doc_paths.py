"""Every file a doc or a module docstring names exists: a newcomer who follows a pointer
(`stream/kafka/checkpoints.py`, `scripts/trl_env.sh`) must find it. Names are read from the
README, docs/, the fixtures' notes, and the docstrings of every module of the project."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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


def _docs() -> dict[str, str]:
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
