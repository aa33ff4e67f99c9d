"""The demo's live view at 80 columns (a laptop terminal, a pipe): every alert's evidence is
readable, not cut to an ellipsis."""

from __future__ import annotations

from rich.console import Console

from runwatch.service.view import alerts_table


def test_the_evidence_is_readable_at_80_columns() -> None:
    summary = ("every inference server idle for 2m while 1 trajectory waits; the oldest, "
               "s3-t031, has sat in sandbox for 14m")  # fmt: skip
    transition = {"ts": 1_800_000_000.0, "state": "firing", "severity": "critical",
                  "rule": "inference_idle_with_pending", "run": "sim-0-job000",
                  "summary": summary}  # fmt: skip
    console = Console(width=80, record=True, color_system=None)
    console.print(alerts_table([transition]))
    text = " ".join(console.export_text().split())
    flat = text.replace("│", " ").replace(" ", "")
    assert "…" not in text
    assert summary.replace(" ", "") in flat  # every word of it, in order
