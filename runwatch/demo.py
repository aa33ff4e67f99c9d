"""`runwatch demo` and `runwatch incidents`: the bundled incidents, replayed through the rules.

The demo writes each incident as JSON Lines (what emitters would have sent), replays the
files through the same path as `runwatch replay`, and prints the alerts as a person would
read them in Slack. It needs no network and no server.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.text import Text

from runwatch.incidents import INCIDENTS
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay
from runwatch.timeparse import iso

STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}

STORIES = {
    "sandbox_hang": "vLLM idle while the last trajectory sits in a code sandbox",
    "zero_reward": "the SGLang server dies at step 188; reward is 0 from then on",
    "orchestrator_dies": "the orchestrator dies; the trainer waits for a batch forever",
    "rank_divergence": "rank 3 hangs in destroy_process_group, the others in recv",
    "rank_uniform": "every rank hangs in one all_reduce",
    "healthy_long_steps": "2-hour steps with validation and checkpoints: must stay quiet",
}


def write_incidents(out_dir: Path, names: list[str] | None = None) -> list[Path]:
    """Write the chosen incidents (default: all) as JSON Lines files; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names or list(INCIDENTS):
        path = out_dir / f"{name}.jsonl"
        with path.open("wb") as f:
            for event in INCIDENTS[name]():
                f.write(orjson.dumps(event) + b"\n")
        paths.append(path)
    return paths


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


def run_demo(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    out_dir = Path(args.dir)
    console.print(f"[bold]runwatch demo[/]: replaying {len(INCIDENTS)} recorded incidents\n")
    paths = write_incidents(out_dir)
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


def run_incidents(args: argparse.Namespace) -> int:
    names = args.names or None
    unknown = sorted(set(names or ()) - set(INCIDENTS))
    if unknown:
        print(f"runwatch incidents: no such incident: {', '.join(unknown)}")
        return 2
    for path in write_incidents(Path(args.out), names):
        print(path)
    return 0


def register(sub: Any) -> None:
    d = sub.add_parser(
        "demo",
        help="replay the bundled incidents and show the alerts they raise",
        description="Replay the bundled incidents (DESIGN.md's real cases) through the rules "
        "and print the alerts, as they would reach Slack.",
    )
    d.add_argument("--dir", default=".cache/demo", help="where to write the incident event files")
    d.set_defaults(func=run_demo)
    i = sub.add_parser(
        "incidents",
        help="write the bundled incident event streams as JSON Lines",
        description="Write the bundled incidents as JSON Lines files, one per incident: "
        + ", ".join(INCIDENTS),
    )
    i.add_argument("names", nargs="*", metavar="NAME", help="which incidents (default: all)")
    i.add_argument("--out", default=".", help="output folder (default: current folder)")
    i.set_defaults(func=run_incidents)
