"""`Compact`: how the many small records of a run's state (trajectories, steps, ranks,
processes) pickle into a checkpoint -- as the tuple of their slot values.

Python's default for a slotted object pickles `(None, {slot: value})` through the generic
state path: several times slower to write than a tuple, and larger (bench/RESULTS.md, "A
checkpoint of many live runs", against "default slot pickling"). A checkpoint of thousands
of live runs holds a hundred such records per run and is written on the worker's live path,
so the difference is seconds of stall per checkpoint at fleet scale.
"""

from __future__ import annotations

import copyreg
from types import MappingProxyType
from typing import Any, NoReturn, TypeVar


class Compact:
    """Base of a slotted state record: pickles as its `__slots__` values, in order (every
    slot is set in `__init__`), and is rebuilt with `cls.__new__` and `__setstate__`, so the
    checkpoint's restricted unpickler needs nothing but the class. Both methods are written
    per class as plain attribute reads and writes, as `dataclasses` writes `__init__`: a
    generic loop over the names costs several times more per record to load."""

    __slots__ = ()
    #: slots a checkpoint writes empty (`{}`): caches the record rebuilds by itself as it
    #: is used again, which cost a checkpoint more to write than a takeover to remake
    _unsaved: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.__dict__.get("__slots__", ())
        if not names:
            return
        fields = ", ".join(f"self.{name}" for name in names) + ","
        written = ", ".join("{}" if name in cls._unsaved else f"self.{name}"
                            for name in names) + ","  # fmt: skip
        namespace: dict[str, Any] = {"newobj": copyreg.__newobj__}  # type: ignore[attr-defined]
        exec(  # code made from the class's own slot names
            f"def __reduce_ex__(self, protocol):\n"
            f"    return newobj, (type(self),), ({written})\n"
            f"def __setstate__(self, values):\n"
            f"    {fields} = values\n",
            namespace,
        )
        cls.__reduce_ex__ = namespace["__reduce_ex__"]  # type: ignore[method-assign]
        cls.__setstate__ = namespace["__setstate__"]  # type: ignore[attr-defined]


C = TypeVar("C", bound=Compact)

#: every blank record (`blank`), by the (module, name) a checkpoint names it with
BLANKS: dict[tuple[str, str], object] = {}


def _refuse(self: object, name: str, value: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is shared by every run that has none: a run "
                    f"writes to its own (not {name})")  # fmt: skip


def blank(record: C, name: str) -> C:
    """`record` (made empty), as the one record of its kind every run holds until its first
    write makes the run its own: most runs never have ranks, weights, stacks... and an
    empty record with its empty containers cost each run 100-250 bytes.

    Read-only, so that a writer that forgets to make its own fails, not writes into every
    run's: its dicts become read-only views, its lists tuples, and it refuses attribute
    writes. A checkpoint names it (`name`, a global of the record's module, which the
    checkpoint's unpickler allows) rather than copying it: a load shares this one again."""
    cls = type(record)
    slots: tuple[str, ...] = cls.__slots__
    for slot in slots:
        value = getattr(record, slot)
        if isinstance(value, dict):
            object.__setattr__(record, slot, MappingProxyType({}))
        elif isinstance(value, list):
            object.__setattr__(record, slot, ())
    shared = type(f"Blank{cls.__name__}", (cls,), {
        "__slots__": (), "__module__": cls.__module__, "__setattr__": _refuse,
        "__reduce_ex__": lambda self, protocol: name})  # fmt: skip
    record.__class__ = shared
    BLANKS[cls.__module__, name] = record
    return record


class _Empty(dict[Any, Any]):
    """`EMPTY`'s class: a dict that refuses every write."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("EMPTY is shared by every record that has nothing there: a record "
                        "writes to its own dict")  # fmt: skip

    __setitem__ = __delitem__ = setdefault = pop = popitem = clear = update = _refuse
    __ior__ = _refuse

    def __reduce_ex__(self, protocol: Any) -> str:
        return "EMPTY"  # (named, as a blank record is)


#: the one empty dict the dicts most runs never fill start as (a run's alerts firing, its
#: per-run parameters, the services it waited on...), replaced by the record's own on its
#: first write: an empty dict of its own cost each run 64 bytes a dict
EMPTY: dict[Any, Any] = _Empty()
BLANKS[__name__, "EMPTY"] = EMPTY
