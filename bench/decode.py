"""What decoding one event costs: bytes of one JSON line in, a validated event out.

Four ways, on the same lines:

  json + pydantic       stdlib `json.loads`, then `runwatch.emitters.events.validate` (the
                        model for the event's kind): the obvious way, and the baseline
  orjson + pydantic     `orjson.loads`, then the same validation. orjson refuses the `NaN`
                        tokens that Python emitters write, so those lines fall back to
                        `json.loads`
  pydantic validate_json  pydantic parses and validates in one call, through a union of the
                        models discriminated on `kind` (unknown kinds go to the envelope model)
  runwatch decode       `runwatch.stream.decode.decode`: msgspec Structs derived from the
                        models; what msgspec refuses (NaN tokens, unknown kinds, bad input)
                        goes to json + pydantic
  ... without bounds    the same fast path without the contract's bounds checks that came
                        with them (the ASCII / escape / DEL scans, unknown fields refused):
                        what decoding cost before, for the cost of the boundary

Then what comes before decoding in a consumer, on the same lines: parsing gzip Kafka record
batches to each record's value, kafka-python's reader against aiokafka's (C), the one the
sink and the worker consume with.

The lines follow the kind mix of the incident streams (`runwatch.dev.scenarios`, all of them),
with a few `step.metrics` lines carrying NaN (written by stdlib json, as a Python emitter
would). Each method is timed over every line, in CPU time, best of `--repeat` rounds; the
ratio is the baseline's time over the method's. Figures only: nothing here asserts a timing.

    .venv/bin/python bench/decode.py [--quick] [--n 60000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec
import orjson
from benchinfo import SAID, machine, say, write_section
from pydantic import Discriminator, Tag, TypeAdapter

from runwatch.dev.envelope import event
from runwatch.dev.scenarios import SCENARIOS
from runwatch.emitters import events
from runwatch.stream.decode import _FAST, _PATTERNS, decode

#: Share of lines that are `step.metrics` with a NaN value.
NAN_SHARE = 0.002


def corpus(n: int, seed: int = 7) -> list[bytes]:
    """`n` lines in the scenarios' kind mix, shuffled; a few NaN step.metrics among them."""
    pool = [e for build in SCENARIOS.values() for e in build()]
    rng = random.Random(seed)
    lines: list[bytes] = []
    for i in range(n):
        if rng.random() < NAN_SHARE:
            src = {"component": "trainer", "host": "node-0", "pid": 1}
            metrics = {"actor/grad_norm": math.nan, "critic/score/mean": 0.4, "x": None}
            e = event("step.metrics", 1_773_496_800.0 + i, "nan-run", src, f"nan-{i}", step=i,
                      metrics=metrics)  # fmt: skip
            lines.append(json.dumps(e).encode())
        else:
            lines.append(orjson.dumps(rng.choice(pool)))
    return lines


# --- the contenders -----------------------------------------------------------------------


def json_pydantic(raw: bytes) -> events.Event:
    return events.validate(json.loads(raw))


def orjson_pydantic(raw: bytes) -> events.Event:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = json.loads(raw)  # the NaN / Infinity tokens
    return events.validate(obj)


def _kind_tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in events.KNOWN_KINDS else "other"


_ANY_EVENT = TypeAdapter(
    Annotated[
        Union[
            (
                *(Annotated[m, Tag(k)] for k, m in events.KNOWN_KINDS.items()),
                Annotated[events.Event, Tag("other")],
            )
        ],
        Discriminator(_kind_tag),
    ]
)


def pydantic_json(raw: bytes) -> events.Event:
    ev: events.Event = _ANY_EVENT.validate_json(raw)
    return ev


def without_bounds(raw: bytes) -> events.Event:
    """decode's fast path as it was before the bounds: the struct decode and the pattern
    checks only (what it refuses goes to `decode`)."""
    try:
        event: events.Event = _FAST.decode(raw)
        patterns = _PATTERNS.get(type(event))
        if patterns is None or patterns.hold(event):
            return event
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    return decode(raw)


METHODS: dict[str, Callable[[bytes], events.Event]] = {
    "json + pydantic": json_pydantic,
    "orjson + pydantic": orjson_pydantic,
    "pydantic validate_json": pydantic_json,
    "runwatch decode (msgspec)": decode,
    "... without bounds": without_bounds,
}
BASELINE = "json + pydantic"


def timed(fn: Callable[[bytes], Any], lines: list[bytes], repeat: int) -> float:
    """Best CPU time of `repeat` passes over all lines (one thread: one core's worth, and
    steadier than wall time on a machine shared with other work)."""
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        for raw in lines:
            fn(raw)
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=60_000, help="lines (default 60000)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds per method, best kept")
    ap.add_argument("--quick", action="store_true", help="10000 lines, 3 rounds")
    args = ap.parse_args()
    if args.quick:
        args.n, args.repeat = 10_000, 3

    say(machine())
    lines = corpus(args.n)
    mix = Counter(orjson.loads(raw.replace(b"NaN", b"null"))["kind"] for raw in lines)
    nan_lines = sum(b"NaN" in raw for raw in lines)
    avg = sum(map(len, lines)) / len(lines)
    say(f"{len(lines)} lines, {avg:.0f} bytes on average, {nan_lines} with NaN; kind mix:")
    say("  " + ", ".join(f"{k} {v / len(lines):.1%}" for k, v in mix.most_common()))

    # every method must agree with the baseline before its time means anything
    reference = [json_pydantic(raw) for raw in lines[:2000]]
    for name, fn in METHODS.items():
        for raw, ref in zip(lines, reference, strict=False):
            got = fn(raw)
            assert (got.kind, got.id, got.ts) == (ref.kind, ref.id, ref.ts), name

    times = {name: timed(fn, lines, args.repeat) for name, fn in METHODS.items()}
    base = times[BASELINE]
    say("")
    say(f"{'method':<28}{'µs/event':>10}{'events/s':>14}{'vs json+pydantic':>19}")
    for name, t in times.items():
        per = t / len(lines)
        say(f"{name:<28}{per * 1e6:>10.2f}{1 / per:>14,.0f}{base / t:>18.2f}x")
    bounds = times["runwatch decode (msgspec)"] / times["... without bounds"] - 1
    say("")
    say(f"the contract's bounds add {bounds:+.1%} to decode's cost per event")

    say("")
    say("Kafka record batches (gzip, 500 records each), parsed to each record's value:")
    readers = record_readers(lines, args.repeat)
    for name, t in readers.items():
        say(f"  {name:<26}{t / len(lines) * 1e6:>8.2f} µs/record")
    ratio = readers["kafka-python"] / readers["aiokafka (C)"]
    say(f"  aiokafka's reader is {ratio:.1f}x kafka-python's")
    if not args.quick:
        title = "## Decoding one event, and the Kafka records around it (`bench/decode.py`)"
        write_section("decode", [title, "", "```", *SAID, "```"])


def record_readers(lines: list[bytes], repeat: int) -> dict[str, float]:
    """Best CPU seconds to read every record's value out of gzip batches, per reader."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.record.memory_records import MemoryRecords as AioRecords
    from kafka.record.memory_records import MemoryRecords as KafkaPythonRecords

    batches = []
    for start in range(0, len(lines), 500):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=1, is_transactional=False, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
        )  # fmt: skip
        for offset, value in enumerate(lines[start : start + 500]):
            builder.append(offset, timestamp=None, key=None, value=value, headers=[])
        batches.append(bytes(builder.build()))
    data = b"".join(batches)

    def read(records_of: Callable[[bytes], Any]) -> float:
        t0 = time.process_time()
        records, n = records_of(data), 0
        while (batch := records.next_batch()) is not None:
            n += sum(1 for _ in batch)
        assert n == len(lines)
        return time.process_time() - t0

    readers = {"kafka-python": KafkaPythonRecords, "aiokafka (C)": AioRecords}
    return {name: min(read(cls) for _ in range(repeat)) for name, cls in readers.items()}


if __name__ == "__main__":
    main()
