"""Markup that escapes by default: the pages' one way to write HTML and SVG.

Everything a job can put on a page (run ids, labels, progress names, trajectory ids,
phases, metric keys, summaries quoting console errors) reaches the page through `h()`: a
plain `str` child is escaped, an attribute value is always escaped, and only `Markup` --
what `h()` itself made -- goes in as it is. So no page code has to remember to escape, and
a hostile job's `"><img onerror=...>` is text in every place it can land, SVG included
(inline SVG is parsed by the HTML parser: the same escaping holds there).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from urllib.parse import quote, urlencode

#: Elements that have no end tag (HTML's void elements).
VOID = frozenset({"br", "hr", "input", "link", "meta", "img"})


class Markup(str):
    """A string that is already markup: `h()` puts it in as it is."""

    __slots__ = ()


def esc(value: object) -> Markup:
    """`value` as text in markup (quotes escaped too, so it is safe in attributes)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def _children(children: Iterable[object]) -> Iterable[str]:
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, Iterable) and not isinstance(child, str | bytes):
            yield from _children(child)
        else:
            yield esc(child)


def join(*children: object) -> Markup:
    """Children side by side, escaped as in `h()`."""
    return Markup("".join(_children(children)))


def h(tag: str, *children: object, **attrs: object) -> Markup:
    """`<tag attrs>children</tag>`. Attribute names: a trailing `_` is dropped (`class_`),
    other `_` become `-` (`stroke_width`); a value of None or False leaves the attribute
    out, True writes it bare."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{esc(value)}"')
    head = "<" + " ".join(parts) + ">"
    if tag in VOID:
        return Markup(head)
    return Markup(head + "".join(_children(children)) + f"</{tag}>")


def path_part(value: str) -> str:
    """`value` as one segment of a URL path (a run id may hold `/`, `#`, `?`)."""
    return quote(value, safe="")


def link(path: str, **query: str | list[str]) -> str:
    """An href to one of the pages: `path` (ours, starting with /) and its query."""
    pairs = [(k, v) for k, vs in query.items() for v in ([vs] if isinstance(vs, str) else vs)]
    return path + ("?" + urlencode(pairs) if pairs else "")
