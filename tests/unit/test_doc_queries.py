"""Every SQL query the README, the pages under docs/ and the Helm chart's NOTES.txt show runs
as written against a runwatch history: a `runwatch sql "..."` line, or a ```sql block. The
flags of those lines are checked by test_readme_commands.py; this checks the query itself
(its tables, views and columns), which a page can otherwise get wrong unnoticed until a new
user pastes it."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from runwatch.store import Store
from runwatch.store.sql import query

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "helm" / "runwatch" / "templates" / "NOTES.txt"]  # fmt: skip
_SQL_CALL = re.compile(r"runwatch\s+sql\s+(.*)$")


def shown_queries(page: Path) -> list[str]:
    """The queries a page shows: the argument of each `runwatch sql` line, each sql block."""
    text = page.read_text()
    found = [block.strip() for block in re.findall(r"```sql\n(.*?)```", text, re.S)]
    for line in text.replace("\\\n", " ").splitlines():
        m = _SQL_CALL.search(line)
        if m is None:
            continue
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:
            continue  # prose that names the command, not a command line
        if words and not words[0].startswith("-") and words[0] != "...":
            found.append(words[0])
    return found


def every_query() -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), q) for p in PAGES for q in shown_queries(p)]


def test_the_pages_show_queries() -> None:
    pages = {page for page, _ in every_query()}
    assert {"README.md", "docs/serve.md", "docs/history.md",
            "helm/runwatch/templates/NOTES.txt"} <= pages  # fmt: skip


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("history") / "h.duckdb"
    Store.writer(path).close()  # the schema and its views, as serve and the sink make them
    store = Store.reader(path)
    yield store
    store.close()


@pytest.mark.parametrize(("page", "sql"), every_query(), ids=lambda v: str(v)[:50])
def test_each_query_a_page_shows_runs(history: Store, page: str, sql: str) -> None:
    query(history, sql)  # QueryFailed names the missing table or column
