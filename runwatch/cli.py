"""The `runwatch` console script: one subcommand per module, registered here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runwatch",
        description="Run state and alerting for LLM RL training clusters.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from runwatch import demo, kafka_broker, replay_cmd, worker_cmd

    replay_cmd.register(sub)
    demo.register(sub)
    kafka_broker.register(sub)
    worker_cmd.register(sub)
    from runwatch import backtest_cmd, query_cmd, store_cmd

    store_cmd.register(sub)
    query_cmd.register(sub)
    backtest_cmd.register(sub)
    from runwatch import notify_cmd, silence_cmd

    notify_cmd.register(sub)
    silence_cmd.register(sub)
    from runwatch import serve, simulate_cmd

    serve.register(sub)
    simulate_cmd.register(sub)
    from runwatch import scrape, watch

    watch.register(sub)
    scrape.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
