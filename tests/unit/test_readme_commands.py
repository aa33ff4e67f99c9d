"""Every `runwatch` command the README shows exists and takes the flags it is shown with:
each command line in a code block, and each inline `runwatch ...` in the text, is checked
against the command's own parser (and its sub-commands'), so the README cannot drift from
`--help` unnoticed."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from runwatch.cli import COMMANDS, build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
#: a runwatch call where a shell command starts (after VAR=value words, `&&`, `|`, `;`)
_CALL = re.compile(
    r"(?:^|[;&|(]\s*)\s*(?:[A-Z_]+=\S*\s+)*(?:\.venv/bin/)?runwatch\s+([a-z][a-z-]*)(.*)$"
)


def calls() -> list[str]:
    """The command lines the README shows: each line of a code block, and each inline code
    span (`runwatch ...` in the text, which may wrap across lines)."""
    text = README.read_text()
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
        lines += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    lines += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    return lines


def shown() -> list[tuple[str, str, list[str]]]:
    """(the line, the command, its --flags) of each runwatch call the README shows."""
    out = []
    for line in calls():
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


def test_the_readme_shows_commands() -> None:
    assert len(shown()) > 20


@pytest.mark.parametrize(("line", "command", "flags"), shown(), ids=lambda v: str(v)[:60])
def test_each_command_the_readme_shows_takes_its_flags(
    line: str, command: str, flags: list[str]
) -> None:
    assert command in COMMANDS, f"no command {command!r}: {line}"
    top = build_parser(command)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    known = options(sub.choices[command])
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"{line}: {command} has no {unknown}"
