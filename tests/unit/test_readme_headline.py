"""The README's headline quotes an alert, and shows it as a terminal shows it: both are what
runwatch prints for the bundled sandbox incident, word for word."""

from __future__ import annotations

import json
import re
from pathlib import Path

from runwatch.console import alert_line
from runwatch.dev import incidents
from runwatch.stream.decode import decode
from runwatch.stream.engine import Engine

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_headline_alert_is_what_runwatch_says() -> None:
    head = " ".join(README.read_text().split("## ")[0].split())
    quoted = re.search(r'\*"(511 of 512 [^"]+)"\*', head)
    assert quoted is not None
    engine = Engine()
    summaries = []
    for event in incidents.sandbox_hang():
        summaries += [a.summary for a in engine.apply(decode(json.dumps(event).encode()))]
    assert quoted[1] in summaries


def test_the_headline_console_lines_are_what_runwatch_prints() -> None:
    head = README.read_text().split("## ")[0]
    block = re.search(r"```\n(\d{4}-.*?)```", head, re.S)
    assert block is not None
    engine = Engine()
    printed = []
    for event in incidents.sandbox_hang():
        printed += [alert_line(a) for a in engine.apply(decode(json.dumps(event).encode()))]
    shown = block[1].strip().splitlines()
    assert shown
    assert shown == printed[: len(shown)]
