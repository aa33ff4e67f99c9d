"""A job whose every free-text field carries markup: labels (keys and values), a progress
name (an alert's subject, and an SVG row of the run's timeline), trajectory ids, phases,
metric keys, and a console error that an alert's summary quotes. The pages must show each
as text; none may add an element or run a script."""

from __future__ import annotations

import re
from typing import Any

from runwatch.service.page_layout import REFRESH_JS

RUN = "markup-job"
#: closes an attribute and adds an element with a handler
ATTR = '"><img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=2</script>"
SVG = "<svg onload=window.__pwned=3>"
LABELS = {"team": SCRIPT, f"k{ATTR}": f"v{ATTR}", "svg": SVG}
PROGRESS = f"Rollout{ATTR}{SCRIPT}"
TRAJ = f"t{ATTR}"
PHASE = "<b>sandbox</b>"
METRIC = f"gen{SCRIPT}"
ERROR = f"RuntimeError: {ATTR}{SCRIPT}"
#: each text as a person must see it on the pages
TEXTS = (SCRIPT, f"k{ATTR}=v{ATTR}", SVG, PROGRESS)


RANKS_RUN = "markup-ranks"
#: a stack frame's function, as a hostile process reports it
FRAME = f"recv{SCRIPT}"


def ranks_job(t0: float) -> list[dict[str, Any]]:
    """Three ranks that stop changing phase from `t0`: ranks_stalled opens the run's first
    incident (at t0 + 300) and asks for the stacks; the ranks answer, two with one stack (a
    group), one with a frame whose function name carries markup; process_stacks is the
    incident's evidence."""
    out: list[dict[str, Any]] = []
    request = f"incident|{RANKS_RUN}|1"

    def src(r: int) -> dict[str, Any]:
        return {"component": "trainer", "host": f"node-{r}", "pid": 100 + r, "rank": r}

    def emit(ts: float, kind: str, r: int, **fields: Any) -> None:
        out.append({"v": 1, "id": f"{RANKS_RUN}-{len(out):05d}", "ts": round(ts, 3),
                    "run": RANKS_RUN, "kind": kind, "src": src(r), **fields})  # fmt: skip

    emit(t0, "run.started", 0, labels={"team": "ranks"})
    for r, phase in ((0, "recv"), (1, "destroy_pg"), (2, "destroy_pg")):
        emit(t0 + 1 + r, "rank.status", r, rank=r, world_size=3, phase=phase)
    for r, inner in ((0, FRAME), (1, "destroy_process_group"), (2, "destroy_process_group")):
        frames = [{"file": "/w/train.py", "line": 42, "function": "step"},
                  {"file": f"/w/{PHASE}.py", "line": 7, "function": inner}]  # fmt: skip
        emit(t0 + 310, "process.stacks", r, request=request, how="emitter",
             threads=[{"name": "MainThread", "frames": frames}])  # fmt: skip
    return out


def markup_job(t0: float) -> list[dict[str, Any]]:
    """Ten minutes of the job from `t0`: a progress bar that advanced every 3 s and stops
    (stuck_progress fires, its subject the bar's name), a step with a trajectory, and a
    failed rollout worker (component_failed quotes its error)."""
    out: list[dict[str, Any]] = []
    trainer = {"component": "trainer", "host": "node-9", "pid": 1}
    rollout = {"component": "rollout", "host": "node-9", "pid": 2}

    def emit(ts: float, kind: str, src: dict[str, Any] = trainer, **fields: Any) -> None:
        out.append({"v": 1, "id": f"{RUN}-{len(out):05d}", "ts": round(ts, 3), "run": RUN,
                    "kind": kind, "src": src, **fields})  # fmt: skip

    emit(t0, "run.started", labels=LABELS, total_steps=10)
    emit(t0 + 1, "step.started", step=1)
    emit(t0 + 2, "trajectory.started", rollout, traj=TRAJ, step=1)
    emit(t0 + 3, "trajectory.phase", rollout, traj=TRAJ, phase=PHASE)
    for i in range(25):
        emit(t0 + 5 + 3 * i, "progress", n=i, total=100, name=PROGRESS)
    emit(t0 + 60, "trajectory.done", rollout, traj=TRAJ, status="ok", step=1, duration_s=58.0)
    emit(t0 + 70, "step.done", step=1, duration_s=69.0, timing={METRIC: 12.5})
    emit(t0 + 90, "component.failed", rollout, error=ERROR, how="exception")
    for k in range(60):
        emit(t0 + 10 * k, "heartbeat")
    out.sort(key=lambda e: e["ts"])
    return out


#: the one script a page may carry: its own reload, allowed by the answer's nonce
OUR_SCRIPT = re.compile(
    r'<script nonce="[\w-]+" data-every="\d+">' + re.escape(REFRESH_JS) + "</script>"
)


def no_markup_of_the_job(page: str) -> None:
    """Nothing the job sent became an element or an attribute of `page` (HTML source)."""
    page, ours = OUR_SCRIPT.subn("", page)
    assert ours <= 1
    assert "<script" not in page
    assert "<img" not in page
    assert "<svg onload" not in page
    assert 'onerror="' not in page
