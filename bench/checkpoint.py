"""What a checkpoint of many live runs costs: its size, the time to write it (spent on the
worker's live path: no event is applied meanwhile) and the time to load it (a takeover).

`--runs` live runs (1,000 and 5,000) in one partition's `LiveDriver`, of two shapes
(`--shape`): the one `bench/exporter.py` builds -- a trainer, a rollout worker and two
vLLM servers beating, 64 trajectories pending, 16 steps with reward and timing, 8 ranks,
applied to the engine alone -- and the fleet's (`bench/fleet_shape.py`: twelve processes
on four hosts per run), fed as the worker feeds it, records with broker arrival times, for
the 180 s `bench/fleet.py` runs them, so the clock-offset windows of their hosts are in it
too: this is the shape of the fleet bench's checkpoint figures. `checkpoint.dump` is timed,
and against the same state pickled with Python's default for slotted objects
(`(None, {slot: value})`, what the records wrote before `Compact`), in the same run;
`checkpoint.load` into a fresh driver. Then what the live path loses to one checkpoint as
`runwatch worker` makes it by default (`stream/kafka/snapshot.py`: a forked child
pickles), against
pickling in place, in the same run: the time the caller is held before it can apply the
next event, and the time until the bytes are back. Best of `--repeat`. Figures only.

    .venv/bin/python bench/checkpoint.py [--quick] [--runs 1000 5000] [--repeat 3]
        [--shape exporter fleet]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import pickle
import random
import time
from collections.abc import Callable
from typing import Any

import zstandard
from benchinfo import SAID, machine, say, write_section
from exporter import _events, decode_dict
from fleet_shape import schedule, wire

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
    return zstandard.ZstdCompressor(level=1).compress(buf.getvalue())  # (as checkpoint.pack)


def best(repeat: int, fn: Any) -> tuple[float, Any]:
    took, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        took = min(took, time.perf_counter() - t)
    return took, out


T0 = 1_700_000_000.0
#: How long `bench/fleet.py` plays its runs, and so how much state its checkpoints hold.
FLEET_SECONDS = 180.0


def exporter_driver(runs: int) -> LiveDriver:
    driver = LiveDriver()
    for r in range(runs):
        for e in _events(f"run-{r:05d}", T0):
            driver.engine.apply(decode_dict(e))
    driver.position = 1
    return driver


def fleet_driver(runs: int) -> LiveDriver:
    """`runs` fleet-shaped runs after FLEET_SECONDS, fed in 2,000-record batches, each
    record arriving 2-50 ms after its event time (the last 100,000 event ids are part of
    the state: the duplicate-id window)."""
    driver = LiveDriver()
    names = [f"fleet-{i:05d}" for i in range(runs)]
    rng = random.Random(3)
    batch: list[tuple[bytes, float, int]] = []
    offset = 0
    for p in schedule(names, FLEET_SECONDS, seed=1):
        if p.kind is None or p.at >= FLEET_SECONDS:
            continue  # no final beats: the runs stay live
        ts = T0 + p.at
        raw = wire(p, ts, f"{rng.getrandbits(128):032x}")  # ids as random as uuid4's
        batch.append((raw, ts + rng.uniform(0.002, 0.05), offset))
        offset += 1
        if len(batch) == 2000:
            driver.feed(batch)
            batch = []
    driver.feed(batch)
    return driver


SHAPES: dict[str, Callable[[int], LiveDriver]] = {"exporter": exporter_driver,
                                                  "fleet": fleet_driver}  # fmt: skip


def measure(shape: str, runs: int, repeat: int) -> None:
    driver = SHAPES[shape](runs)
    t_dump, data = best(repeat, lambda: checkpoint.dump(driver, {"offset": 2}))
    t_default, old = best(repeat, lambda: default_dump(driver))
    t_load, _ = best(repeat, lambda: checkpoint.load(data, LiveDriver()))
    size, ratio = len(data), t_default / t_dump
    label = f"{shape} shape:"
    say(f"{runs:>6,} runs, {label:15} {size / 1e6:5.1f} MB ({size / runs:,.0f} B/run); dump "
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
        snapshot = Snapshot([(driver, {"offset": 2})], fork=True)
        held = min(held, time.perf_counter() - start)
        assert asyncio.run(snapshot.data())
        whole = min(whole, time.perf_counter() - start)
    return held, whole


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1000, 5000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shape", choices=sorted(SHAPES), nargs="+", default=["exporter", "fleet"],
                    help="the runs' shape (both by default)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="1,000 runs, one pass")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.repeat = [1000], 1
    say(machine())
    for shape in args.shape:
        for runs in args.runs:
            measure(shape, runs, args.repeat)
    say(
        "a dump in place (`runwatch worker --no-checkpoint-fork`) is time the worker applies "
        "no event; forked (the default), only the fork is; a takeover pays the load once"
    )
    if not args.quick:
        write_section("checkpoint", ["## A checkpoint of many live runs (`bench/checkpoint.py`)",
                                     "", "```", *SAID, "```"])  # fmt: skip


if __name__ == "__main__":
    main()
