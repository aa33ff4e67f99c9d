"""Every `runwatch` command the README and the pages under docs/ show exists and takes the
flags it is shown with: each command line in a code block, and each inline `runwatch ...` in
the text, is checked against the command's own parser (and its sub-commands'), so no page can
drift from `--help` unnoticed."""

from __future__ import annotations

import argparse
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest

from runwatch.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[2]
#: the README and every page it links to
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: a runwatch call where a shell command starts (after VAR=value words, `&&`, `|`, `;`)
_CALL = re.compile(
    r"(?:^|[;&|(]\s*)\s*(?:[A-Z_]+=\S*\s+)*(?:\.venv/bin/)?runwatch\s+([a-z][a-z-]*)(.*)$"
)


def calls(page: Path) -> list[str]:
    """The command lines a page shows: each line of a code block, and each inline code
    span (`runwatch ...` in the text, which may wrap across lines)."""
    text = page.read_text()
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        lines += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    lines += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return lines


def shown(page: Path) -> list[tuple[str, str, list[str]]]:
    """(the line, the command, its --flags) of each runwatch call a page shows."""
    out = []
    for line in calls(page):
        m = _CALL.search(line)
        if m is None:
            continue
        try:
            words = shlex.split(m.group(2), comments=True)
        except ValueError:
            words = m.group(2).split()
        if "--" in words:
            words = words[: words.index("--")]  # what follows is the watched command
        flags = [w.strip("[]").split("=")[0] for w in words if w.strip("[]").startswith("--")]
        out.append((line.strip(), m.group(1), flags))
    return out


def options(parser: argparse.ArgumentParser) -> set[str]:
    """A parser's option strings, with those of every sub-command under it."""
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= options(sub)
    return found


def every_call() -> list[tuple[str, str, str, list[str]]]:
    """(the page, the line, the command, its --flags) of every runwatch call shown."""
    return [(p.relative_to(ROOT).as_posix(), *call) for p in PAGES for call in shown(p)]


def test_the_pages_show_commands() -> None:
    per_page = Counter(page for page, *_ in every_call())
    assert per_page["README.md"] >= 8
    assert len(every_call()) > 60
    for name in ("watch.md", "kafka.md", "history.md", "serve.md", "rules.md", "slack.md"):
        assert per_page[f"docs/{name}"] > 0, name


@pytest.mark.parametrize(
    ("page", "line", "command", "flags"), every_call(), ids=lambda v: str(v)[:60]
)
def test_each_command_a_page_shows_takes_its_flags(
    page: str, line: str, command: str, flags: list[str]
) -> None:
    assert command in COMMANDS, f"{page}: no command {command!r}: {line}"
    top = build_parser(command)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    known = options(sub.choices[command])
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"{page}: {line}: {command} has no {unknown}"
