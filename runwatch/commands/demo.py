"""`runwatch demo` (live, or `--replay` of the bundled incidents: runwatch/dev/demo.py) and
`runwatch incidents` (write the bundled incidents as JSON Lines: runwatch/dev/scenarios.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runwatch.dev.scenarios import INCIDENTS


def run_demo(args: argparse.Namespace) -> int:
    from runwatch.dev import demo

    return demo.replay_incidents(args) if args.replay else demo.live(args)


def run_incidents(args: argparse.Namespace) -> int:
    from runwatch.dev import scenarios

    names = args.names or None
    unknown = sorted(set(names or ()) - set(INCIDENTS))
    if unknown:
        print(f"runwatch incidents: no such incident: {', '.join(unknown)}")
        return 2
    for path in scenarios.write(Path(args.out), names):
        print(path)
    return 0


def register(sub: Any) -> None:
    d = sub.add_parser(
        "demo",
        help="live: runwatch serve + a simulated cluster with faults; --replay: incidents",
        description="Start runwatch serve, simulate a small cluster with three faults at "
        "accelerated time, and show runs and alerts live. With --replay: replay the bundled "
        "incidents (the real cases runwatch exists for) through the rules and print the alerts.",
    )
    d.add_argument("--dir", default=".cache/demo", help="where to write history / event files")
    d.add_argument("--replay", action="store_true", help="replay the bundled incidents instead")
    d.add_argument("--jobs", type=int, default=8, help="simulated jobs (live demo)")
    d.add_argument("--speed", type=float, default=30.0, help="simulated seconds per second")
    d.add_argument("--duration", type=float, default=1500.0, help="simulated seconds")
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--trainer-steps", type=int, default=100,
                   help="steps of the guarded training loop (live demo)")  # fmt: skip
    d.add_argument("--trainer-step-s", type=float, default=0.3,
                   help="its wall seconds per step")  # fmt: skip
    d.add_argument("--resume-after", type=float, default=8.0,
                   help="seconds the demo leaves it paused before `runwatch resume`")  # fmt: skip
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
