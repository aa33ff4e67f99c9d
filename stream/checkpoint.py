"""Checkpoints: a live driver's state as bytes, so a restart replays only what came after.

A checkpoint holds what a re-read of the input up to a position would rebuild -- run states,
the alert lifecycle (firing conditions, pending checks, transition counts), the dedup window,
the hosts' clock offsets, the runs that left -- and the position it covers, which the caller
names (a Kafka offset, a place in serve's event log). Pure: a driver in, bytes out, and back.
The Kafka worker keeps checkpoints on a compacted topic, `runwatch serve` in a file beside
its log; both use this format.

Format: ``RWCK``, the format version (u16), a fingerprint of the state's layout (16 bytes),
a fingerprint of the rules config (16), the CRC-32 of the body, then the body: the pickled
state, compressed with zstd at level 1 (a fifth of zlib's CPU for a smaller body,
bench/RESULTS.md: the forked child that makes a worker's checkpoint spends it, and the fleet
stage in its loop). A checkpoint is used only when all four match:

- the format version, bumped by hand when what a checkpoint means changes;
- the layout: the fields of every class the state is made of, read from the code, so a
  release that adds a field to `Step` makes older checkpoints unusable by itself (no one
  has to remember to bump anything);
- the rules: their ids and parameters decide what state is kept and which rule a firing
  condition belongs to;
- the CRC: a record damaged on the way or on disk.

Anything else raises `CheckpointError` with the reason, and the caller rebuilds from the
input as before. Pickle because it is the fastest way here to write object graphs with
shared references (a server and the process that vouches for it) -- but read with an
unpickler that can build only the state classes below and plain containers: a checkpoint
that names anything else is refused, so a record forged on the topic can describe a strange
state, never run code.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import importlib
import inspect
import io
import pickle
import pkgutil
import struct
import zlib
from array import _array_reconstructor, array  # type: ignore[attr-defined]
from collections import OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import zstandard

from runwatch.stream import state as state_package
from runwatch.stream.config import RulesConfig
from runwatch.stream.exceptions import CheckpointError
from runwatch.stream.live import LiveDriver
from runwatch.stream.rules.base import Condition, params_json
from runwatch.stream.state.compact import BLANKS
from runwatch.stream.timekeeping.skew import ClockOffsets, _Host

#: 2: the runs' lifted alerts and latest resume (the circuit breaker); 3: reading; 4: what a
#: rebuild's re-read made and has not published (a checkpoint of a half-rebuilt partition);
#: 6: zstd, not zlib; 7: a run's pending trajectories as columns (`state.inference`); 8: a
#: run's containers (processes, restarts, ranks...) as `Compact` records, their slots' tuple;
#: 9: a run's parts that it never wrote as the shared blank of their kind, named, not copied;
#: 10: so its dicts that nothing was written to (`compact.EMPTY`); 11: a run's `StateConfig`
#: and the conditions firing (`Condition`) msgspec structs, pickled as their fields; 12: the
#: duplicate-id window as its key and digests (`tracked.id_window`) where the native part is
#: built (the ids themselves where not)
FORMAT = 12
MAGIC = b"RWCK"
_HEAD = struct.Struct(">4sH16s16sI")
#: A checkpoint body larger than this once decompressed is refused (a hostile record).
MAX_STATE_BYTES = 1 << 31


def _state_classes() -> tuple[type, ...]:
    """Every class defined in `runwatch.stream.state` (a run's state is made of them: a new
    part of it, in a new module, is covered by itself), the engine's conditions and the
    live driver's clock offsets."""
    found: list[type] = []
    for info in sorted(pkgutil.iter_modules(state_package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{state_package.__name__}.{info.name}")
        found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if c.__module__ == module.__name__]  # fmt: skip
    return (*found, Condition, ClockOffsets, _Host)


#: Every class a checkpoint may build, and so every class whose layout it depends on.
STATE_CLASSES: tuple[type, ...] = _state_classes()
_CONTAINERS: tuple[type, ...] = (deque, OrderedDict, array)
_ALLOWED: dict[tuple[str, str], Any] = {
    (c.__module__, c.__qualname__): c for c in STATE_CLASSES + _CONTAINERS
}
# how pickle rebuilds an array (of doubles: a host's clock samples): from its typecode and
# raw bytes, nothing else
_ALLOWED["array", "_array_reconstructor"] = _array_reconstructor
# the shared blank records (`compact.blank`), by name: a load shares them again
_ALLOWED.update(BLANKS)


def _fields(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        # in order: a struct pickles its fields by position, so two swapped fields of one
        # type would load an older checkpoint's values swapped
        return list(cls.__struct_fields__)
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    if not names and "__init__" in cls.__dict__:
        # no slots: the names its __init__ uses, a superset of its fields -- a
        # change there invalidates older checkpoints, which errs on the safe side
        names = list(cls.__dict__["__init__"].__code__.co_names)
    return sorted(names)


def layout_fingerprint() -> bytes:
    """16 bytes that change whenever a state class gains, loses or renames a field."""
    text = ";".join(f"{c.__module__}.{c.__qualname__}({','.join(_fields(c))})"
                    for c in STATE_CLASSES)  # fmt: skip
    return hashlib.sha256(f"{FORMAT}|{text}".encode()).digest()[:16]


def rules_fingerprint(config: RulesConfig) -> bytes:
    """16 bytes that change whenever a rule is added, removed, reordered or re-parameterised."""
    text = ";".join(
        f"{type(r).__module__}.{type(r).__qualname__}:{r.rule_id}:{params_json(r.params)}"
        for r in config.rules
    )
    return hashlib.sha256(text.encode()).digest()[:16]


def dump(driver: LiveDriver, position: Any) -> bytes:
    """The driver's state and `position` (what the caller resumes from: plain data) as one
    checkpoint. Call it between batches: the state must be what the input up to `position`
    made."""
    return pack(driver.dump_state(), driver.engine.config, position)


def load(data: bytes, driver: LiveDriver) -> Any:
    """Put the checkpoint's state into `driver` (a fresh one, made with the rules config in
    force) and return the position it covers. Raises CheckpointError, leaving the driver as
    it was, when the checkpoint cannot be used."""
    state, position = unpack(data, driver.engine.config)
    try:
        driver.load_state(state)
    except Exception as err:  # a forged body: whatever it breaks, it is refused
        raise CheckpointError(f"unreadable ({type(err).__name__}: {err})") from None
    return position


def pack(state: Any, config: RulesConfig, position: Any) -> bytes:
    """`state` (plain data and the state classes), judged under `config`, and `position`, as
    one checkpoint: a live driver's (`dump`), the Kafka fleet stage's."""
    with _no_gc():
        pickled = pickle.dumps({"position": position, "driver": state}, protocol=5)
        body = zstandard.ZstdCompressor(level=1).compress(pickled)  # (its size in the frame)
    head = _HEAD.pack(MAGIC, FORMAT, layout_fingerprint(), rules_fingerprint(config),
                      zlib.crc32(body))  # fmt: skip
    return head + body


def unpack(data: bytes, config: RulesConfig) -> tuple[Any, Any]:
    """A checkpoint's state and position, if it was written by this layout under `config`;
    raises CheckpointError with the reason otherwise."""
    if len(data) < _HEAD.size:
        raise CheckpointError(f"too short to be a checkpoint ({len(data)} bytes)")
    magic, version, layout, rules, crc = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError("not a runwatch checkpoint")
    if version != FORMAT:
        raise CheckpointError(f"format version {version}, this runwatch reads {FORMAT}")
    if layout != layout_fingerprint():
        raise CheckpointError("written by a runwatch whose run state has other fields")
    if rules != rules_fingerprint(config):
        raise CheckpointError("written under other rules (the rules config changed)")
    body = memoryview(data)[_HEAD.size :]
    if zlib.crc32(body) != crc:
        raise CheckpointError("damaged (its checksum does not match)")
    try:
        size = zstandard.frame_content_size(body)  # (what it would allocate: checked first)
        if not 0 <= size <= MAX_STATE_BYTES:
            raise CheckpointError(f"its state is over {MAX_STATE_BYTES} bytes or of no size")
        raw = zstandard.ZstdDecompressor().decompress(body, allow_extra_data=False)
        with _no_gc():
            state = _Unpickler(io.BytesIO(raw)).load()
        return state["driver"], state["position"]
    except CheckpointError:
        raise
    except Exception as err:  # a forged or truncated body: whatever it breaks, it is refused
        raise CheckpointError(f"unreadable ({type(err).__name__}: {err})") from None


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic GC off while a checkpoint is written or read: the objects made (hundreds
    per run) trigger full collections over every run state otherwise, for no cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Unpickler(pickle.Unpickler):
    """Builds the state classes and plain containers, nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        cls = _ALLOWED.get((module, name))
        if cls is None:
            raise CheckpointError(f"names {module}.{name}, which no checkpoint holds")
        return cls
