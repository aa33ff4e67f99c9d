"""`runwatch scrape --vllm URL | --sglang URL [--every 10s]`: a sidecar that polls an inference
server's `/metrics` and emits `inference.stats` (runwatch.emitters.scrape)."""

from __future__ import annotations

import argparse
import importlib.util
import math
import signal
from typing import Any

from runwatch.commands.watch import add_destination, make_emitter
from runwatch.emitters import env, scrape
from runwatch.emitters.scrape import ScrapeLoop, Scraper
from runwatch.exceptions import CommandError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_arg(text: str) -> float:
    """Seconds from "10", "10s", "500ms", "1m", "2h" (argparse type)."""
    text = text.strip().lower()
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            number, scale = text[: -len(unit)], _UNITS[unit]
            break
    else:
        number, scale = text, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 10s, 500ms)") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"not a positive duration: {text!r}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(
        "scrape",
        help="poll a vLLM / SGLang server's /metrics and emit inference.stats",
        description=scrape.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--vllm", metavar="URL", help="vLLM server (http://host:port[/metrics])")
    target.add_argument("--sglang", metavar="URL", help="SGLang server")
    p.add_argument("--every", type=duration_arg, default=10.0, metavar="DURATION",
                   help="poll interval: 10s, 500ms, 1m (default 10s)")  # fmt: skip
    p.add_argument("--name", help="server name in events (default host:port of the URL)")
    p.add_argument("--timeout", type=duration_arg, default=5.0, metavar="DURATION")
    p.add_argument("--run", help="run id (default $RUNWATCH_RUN)")
    p.add_argument("--component", default="inference")
    add_destination(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("prometheus_client") is None:  # its text parser reads /metrics
        raise CommandError("needs prometheus-client: pip install 'runwatch[metrics]'")
    flavour, url = ("vllm", args.vllm) if args.vllm else ("sglang", args.sglang)
    scraper = Scraper(flavour, url, name=args.name, timeout=args.timeout)
    emitter = make_emitter(
        args,
        args.run or env.get(env.RUN),
        component=args.component,
        instance=scraper.name,
        heartbeat=False,
    )
    if isinstance(emitter, str):
        raise CommandError(f"{emitter}")
    loop = ScrapeLoop(scraper, emitter, args.every)

    def stop(signum: int, frame: Any) -> None:
        loop.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    with emitter:
        loop.run()
    return 0
