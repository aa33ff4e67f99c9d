"""The README's headline quotes an alert: it is what runwatch prints for the bundled
sandbox incident, word for word."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
