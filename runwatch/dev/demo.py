"""The demos: `runwatch demo` (live) and `runwatch demo --replay` (the bundled scenarios).

The live demo starts `runwatch serve` (a child process on a free loopback port, with a fresh
DuckDB history), simulates a small cluster with three faults at accelerated time against it
(its jobs share reward servers, one of which hangs: a fleet incident),
and shows the runs and alert transitions live; at the end (or on Ctrl-C) it stops both
children and says where the history is.

The replay demo writes each bundled scenario as JSON Lines (what emitters would have sent),
replays the files through the same path as `runwatch replay`, and prints the alerts as a
person would read them in Slack. Neither needs the network.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.text import Text

from runwatch.dev import scenarios
from runwatch.dev.scenarios import SCENARIOS
from runwatch.emitters.guard import decide
from runwatch.emitters.runview import RunView
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay
from runwatch.timeparse import iso

#: the rules on step.metrics whose firing the demo tells as its dynamics story
DYNAMICS_RULES = ("kl_spike", "grad_norm_spike", "entropy_collapse", "response_length_drift")

STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}

STORIES = {
    "sandbox_hang": "vLLM idle while the last trajectory sits in a code sandbox",
    "zero_reward": "the SGLang server dies at step 188; reward is 0 from then on",
    "orchestrator_dies": "the orchestrator dies; the trainer waits for a batch forever",
    "rank_divergence": "rank 3 hangs in destroy_process_group, the others in recv",
    "rank_uniform": "every rank hangs in one all_reduce",
    "healthy_long_steps": "2-hour steps with validation and checkpoints: must stay quiet",
}


def replay_file(path: Path) -> list[Alert]:
    """Replay one JSON Lines file with the default rules (the `runwatch replay` path)."""
    with path.open("rb") as f:
        lines = ((path.name, i, raw) for i, raw in enumerate(f, 1))
        return list(replay(lines, Engine()))


def render(alert: Alert) -> Text:
    """Two lines: when, what state, which rule (and subject); then the summary."""
    text = Text(f"  {iso(alert.ts)}  ")
    if alert.state == "firing":
        text.append(f"FIRING   {alert.severity:<8}  ", style=STYLE.get(alert.severity, ""))
    else:
        text.append(f"resolved {alert.severity:<8}  ", style="green")
    text.append(alert.rule, style="bold")
    if alert.subject:
        text.append(f" [{alert.subject}]")
    text.append(f"\n      {alert.summary}", style="" if alert.state == "firing" else "dim")
    return text


LIVE_FAULTS = ("sandbox_hang", "inference_crash", "rank_divergence")
#: the demo's guarded training loop (runwatch.dev.trainer): a dynamics alert and a pause
GUARDED = "demo-guarded"


class Breaker:
    """The demo's person at the keyboard: watches the guarded run's view, and once
    the loop has been paused `resume_after` seconds, runs `runwatch resume` on it."""

    def __init__(self, serve: Any, resume_after: float) -> None:
        self.serve, self.resume_after = serve, resume_after
        self.paused_at: float | None = None  # monotonic
        self.paused_step: int | None = None
        self.rules: list[str] = []
        self.resumed = ""  # what `runwatch resume` said

    def turn(self) -> str:
        """Look once; one line for the live frame."""
        try:
            view = RunView.parse(self.serve.get(f"/v1/breaker/{GUARDED}"))
            step = self.serve.get(f"/v1/runs/{GUARDED}").get("step")
        except (OSError, ValueError):
            return ""
        decision = decide(view, {"zero_reward": "pause"})  # the trainer's own rule list
        if decision.action == "pause" and self.paused_at is None and not self.resumed:
            self.paused_at, self.paused_step = time.monotonic(), step
            self.rules = [a.rule for a in decision.alerts]
        if self.paused_at is not None and not self.resumed:
            waited = time.monotonic() - self.paused_at
            if waited < self.resume_after:
                return (
                    f"\ncircuit breaker: {GUARDED} PAUSED after step {self.paused_step} by "
                    f"{', '.join(self.rules)}; resuming it in {self.resume_after - waited:.0f}s"
                )
            done = subprocess.run(
                [sys.executable, "-m", "runwatch.cli", "resume", GUARDED, "--url", self.serve.url,
                 "--reason", "the demo, as a person would"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            said = (done.stderr or done.stdout).strip().splitlines()
            self.resumed = said[-1] if said else f"runwatch resume: exit {done.returncode}"
        if self.resumed:
            return f"\ncircuit breaker: {self.resumed}; the loop goes on (step {step})"
        return f"\ncircuit breaker: {GUARDED} at step {step}, guarded on zero_reward"


def live(args: argparse.Namespace) -> int:
    from rich.live import Live

    from runwatch.dev.launch import ServeProcess
    from runwatch.dev.view import render as frame

    console = Console(highlight=False)
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    db = out / "history.duckdb"
    for old in (db, out / "history.duckdb.serve", out / "history.duckdb.serve.log"):
        shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)
    sim_args = ["--jobs", str(args.jobs), "--speed", str(args.speed), "--duration",
                str(args.duration), "--fault-step", "2", "--seed", str(args.seed),
                "--prefix", "demo", "--shared-fault",
                *(f"--fault={f}" for f in LIVE_FAULTS)]  # fmt: skip
    console.print(f"[bold]runwatch demo[/]: {args.jobs} simulated RL jobs, faults injected: "
                  f"{', '.join(LIVE_FAULTS)}; the jobs share two reward servers and one of "
                  f"them hangs two thirds of the way through (a fleet incident); "
                  f"{args.speed:g}x real time; and {GUARDED}, a training loop guarded by the "
                  "circuit breaker (its KL runs away, then its reward drops to zero)")  # fmt: skip
    rules = out / "rules.toml"  # the fleet's time, as fast as the runs' (scaled per run)
    rules.write_text(f"[rules.shared_cause]\nwindow = {600.0 / args.speed}\n"
                     f"users_within = {3600.0 / args.speed}\n")  # fmt: skip
    serve = ServeProcess(db, args=["--config", str(rules)])
    children: list[subprocess.Popen[bytes]] = []
    breaker = Breaker(serve, args.resume_after)
    trainer_log = out / "trainer.log"
    # the jobs' emitters spool (if serve is away) under the demo's directory: in the user's
    # ~/.cache/runwatch/spool a directory for this serve's port -- gone with the demo -- would
    # stay for good, and `runwatch spool status` would warn of what it holds
    jobs_env = {**os.environ, "XDG_CACHE_HOME": str(out / "cache")}
    interrupted = False
    try:
        sim = subprocess.Popen(
            [sys.executable, "-m", "runwatch.cli", "simulate", "--url", serve.url, *sim_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            env=jobs_env,
        )  # fmt: skip
        children.append(sim)
        with trainer_log.open("wb") as log_file:
            children.append(subprocess.Popen(
                [sys.executable, "-m", "runwatch.dev.trainer", "--url", serve.url, "--run",
                 GUARDED, "--steps", str(args.trainer_steps), "--step-s",
                 str(args.trainer_step_s)],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=jobs_env,
            ))  # fmt: skip
        started = time.monotonic()
        header = (f"runwatch serve at {serve.url} (pid {serve.pid}); history in {db}; "
                  f"its page: {serve.url}/")  # fmt: skip
        with Live(frame(serve, header), console=console, refresh_per_second=4) as live:
            while any(child.poll() is None for child in children):
                time.sleep(0.5)
                sim_min = (time.monotonic() - started) * args.speed / 60
                note = breaker.turn()
                live.update(frame(serve, f"{header}\nsimulated time: {sim_min:.0f} min{note}"))
        transitions = serve.get("/v1/alerts?limit=2000")["alerts"]
    except KeyboardInterrupt:
        interrupted = True
    except OSError:  # the service went away: Ctrl-C reaches the whole process group
        if serve.proc.poll() is None:
            raise
        interrupted = True
    finally:
        for child in children:  # by pid: the ones this demo started
            if child.poll() is None:
                child.terminate()
                child.wait()
        # someone at a terminal gets to look at the page before the service stops
        keep = not interrupted and sys.stdout.isatty()
        if not keep:
            serve.stop()
    if interrupted:
        console.print("interrupted: the service, the simulator and the trainer are stopped.")
    else:
        _fleet_story(console, transitions)
        _breaker_story(console, breaker, transitions, trainer_log)
    console.print(f"\nThe DuckDB history is in [bold]{db}[/] (alerts also went to "
                  f"{serve.log}). Try:")  # fmt: skip
    console.print(f"  .venv/bin/runwatch runs --db {db}", style="bold")
    console.print(f"  .venv/bin/runwatch show @fleet --db {db}", style="bold")
    console.print(
        f'  .venv/bin/runwatch sql "SELECT time, run, rule, state, summary FROM alerts '
        f'ORDER BY ts" --db {db}',
        style="bold",
        soft_wrap=True,
    )
    if keep:
        return _show_page(console, serve)
    console.print(f"\nThe page of runs, incidents and timelines was at [bold]{serve.url}/[/] "
                  f"(serve has stopped; `.venv/bin/runwatch serve --db {db}` shows it again at "
                  "http://127.0.0.1:8787/)")  # fmt: skip
    return 130 if interrupted else 0


def _show_page(console: Console, serve: Any) -> int:
    """Keep the service up for its page until Ctrl-C; the address is the last line."""
    console.print("\nrunwatch serve goes on so that you can look at its page (Ctrl-C stops it):")
    console.print(f"  {serve.url}/", style="bold")
    try:
        serve.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        serve.stop()
    return 0


def _fleet_story(console: Console, transitions: list[dict[str, Any]]) -> None:
    """The fleet incidents: one line each, what the shared thing broke."""
    for a in transitions:
        if a["rule"] == "shared_cause" and a["state"] == "firing":
            console.print(f"\n[bold]Fleet incident[/]: {a['subject']}: {a['summary']} "
                          f"({', '.join(a['details']['runs'])}; runwatch show @fleet)")  # fmt: skip


def _breaker_story(
    console: Console, breaker: Breaker, transitions: list[dict[str, Any]], trainer_log: Path
) -> None:
    """What happened to the guarded loop, in three lines."""
    mine = [a for a in transitions if a["run"] == GUARDED and a["state"] == "firing"]
    for a in mine:
        if a["rule"] in DYNAMICS_RULES:
            console.print(f"\n[bold]Training dynamics[/]: {a['rule']} on {GUARDED}: {a['summary']}")
    lines = trainer_log.read_text(errors="replace").splitlines()
    steps = [int(x.split()[1]) for x in lines if x.startswith("step ")]
    if breaker.paused_step is None:
        console.print(f"[bold]Circuit breaker[/]: {GUARDED} was never paused (see {trainer_log})")
        return
    console.print(f"[bold]Circuit breaker[/]: {GUARDED} paused after step {breaker.paused_step} "
                  f"by {', '.join(breaker.rules)}; `runwatch resume` lifted it "
                  f"{breaker.resume_after:g}s later ({breaker.resumed}), and the loop went on to "
                  f"step {max(steps, default=0)} (its output: {trainer_log})")  # fmt: skip


def replay_scenarios(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    out_dir = Path(args.dir)
    console.print(f"[bold]runwatch demo[/]: replaying {len(SCENARIOS)} recorded scenarios\n")
    paths = scenarios.write(out_dir)
    firing = 0
    for path in paths:
        name = path.stem
        alerts = replay_file(path)
        events = sum(1 for _ in path.open("rb"))
        run = orjson.loads(path.open("rb").readline())["run"]
        console.print(f"[bold cyan]{name}[/] — {STORIES.get(name, '')}")
        console.print(f"  run [bold]{run}[/], {events:,} events", style="dim")
        for alert in alerts:
            console.print(render(alert))
            firing += alert.state == "firing"
        if not alerts:
            console.print("  (no alerts)", style="green")
        console.print()
    console.print(f"{firing} alerts fired. The event files are in [bold]{out_dir}/[/]; try:")
    console.print(f"  .venv/bin/runwatch replay {out_dir}/zero_reward.jsonl", style="bold")
    console.print(
        f"  .venv/bin/runwatch replay --config examples/rules.toml {out_dir}/zero_reward.jsonl",
        style="bold",
    )
    return 0
