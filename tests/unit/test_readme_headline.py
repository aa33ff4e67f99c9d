"""The README opens as a new user needs it: its title, one line of what runwatch is, its two
commands, then "Watch your own job in three commands" (serve, watch, alerts). That section
quotes an alert and shows it as a terminal shows it: both are what runwatch prints for the
bundled sandbox incident, word for word."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runwatch.console import alert_line
from runwatch.dev import scenarios
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine

README = Path(__file__).resolve().parents[2] / "README.md"
THREE = "## Watch your own job in three commands"


def head() -> str:
    """The README up to its first section after the three commands."""
    text = README.read_text()
    return text[: text.index("\n## ", text.index(THREE) + len(THREE))]


def test_the_readme_opens_with_its_title_a_line_and_its_two_commands() -> None:
    text = README.read_text()
    title, line, block = re.match(r"# (\S+)\n\n([^\n]+)\n\n```\n(.*?)```", text, re.S).groups()  # type: ignore[union-attr]
    assert title == "runwatch"
    assert line.startswith("Event-sourced run state and alerting")
    assert block.strip().split("\n") == ["make demo", "make test"]
    assert text.index("\n## ") == text.index(THREE) - 1  # the first section: three commands


def test_the_three_commands_are_serve_watch_and_alerts() -> None:
    section = head().split(THREE)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None
    words = [line.split()[:2] for line in block[1].strip().splitlines()]
    assert words == [[".venv/bin/runwatch", c] for c in ("serve", "watch", "alerts")]


def test_the_headline_alert_is_what_runwatch_says() -> None:
    text = " ".join(head().split())
    quoted = re.search(r'\*"(511 of 512 [^"]+)"\*', text)
    assert quoted is not None
    engine = Engine()
    summaries = []
    for event in scenarios.sandbox_hang():
        summaries += [a.summary for a in engine.apply(decode(json.dumps(event).encode()))]
    assert quoted[1] in summaries


def test_the_headline_console_lines_are_what_runwatch_prints() -> None:
    block = re.search(r"```\n(\d{4}-.*?)```", head(), re.S)
    assert block is not None
    engine = Engine()
    printed = []
    for event in scenarios.sandbox_hang():
        printed += [alert_line(a) for a in engine.apply(decode(json.dumps(event).encode()))]
    shown = block[1].strip().splitlines()
    assert shown
    assert shown == printed[: len(shown)]
