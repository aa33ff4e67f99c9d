"""`runwatch demo` (live, or `--replay` of the bundled scenarios: runwatch/dev/demo.py) and
`runwatch scenarios` (write the bundled scenarios as JSON Lines: runwatch/dev/scenarios.py;
`runwatch incidents`, its name before incidents meant alert groups, still works)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runwatch.dev.scenarios import SCENARIOS
from runwatch.exceptions import CommandError


def run_demo(args: argparse.Namespace) -> int:
    from runwatch.dev import demo

    return demo.replay_scenarios(args) if args.replay else demo.live(args)


def run_scenarios(args: argparse.Namespace) -> int:
    from runwatch.dev import scenarios

    names = args.names or None
    unknown = sorted(set(names or ()) - set(SCENARIOS))
    if unknown:
        raise CommandError(f"no such scenario: {', '.join(unknown)} (there are: "
                           f"{', '.join(SCENARIOS)})")  # fmt: skip
    for path in scenarios.write(Path(args.out), names):
        print(path)
    return 0


def register(sub: Any) -> None:
    d = sub.add_parser(
        "demo",
        help="live: runwatch serve + a simulated cluster with faults; --replay: scenarios",
        description="Start runwatch serve, simulate a small cluster with three faults at "
        "accelerated time, and show runs and alerts live. With --replay: replay the bundled "
        "scenarios (the real incidents runwatch exists for) through the rules and print the "
        "alerts.",
    )
    d.add_argument("--dir", default=".cache/demo", help="where to write history / event files")
    d.add_argument("--replay", action="store_true", help="replay the bundled scenarios instead")
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
    s = sub.add_parser(
        "scenarios",
        aliases=["incidents"],  # its name until "incidents" came to mean alert groups
        help="write the bundled scenarios (recorded incidents) as JSON Lines",
        description="Write the bundled scenarios -- the incidents runwatch exists for, as the "
        "events their processes would have sent -- as JSON Lines files, one per scenario: "
        + ", ".join(SCENARIOS)
        + ". `runwatch incidents` is the same command under its former name.",
    )
    s.add_argument("names", nargs="*", metavar="NAME", help="which scenarios (default: all)")
    s.add_argument("--out", default=".", help="output folder (default: current folder)")
    s.set_defaults(func=run_scenarios)
