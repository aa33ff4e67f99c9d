"""A plain reading of the contract's seven original rules: what someone would write from
docs/contract.md §4 in an afternoon, the yardstick `bench/replay.py` measures runwatch's
per-event cost against.

One dict per run; `json.loads` per line (no validation); every rule of the event's run checked
after every event; every run's rules checked once per second of event time (so that silence
is noticed). No reorder window, no duplicate ids, no incidents, no per-run parameters:
defaults only. Alerts are dicts serialized with `json.dumps`. Close to runwatch's verdicts on
the bench's streams (the bench prints both counts per rule), not a second implementation to
hold runwatch to: that is `Engine(shortcuts=False)`.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from typing import Any

#: the contract's seven rules, with their defaults
SEVEN = ("inference_idle_with_pending", "zero_reward", "stuck_progress", "heartbeat_lost",
         "ranks_stalled", "non_finite_metric", "idle_gap_growing")  # fmt: skip
IDLE_FOR, ZERO_STEPS, EPSILON = 120.0, 5, 1e-9
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean", "task_reward/avg", "reward/mean",
               "reward")  # fmt: skip
MIN_STALL, FACTOR, WINDOW = 300.0, 10.0, 20
HEARTBEAT_TIMEOUT, RANKS_TIMEOUT = 60.0, 300.0
GAP_STEPS, MIN_GAP = 3, 300.0
SEVERITY = {"stuck_progress": "warning", "idle_gap_growing": "warning"}


def new_run() -> dict[str, Any]:
    return {
        "finished": False,
        "procs": {},  # process key -> {"last": ts, "final": bool}
        "servers": {},  # name -> {"running", "waiting", "stats": bool, "inflight": set, "proc"}
        "pending": {},  # traj -> started ts
        "rewards": {},  # step -> reward
        "nonfinite": {},  # step -> [keys]
        "counters": {},  # (component, name) -> {"n", "total", "last", "intervals"}
        "ranks": {},  # rank -> [phase, since]
        "steps": {},  # step -> {"started", "done", "gap"}
        "idle_since": None,
        "firing": {},  # alert key -> since
    }


def proc_key(src: dict[str, Any]) -> str:
    who = src.get("instance") or src.get("pid")
    return f"{src.get('component')}@{src.get('host')}/{who}"


class PlainReader:
    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.now = float("-inf")
        self.swept = float("-inf")
        self.out: list[bytes] = []

    def line(self, raw: bytes) -> None:
        try:
            e = json.loads(raw)
            ts, kind, run_id, src = float(e["ts"]), e["kind"], e["run"], e["src"]
        except (ValueError, KeyError, TypeError):
            return
        if ts > self.now:
            self.now = ts
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = new_run()
        self.fold(run, e, kind, ts, src)
        self.check(run_id, run)
        if self.now - self.swept >= 1.0:  # once a second: every run, for silence
            self.swept = self.now
            for other, state in self.runs.items():
                self.check(other, state)

    # -- state -------------------------------------------------------------------------------

    def fold(self, run: dict[str, Any], e: dict[str, Any], kind: str, ts: float,
             src: dict[str, Any]) -> None:  # fmt: skip
        if kind == "heartbeat":
            p = run["procs"].setdefault(proc_key(src), {"last": ts, "final": False})
            p["last"], p["final"] = max(p["last"], ts), bool(e.get("final"))
        elif kind == "run.finished":
            run["finished"] = True
            run["pending"].clear()
        elif kind == "trajectory.started":
            if not run["finished"]:
                run["pending"].setdefault(e["traj"], ts)
        elif kind == "trajectory.done":
            run["pending"].pop(e["traj"], None)
        elif kind == "inference.stats":
            s = self.server(run, e["server"], src)
            s["running"], s["waiting"], s["stats"] = e["running"], e["waiting"], True
        elif kind in ("request.queued", "request.done"):
            name = e.get("server") or src.get("instance") or src.get("host") or "inference"
            s = self.server(run, name, src if src.get("component") == "inference" else None)
            (s["inflight"].discard if kind == "request.done" else s["inflight"].add)(e["req"])
        elif kind == "reward":
            run["rewards"][e["step"]] = e["mean"]
            if not math.isfinite(e["mean"]):
                run["nonfinite"].setdefault(e["step"], []).append("reward.mean")
        elif kind == "step.metrics":
            metrics = e["metrics"]
            bad = [k for k, v in metrics.items() if v is not None and not math.isfinite(v)]
            run["nonfinite"][e["step"]] = bad
            if e["step"] not in run["rewards"]:
                for key in REWARD_KEYS:
                    if metrics.get(key) is not None:
                        run["rewards"][e["step"]] = metrics[key]
                        break
        elif kind == "progress":
            fresh = {"n": -1, "total": None, "last": ts, "intervals": []}
            c = run["counters"].setdefault((src.get("component"), e["name"]), fresh)
            if e["n"] > c["n"]:
                if c["n"] >= 0:
                    c["intervals"] = (c["intervals"] + [ts - c["last"]])[-WINDOW:]
                c["n"], c["last"] = e["n"], ts
            c["total"] = e.get("total")
        elif kind == "rank.status":
            r = run["ranks"].get(e["rank"])
            if r is None or r[0] != e["phase"]:
                run["ranks"][e["rank"]] = [e["phase"], e.get("since") or ts]
        elif kind == "step.started":
            run["steps"].setdefault(e["step"], {"started": ts, "done": None, "gap": 0.0})
        elif kind == "step.done":
            st = run["steps"].setdefault(e["step"], {"started": ts, "done": None, "gap": 0.0})
            st["done"] = ts
            if run["idle_since"] is not None:
                st["gap"] += ts - max(run["idle_since"], st["started"])
            self.gap_check(run, e["step"])

    @staticmethod
    def server(run: dict[str, Any], name: str, src: dict[str, Any] | None) -> dict[str, Any]:
        s = run["servers"].get(name)
        if s is None:
            s = run["servers"][name] = {"running": 0, "waiting": 0, "stats": False,
                                        "inflight": set(), "proc": None}  # fmt: skip
        if src is not None:
            s["proc"] = proc_key(src)
        return s

    # -- the rules ---------------------------------------------------------------------------

    def check(self, run_id: str, run: dict[str, Any]) -> None:
        now = self.now
        holding: dict[str, float] = {}
        if not run["finished"]:
            for key, p in run["procs"].items():  # heartbeat_lost
                if not p["final"] and now - p["last"] >= HEARTBEAT_TIMEOUT:
                    holding[f"heartbeat_lost|{run_id}|{key}"] = p["last"]
            if run["ranks"]:  # ranks_stalled
                moved = max(since for _, since in run["ranks"].values())
                if now - moved >= RANKS_TIMEOUT:
                    holding[f"ranks_stalled|{run_id}"] = moved
        # inference_idle_with_pending (the idle span is also idle_gap_growing's input)
        idle = self.all_idle(run)
        if idle and run["idle_since"] is None:
            run["idle_since"] = now
        elif not idle and run["idle_since"] is not None:
            for st in run["steps"].values():
                if st["done"] is None:
                    st["gap"] += now - max(run["idle_since"], st["started"])
            run["idle_since"] = None
        if run["idle_since"] is not None and now - run["idle_since"] >= IDLE_FOR:
            holding[f"inference_idle_with_pending|{run_id}"] = run["idle_since"]
        steps = sorted(run["rewards"])[-ZERO_STEPS:]  # zero_reward
        if len(steps) == ZERO_STEPS and all(abs(run["rewards"][s]) <= EPSILON for s in steps):
            holding[f"zero_reward|{run_id}"] = now
        if run["nonfinite"] and run["nonfinite"][max(run["nonfinite"])]:  # non_finite_metric
            holding[f"non_finite_metric|{run_id}"] = now
        for (comp, name), c in run["counters"].items():  # stuck_progress
            complete = c["total"] is not None and c["n"] >= c["total"]
            if run["finished"] or complete or len(c["intervals"]) < 2:
                continue
            limit = max(MIN_STALL, FACTOR * statistics.median(c["intervals"]))
            if now - c["last"] > limit:
                holding[f"stuck_progress|{run_id}|{comp}/{name}"] = c["last"]
        if run.get("gaps_growing"):
            holding[f"idle_gap_growing|{run_id}"] = run["gaps_growing"]
        self.transitions(run_id, run, holding)

    @staticmethod
    def all_idle(run: dict[str, Any]) -> bool:
        if not run["pending"] or not run["servers"]:
            return False
        for s in run["servers"].values():
            proc = run["procs"].get(s["proc"]) if s["proc"] else None
            if proc is not None and proc["final"]:
                continue
            busy = s["running"] or s["waiting"] if s["stats"] else s["inflight"]
            if busy:
                return False
        return True

    def gap_check(self, run: dict[str, Any], step: int) -> None:
        done = sorted(s for s, st in run["steps"].items() if st["done"] is not None)
        gaps = [run["steps"][s]["gap"] for s in done[-GAP_STEPS:]]
        growing = len(gaps) == GAP_STEPS and all(a < b for a, b in itertools.pairwise(gaps))
        run["gaps_growing"] = self.now if growing and gaps[-1] >= MIN_GAP else None

    def transitions(self, run_id: str, run: dict[str, Any], holding: dict[str, float]) -> None:
        firing = run["firing"]
        for key, since in holding.items():
            if key not in firing:
                firing[key] = since
                self.alert(run_id, key, since, "firing")
        for key in [k for k in firing if k not in holding]:
            self.alert(run_id, key, firing.pop(key), "resolved")

    def alert(self, run_id: str, key: str, since: float, state: str) -> None:
        rule = key.split("|", 1)[0]
        self.out.append(json.dumps({
            "v": 1, "id": f"{key}#{len(self.out)}", "ts": self.now, "rule": rule, "run": run_id,
            "state": state, "severity": SEVERITY.get(rule, "critical"), "key": key,
            "since": since, "summary": f"{rule} {state}",
        }).encode())  # fmt: skip


def plain(lines: list[bytes]) -> list[bytes]:
    reader = PlainReader()
    for raw in lines:
        reader.line(raw)
    return reader.out


def main() -> None:
    """`python bench/reference.py FILE`: the plain reading as a program of its own, alerts as
    JSON Lines on standard output -- what `bench/replay.py --command` times against
    `runwatch replay FILE`, start-up included."""
    import sys

    with open(sys.argv[1], "rb") as f:
        reader = PlainReader()
        for raw in f:
            reader.line(raw)
    sys.stdout.buffer.write(b"".join(line + b"\n" for line in reader.out))


if __name__ == "__main__":
    main()
