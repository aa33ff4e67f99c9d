"""`runwatch show` as a terminal prints it: a step that never ended is "running" while its
run is, and "unfinished" once the run has ended (killed, failed or ok) -- a killed job's last
step is not still running."""

from __future__ import annotations

from typing import Any

import pytest

from runwatch.commands.query import render_timeline
from runwatch.store.report import Timeline

T0 = 1_795_934_358.0


def timeline(status: str) -> Timeline:
    run = {"run": "my-job", "status": status, "labels": {}, "last_step": 1, "total_steps": None,
           "first_ts": T0, "last_ts": T0 + 25, "events": 38, "open_alerts": 0}  # fmt: skip
    step: dict[str, Any] = {"step": 1, "start_ts": T0, "end_ts": T0 + 0.5, "duration_s": 0.5,
                            "between_s": None, "idle_s": None, "reward": 0.5,
                            "timing": None}  # fmt: skip
    still_open = {**step, "step": 2, "start_ts": T0 + 0.5, "end_ts": None, "duration_s": None}
    return Timeline(run, steps=[step, still_open])


def step_line(text: str, number: int) -> str:
    return next(ln for ln in text.splitlines() if ln.split()[:1] == [str(number)])


@pytest.mark.parametrize(("status", "said"),
                         [("running", "running"), ("killed", "unfinished"),
                          ("failed", "unfinished"), ("ok", "unfinished")])  # fmt: skip
def test_an_open_step_is_running_only_while_its_run_is(status: str, said: str) -> None:
    text = render_timeline(timeline(status))
    assert said in step_line(text, 2).split()
    assert "0.5s" in step_line(text, 1)
