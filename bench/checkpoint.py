"""What a checkpoint of many live runs costs: its size, the time to write it (spent on the
worker's live path: no event is applied meanwhile) and the time to load it (a takeover).

`--runs` live runs (1,000 and 5,000) of the shape `bench/exporter.py` builds -- a trainer,
a rollout worker and two vLLM servers beating, 64 trajectories pending, 16 steps with
reward and timing, 8 ranks -- in one partition's `LiveDriver`. `checkpoint.dump` is timed,
and against the same state pickled with Python's default for slotted objects
(`(None, {slot: value})`, what the records wrote before `Compact`), in the same run;
`checkpoint.load` into a fresh driver. Then what the live path loses to one checkpoint as
`runwatch worker` makes it by default (`stream/kafka/snapshot.py`: a forked child
pickles), against
pickling in place, in the same run: the time the caller is held before it can apply the
next event, and the time until the bytes are back. Best of `--repeat`. Figures only.

    .venv/bin/python bench/checkpoint.py [--quick] [--runs 1000 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import pickle
import time
import zlib
from typing import Any

from benchinfo import SAID, machine, say, write_section
from exporter import _events, decode_dict

from runwatch.stream import checkpoint
from runwatch.stream.kafka.snapshot import Snapshot
from runwatch.stream.live import LiveDriver
from runwatch.stream.state.compact import Compact


class _Default(pickle.Pickler):
    """Pickles `Compact` records as Python's default for a slotted object would."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Compact):
            return object.__reduce_ex__(obj, 5)
        return NotImplemented


def default_dump(driver: LiveDriver) -> bytes:
    buf = io.BytesIO()
    _Default(buf, protocol=5).dump({"position": {"offset": 1}, "driver": driver.dump_state()})
    return zlib.compress(buf.getvalue(), 1)


def best(repeat: int, fn: Any) -> tuple[float, Any]:
    took, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        took = min(took, time.perf_counter() - t)
    return took, out


def measure(runs: int, repeat: int) -> None:
    driver = LiveDriver()
    for r in range(runs):
        for e in _events(f"run-{r:05d}", 1_700_000_000.0):
            driver.engine.apply(decode_dict(e))
    driver.position = 1
    t_dump, data = best(repeat, lambda: checkpoint.dump(driver, {"offset": 2}))
    t_default, old = best(repeat, lambda: default_dump(driver))
    t_load, _ = best(repeat, lambda: checkpoint.load(data, LiveDriver()))
    size, ratio = len(data), t_default / t_dump
    say(f"{runs:>6,} runs: {size / 1e6:5.1f} MB ({size / runs:,.0f} B/run); dump "
        f"{t_dump * 1e3:5.0f} ms (default slot pickling, GC on: {t_default * 1e3:5.0f} ms, "
        f"{len(old) / 1e6:.1f} MB; {ratio:.1f}x); load {t_load * 1e3:5.0f} ms")  # fmt: skip
    held, whole = forked(driver, repeat)
    say(f"        live path held by one checkpoint: forked {held * 1e3:5.1f} ms (bytes back "
        f"after {whole * 1e3:5.0f} ms), in place {t_dump * 1e3:5.0f} ms: "
        f"{t_dump / held:,.0f}x less")  # fmt: skip


def forked(driver: LiveDriver, repeat: int) -> tuple[float, float]:
    """(seconds the caller is held: the fork; seconds until the bytes are back), best of
    `repeat` each."""
    held = whole = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        snapshot = Snapshot(driver, {"offset": 2}, fork=True)
        held = min(held, time.perf_counter() - start)
        assert asyncio.run(snapshot.data())
        whole = min(whole, time.perf_counter() - start)
    return held, whole


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1,000 runs, one pass")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.repeat = [1000], 1
    say(machine())
    for runs in args.runs:
        measure(runs, args.repeat)
    say(
        "a dump in place (`runwatch worker --no-checkpoint-fork`) is time the worker applies "
        "no event; forked (the default), only the fork is; a takeover pays the load once"
    )
    if not args.quick:
        write_section("checkpoint", ["## A checkpoint of many live runs (`bench/checkpoint.py`)",
                                     "", "```", *SAID, "```"])  # fmt: skip


if __name__ == "__main__":
    main()
