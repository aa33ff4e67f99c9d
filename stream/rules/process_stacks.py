"""`process_stacks` (info): where each process of a hung run is, as the evidence of its
incident.

When an incident opens on a hang the engine asks the run's processes for their stacks
(`runwatch.stream.state.stacks`); this rule turns the answers into one alert of the incident
(role `evidence`), `settle` seconds after the request, so that every emitter polling at its
interval has answered: processes whose innermost frames agree are one line ("ranks 0,1,3:
`recv` (distributed_c10d.py:2310) in train.py:42 `step`; rank 2: `destroy_process_group`
..."), the innermost frame of the process's own code named beside the innermost of all;
processes alive that did not answer are named too (a C call holding the GIL answers
nothing). It resolves when the incident closes.
"""

from __future__ import annotations

from typing import Any

import runwatch.emitters as emitters_package
from runwatch.stream.rules.base import (
    QUIET,
    Condition,
    Deadlines,
    Description,
    Params,
    Rule,
    Seconds,
    Verdict,
)
from runwatch.stream.rules.ranks_stalled import compact_ranks
from runwatch.stream.state.run import RunState
from runwatch.stream.state.stacks import Frame, StackAnswer

#: Frames of these places are the runtime's, not the user's code (runwatch's own emitters
#: too, wherever this install has them: an editable one is outside site-packages).
_LIBRARY = ("site-packages", "dist-packages", "/lib/python3", "<frozen", "/runwatch/",
            next(iter(emitters_package.__path__)).rstrip("/") + "/")  # fmt: skip
#: Innermost frames that make two stacks the same place.
SAME = 3
#: Groups and frames an alert keeps in its details.
MAX_GROUPS, MAX_FRAMES = 12, 12


class ProcessStacksParams(Params, frozen=True):
    settle: Seconds = 20.0


def _thread(answer: StackAnswer) -> list[Frame]:
    """The thread that tells where the process is: the main one, else the first."""
    for name, frames in answer.threads:
        if name == "MainThread" and frames:
            return frames
    return next((frames for _, frames in answer.threads if frames), [])


def _frame(f: Frame) -> str:
    file, line, function = f
    return f"`{function}` ({file.rsplit('/', 1)[-1]}:{line})"


def where(frames: list[Frame]) -> str:
    """`recv` (distributed_c10d.py:2310) in `step` (train.py:42): the innermost frame and
    the innermost one of the process's own code."""
    if not frames:
        return "no Python frame"
    inner = frames[-1]
    own = next((f for f in reversed(frames) if not any(x in f[0] for x in _LIBRARY)), None)
    if own is None or own == inner:
        return _frame(inner)
    return f"{_frame(inner)} in {_frame(own)}"


def group(answers: dict[str, StackAnswer]) -> list[dict[str, Any]]:
    """Processes whose innermost frames agree, most processes first."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for process, answer in sorted(answers.items()):
        frames = _thread(answer)
        key: tuple[Any, ...] = (answer.error,) if answer.error else tuple(frames[-SAME:])
        g = groups.setdefault(key, {"processes": [], "ranks": [], "where": (
            f"no stacks: {answer.error}" if answer.error else where(frames)),
            "stack": [list(f) for f in reversed(frames[-MAX_FRAMES:])]})  # fmt: skip
        g["processes"].append(process)
        if answer.rank is not None:
            g["ranks"].append(answer.rank)
    return sorted(groups.values(), key=lambda g: (-len(g["processes"]), g["where"]))


def _who(g: dict[str, Any]) -> str:
    ranks = sorted(g["ranks"])
    if len(ranks) == len(g["processes"]):
        return f"rank{'s' if len(ranks) > 1 else ''} {compact_ranks(ranks)}"
    names = g["processes"]
    return ", ".join(names[:4]) + (f" (+{len(names) - 4})" if len(names) > 4 else "")


class ProcessStacksRule(Rule[ProcessStacksParams]):
    id = "process_stacks"
    severity = "info"
    silence = True
    params_model = ProcessStacksParams
    watches = frozenset({"process.stacks"})
    fires_when = ("a hang opened an incident: the stacks its processes sent, grouped, "
                  "`settle` ({settle:g} s) after runwatch asked for them")  # fmt: skip
    #: an incident's evidence: it joins the incident that asked, neither root nor symptom
    evidence = True

    def check(self, run: RunState, now: float, params: ProcessStacksParams) -> Verdict:
        stacks = run.stacks
        if stacks.request is None or not stacks.answers:
            return QUIET
        d = Deadlines(now)
        d.due(stacks.request, stacks.requested_at, stacks.requested_at + params.settle)
        return d.verdict()

    def describe(
        self, run: RunState, cond: Condition, now: float, params: ProcessStacksParams
    ) -> Description:
        answers = run.stacks.answers
        groups = group(answers)
        timeout = run.config.heartbeat_timeout
        silent = sorted(name for name, p in run.processes.by_id.items()
                        if name not in answers and p.alive(now, timeout))  # fmt: skip
        parts = [f"{_who(g)}: {g['where']}" for g in groups]
        if silent:
            parts.append(f"not answering: {', '.join(silent[:6])}"
                         + (f" (+{len(silent) - 6})" if len(silent) > 6 else ""))  # fmt: skip
        return Description(
            "where each process is: " + "; ".join(parts),
            {
                "groups": [
                    {k: g[k] for k in ("processes", "ranks", "where", "stack")}
                    for g in groups[:MAX_GROUPS]
                ],
                "not_answering": silent,
                "request": cond.key,
            },
        )
