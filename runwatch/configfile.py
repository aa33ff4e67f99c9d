"""The config file: one TOML file, one schema, whoever reads it.

Its tables are `[rules...]` -- the rules and their parameters (`runwatch.stream.config`) --
and `[slack...]` -- the Slack notifier (`runwatch.notify.config`). The rules' commands
(`replay`, `worker`, `serve --config`, ...) and the notifier (`notify --config`, `serve
--slack-config`) read the same file the same way: every table and key in it is checked, so a
misspelt one anywhere (`[rule.zero_reward]` for `[rules.zero_reward]`, `chanel` for
`channel`) is an error that names it, the known name it is most like, and its line -- never a
default applied in silence.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from runwatch.stream.config import RulesConfig, dotted
from runwatch.stream.exceptions import ConfigError
from runwatch.stream.suggest import did_you_mean

#: The file's top-level tables (`[rules]`: `RulesConfig`; `[slack]`: the notifier's
#: `NotifyConfig`, imported when a file has one: the rules' commands start without it).
TABLES = ("rules", "slack")


class ConfigFile(msgspec.Struct, frozen=True):
    path: Path
    data: dict[str, Any]
    rules: RulesConfig


def read(path: str | Path) -> ConfigFile:
    """The file at `path`, parsed and checked whole; ConfigError (`PATH:LINE: key: what`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{p}: cannot be read: {getattr(err, 'strerror', None) or err}") from None
    import tomllib  # (only a command given a file reads one: not at every start)

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{p}: not valid TOML: {err}") from None
    try:
        for name, value in data.items():
            if name not in TABLES:
                what = "table" if isinstance(value, dict) else "key"
                hint = did_you_mean(name, TABLES) or f" (the file's tables: {', '.join(TABLES)})"
                raise ConfigError(f"{name}: unknown {what}{hint}", (name,))
        rules = RulesConfig.from_mapping(data)
        if "slack" in data:
            from runwatch.notify.config import NotifyConfig

            NotifyConfig.check(data["slack"])
    except ConfigError as err:
        line = line_of(text, err.where)
        raise ConfigError(f"{p}{f':{line}' if line else ''}: {err}", err.where) from None
    return ConfigFile(p, data, rules)


def rules(path: str | Path | None) -> RulesConfig:
    """The rules of the file at `path`, or the built-in defaults when no path is given."""
    return read(path).rules if path else RulesConfig.default()


# -- where a key is written ------------------------------------------------------------------

# (patterns, compiled by `re` at their first use -- a file with a mistake -- and kept in its
# cache: not at every start)
_HEADER = r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$"
_KEY = (r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"
        r"\"[^\"]*\"|'[^']*'))*)\s*=")  # fmt: skip
_PART = r"\s*(?:\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+))\s*(?:\.|$)"


def _parts(dotted_key: str) -> list[str]:
    return [a or b or c for a, b, c in re.findall(_PART, dotted_key)]


def line_of(text: str, where: tuple[str | int, ...]) -> int | None:
    """The line (1-based) where the key at `where` is written -- a table's header, or a key
    in a table -- or, when the path goes deeper than the file writes (a value's own parts),
    where its nearest written part is; None when the parser cannot tell."""
    for depth in range(len(where), 0, -1):
        found = _line(text, list(where[:depth]))
        if found is not None:
            return found
    return None


def _line(text: str, want: list[str | int]) -> int | None:
    table: list[str | int] = []
    arrays: dict[tuple[str | int, ...], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(_HEADER, line)
        if header:
            table = list(_parts(header.group(2)))
            if header.group(1) == "[[":  # an array of tables: the n-th is index n
                name = tuple(table)
                arrays[name] = arrays.get(name, -1) + 1
                table = [*table, arrays[name]]
            else:  # a sub-table of an array's latest element
                for name, index in arrays.items():
                    if tuple(table[: len(name)]) == name and len(table) > len(name):
                        table = [*name, index, *table[len(name) :]]
            if table[: len(want)] == want:
                return number
            continue
        assigned = re.match(_KEY, line)
        if assigned and [*table, *_parts(assigned.group(1))][: len(want)] == want:
            return number
    return None


__all__ = ["TABLES", "ConfigFile", "dotted", "line_of", "read", "rules"]
