"""The data tables kept beside the console reader -- the fatal-error catalogue
(`catalogue.toml`) and the declared waits (`waits.toml`) -- read one way: `tomllib` (nothing
heavier at import), each entry built and checked by its module, ids unique."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from importlib import resources
from typing import Any, Protocol, TypeVar

from runwatch.emitters.exceptions import CatalogueError


class _Entry(Protocol):
    @property
    def id(self) -> str: ...


E = TypeVar("E", bound=_Entry)


def load_table(
    text: str | None, file: str, table: str, build: Callable[[dict[str, Any]], E], what: str
) -> tuple[E, ...]:
    """The entries of `text` (TOML; by default the shipped `file`) under `[[table]]`, each
    made by `build`, in order; CatalogueError naming `what` for bad TOML or an id twice."""
    if text is None:
        text = resources.files(__package__).joinpath(file).read_text("utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise CatalogueError(f"{what}: {err}") from err
    entries = tuple(build(raw) for raw in data.get(table, []))
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise CatalogueError(f"{what}: ids twice: {twice}")
    return entries


def checked_keys(
    raw: dict[str, Any],
    what: str,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    kinds: type | tuple[type, ...] = (str, list),
) -> str:
    """The entry's id (`?` where it has none), once every `required` key holds a non-empty
    value of `kinds` and no key is unknown; CatalogueError naming `what` and the id if not."""
    where = str(raw.get("id", "?"))
    missing = [k for k in required if not isinstance(raw.get(k), kinds) or not raw[k]]
    if missing:
        raise CatalogueError(f"{what} {where}: missing or empty {', '.join(missing)}")
    unknown = set(raw) - set(required) - set(optional)
    if unknown:
        raise CatalogueError(f"{what} {where}: unknown keys {', '.join(sorted(unknown))}")
    return where
