"""Fleet incidents end to end (issue 45, "How it is checked"), on the fleet trace the
simulator makes (`runwatch simulate --fleet`, `runwatch.dev.fleet`): one of three shared
reward servers hangs while 60 runs use them, a third each; the node that hosts the rollout
workers of four runs dies; six runs fail in the same minute for reasons of their own.

Through `runwatch replay`: exactly one `shared_cause` alert for the server, naming it, one
for the node, none for the coincidence; at least 80% of each cause's runs carry
`incident.fleet`; `details.runs` names no run the thing did not affect. Through `serve`
(a smaller trace, live, at 40x): the same fleet incidents as a replay of the same events.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from test_fleet_slack import slack_checked

from harness.slack_server import FakeSlack
from runwatch.dev.deliver import HttpSink, send_live
from runwatch.dev.fleet import LIVE, Expected, fleet_cluster
from runwatch.dev.launch import ServeProcess
from runwatch.dev.simulate import scaled_config
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

pytestmark = pytest.mark.slow

RUNWATCH = str(Path(sys.executable).parent / "runwatch")
T0 = 1_773_496_800.0


def check(alerts: list[dict[str, Any]], expected: Expected) -> dict[str, Any]:
    """What issue 45 checks of a fleet trace's transitions; returns the figures."""
    fleet = [a for a in alerts if a["rule"] == "shared_cause"]
    assert all(a["run"] == "@fleet" and a["incident"]["role"] == "root" for a in fleet)
    fired = [a for a in fleet if a["state"] == "firing"]
    assert sorted(a["subject"] for a in fired) == sorted([expected.dep, expected.host]), [
        (a["subject"], a["details"]["runs"]) for a in fired]  # fmt: skip
    figures: dict[str, Any] = {}
    for subject, runs in ((expected.dep, expected.dep_runs), (expected.host, expected.host_runs)):
        (opened,) = (a for a in fired if a["subject"] == subject)
        ident = opened["incident"]["id"]
        named = [set(a["details"]["runs"]) for a in fleet if a["incident"]["id"] == ident]
        assert all(n <= runs for n in named), (subject, [sorted(n - runs) for n in named])
        carry = {a["run"] for a in alerts if a["incident"] and a["incident"].get("fleet") == ident}
        assert carry <= runs, (subject, sorted(carry - runs))
        assert len(carry) >= 0.8 * len(runs), (subject, len(carry), len(runs))
        counts = ("affected", "users", "others", "others_affected")
        figures[subject] = {"runs": len(runs), "carry": len(carry),
                            "at_opening": len(opened["details"]["runs"]),
                            "opened_after_s": round(opened["ts"] - opened["since"], 1),
                            "figures": {k: opened["details"][k] for k in counts}}  # fmt: skip
    members = {a["run"] for a in alerts if a["incident"] and a["incident"].get("fleet")}
    assert not members & expected.coincident, sorted(members & expected.coincident)
    return figures


def test_the_fleet_trace_through_replay(tmp_path: Path) -> None:
    trace = tmp_path / "fleet.jsonl"
    made = subprocess.run(
        [RUNWATCH, "simulate", "--fleet", "--duration", "2400", "--seed", "45", "--start",
         str(T0), "--out", str(trace)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = subprocess.run([RUNWATCH, "replay", str(trace)], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    alerts = [json.loads(line) for line in done.stdout.splitlines()]
    _, expected = fleet_cluster(duration=2400.0, seed=45)
    figures = check(alerts, expected)
    print(json.dumps(figures, indent=1))  # the figures, for the report (pytest -s)
    # each resolves when its member incidents have closed, naming every member
    resolved = {a["subject"]: a for a in alerts
                if a["rule"] == "shared_cause" and a["state"] == "resolved"}  # fmt: skip
    assert set(resolved[expected.dep]["details"]["runs"]) == expected.dep_runs
    assert set(resolved[expected.host]["details"]["runs"]) == expected.host_runs


def fleet_of(alerts: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """subject -> every member run, as the resolutions name them."""
    return {a["subject"]: sorted(a["details"]["runs"]) for a in alerts
            if a["rule"] == "shared_cause" and a["state"] == "resolved"}  # fmt: skip


def test_the_same_fleet_incidents_through_serve(tmp_path: Path) -> None:
    """Live, at 40x: the runs' thresholds are scaled in their run.started.config (as the
    simulator does), the fleet's in serve's config (they are not a run's to set). The hang
    outlasts the idle threshold by more than the live path's hold on late records
    (`reading.RECONNECT_S`, wall seconds, not scaled): a sender starved for `LATE_S` on a
    loaded machine makes serve judge silence that much later, and a shorter hang would be
    over by then (CI saw it: the server's fleet incident never opened)."""
    speed = 40.0
    params = {"window": 600.0 / speed, "users_within": 3600.0 / speed}
    config = tmp_path / "rules.toml"
    config.write_text("[rules.shared_cause]\n" + "".join(f"{k} = {v}\n" for k, v in params.items()))
    cluster, expected = fleet_cluster(runs=24, node_runs=3, coincident=3, duration=1600.0,
                                      hang_at=400.0, hang_for=1000.0, node_down_at=460.0,
                                      crash_at=430.0, trajectories=8,
                                      config=LIVE)  # fmt: skip
    slack = FakeSlack(token="xoxb-fleet", channels=("C-ALERTS",))  # its thread per cause too
    slack_config = tmp_path / "slack.toml"
    slack_config.write_text(f'[slack]\nchannel = "C-ALERTS"\nbase_url = "{slack.url}"\n'
                            f'state = "{tmp_path / "notify.sqlite"}"\n')  # fmt: skip
    args = ["--config", str(config), "--slack-config", str(slack_config)]
    try:
        with ServeProcess(tmp_path / "h.duckdb", args=args,
                          env={"SLACK_BOT_TOKEN": "xoxb-fleet"}) as serve:  # fmt: skip
            t0 = time.time() + 0.2
            sent = send_live(cluster, HttpSink(serve.url, None), speed, t0=t0)
            alerts = serve.get("/v1/alerts?limit=2000")["alerts"]
            slack_checked(slack, alerts)
    finally:
        slack.close()
    rules = RulesConfig.from_mapping({"rules": {"shared_cause": params}})
    events = list(cluster.events(t0, speed))  # the same events, made again (deterministic)
    assert len(events) == sent
    assert scaled_config(speed, LIVE)  # (what their run.started carries)
    lines = (("f", i, json.dumps(e).encode()) for i, e in enumerate(events))
    replayed = [a.to_dict() for a in replay(lines, Engine(rules))]
    check(replayed, expected)
    check(alerts, expected)
    assert fleet_of(alerts) == fleet_of(replayed)
