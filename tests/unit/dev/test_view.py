"""The demo's live view at 80 columns (a laptop terminal, a pipe): every alert's evidence is
readable -- not cut to an ellipsis, not squeezed to a letter per line by long run ids."""

from __future__ import annotations

from rich.console import Console

from runwatch.dev.view import alerts_table


def test_the_evidence_is_readable_at_80_columns() -> None:
    summary = ("every inference server idle for 2m while 1 trajectory waits; the oldest, "
               "s3-t031, has sat in sandbox for 14m")  # fmt: skip
    transition = {"ts": 1_800_000_000.0, "state": "firing", "severity": "critical",
                  "rule": "heartbeat_lost", "subject": "orchestrator@node-2/1025",
                  "run": "grpo-qwen2.5-7b-sandbox-long-run-name", "summary": summary}  # fmt: skip
    console = Console(width=80, record=True, color_system=None)
    console.print(alerts_table([transition]))
    lines = console.export_text().splitlines()
    text = " ".join(lines)
    assert "…" not in text
    assert len(lines) < 12  # a few lines, not a letter per line in a squeezed column
    for word in summary.split():  # every word of the evidence is there, whole
        assert word in text, word
