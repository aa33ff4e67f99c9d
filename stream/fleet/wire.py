"""Records of the fleet topic (`runwatch.fleet`): what the Kafka workers tell the fleet stage.

The fleet decision needs every run, and the workers see their partitions' runs only; so each
worker re-keys what the decision reads onto a topic of its own (Kafka's repartition), in the
same transaction as its alerts (a fenced worker's records end aborted with them), and one
small stage reads it (`runwatch fleet`). Three records, JSON, each naming the input
partition it comes from (`p`):

- `{"t": "alert", "p", "alert"}`: a run's alert transition, as published on
  `runwatch.alerts` -- the incidents' opening and closing, and processes beating again;
- `{"t": "uses", "p", "run", "clock", "deps", "hosts", "servers"}`: what a run uses
  (`population.usage`), when it changes and every `feed.REFRESH_S` of the run's time;
- `{"t": "mark", "p", "ts"}`: nothing more from partition `p` will be stamped before `ts`
  (the stage's watermark, `merge.py`).

Keyed by the cause an alert's root names (`dep:NAME`, ...), else by run. Decoded at one
boundary, `decode`, which raises `InvalidFleetRecord` with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert, InvalidFleetRecord
from runwatch.stream.fleet.causes import causes, subject
from runwatch.stream.state.fleet import RunUsage

#: Names of things and runs in a usage record, at most (a run names a handful).
MAX_NAMES = 256


@dataclass(frozen=True, slots=True)
class Transition:
    partition: int
    alert: Alert

    @property
    def ts(self) -> float:
        return self.alert.ts


@dataclass(frozen=True, slots=True)
class Uses:
    partition: int
    run: str
    usage: RunUsage

    @property
    def ts(self) -> float:
        return self.usage.clock


@dataclass(frozen=True, slots=True)
class Mark:
    partition: int
    ts: float


FleetRecord = Transition | Uses | Mark


def encode(record: FleetRecord) -> tuple[bytes, bytes]:
    """The record's key and value on the fleet topic."""
    if isinstance(record, Transition):
        alert = record.alert
        named = causes(alert)
        key = subject(named[0]) if named else alert.run
        return key.encode(), orjson.dumps({"t": "alert", "p": record.partition,
                                           "alert": alert.to_dict()})  # fmt: skip
    if isinstance(record, Uses):
        u = record.usage
        value = {"t": "uses", "p": record.partition, "run": record.run, "clock": u.clock,
                 "deps": u.deps, "hosts": sorted(u.hosts),
                 "servers": sorted(u.servers)}  # fmt: skip
        return record.run.encode(), orjson.dumps(value)
    return b"", orjson.dumps({"t": "mark", "p": record.partition, "ts": record.ts})


def decode(value: bytes | None) -> FleetRecord:
    """One fleet-topic value, checked; raises InvalidFleetRecord with the reason."""
    try:
        obj = orjson.loads(value or b"")
    except orjson.JSONDecodeError as err:
        raise InvalidFleetRecord(f"not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise InvalidFleetRecord("a fleet record must be a JSON object")
    p = obj.get("p")
    if not isinstance(p, int) or isinstance(p, bool) or p < 0:
        raise InvalidFleetRecord(f"'p' must be a partition number, not {p!r}")
    kind = obj.get("t")
    if kind == "alert":
        try:
            return Transition(p, Alert.from_dict(obj.get("alert")))
        except InvalidAlert as err:
            raise InvalidFleetRecord(f"its alert: {err.reason}") from None
    if kind == "uses":
        run, deps = obj.get("run"), obj.get("deps")
        hosts, servers = _names(obj, "hosts"), _names(obj, "servers")
        if not isinstance(run, str) or not run:
            raise InvalidFleetRecord("'run' must be a non-empty string")
        if (
            not isinstance(deps, dict)
            or len(deps) > MAX_NAMES
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in deps.values()
            )
        ):
            raise InvalidFleetRecord("'deps' must be an object of times")
        usage = RunUsage(_time(obj, "clock"), {str(k): float(v) for k, v in deps.items()},
                         hosts, servers)  # fmt: skip
        return Uses(p, run, usage)
    if kind == "mark":
        return Mark(p, _time(obj, "ts"))
    raise InvalidFleetRecord(f"'t' must be alert, uses or mark, not {kind!r}")


def _names(obj: dict[str, Any], field: str) -> frozenset[str]:
    names = obj.get(field)
    if (
        not isinstance(names, list)
        or len(names) > MAX_NAMES
        or not all(isinstance(n, str) for n in names)
    ):
        raise InvalidFleetRecord(f"{field!r} must be a list of names")
    return frozenset(names)


def _time(obj: dict[str, Any], field: str) -> float:
    ts = obj.get(field)
    if not isinstance(ts, int | float) or isinstance(ts, bool) or not math.isfinite(ts):
        raise InvalidFleetRecord(f"{field!r} must be a finite number")
    return float(ts)
