"""The native duplicate-id window (`_ids.c`) against the Python it mirrors (`RecentIds`):
built, the same answers for every call, the same window after its state is taken up, its
digest CPython's own, and wrong arguments refused."""

from __future__ import annotations

import importlib
import os
import pickle
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runwatch.stream.tracked import RecentIds, id_window

_ids = importlib.import_module("runwatch.stream._ids")
KEY = bytes(range(16))


def test_the_native_window_is_built() -> None:
    """The install builds `_ids.c` wherever a C compiler is at hand (this machine, CI): a
    build that failed would go unnoticed (the extension is optional) but for this."""
    assert type(id_window(4)).__name__ == "IdWindow"
    assert type(id_window(4, native=False)) is RecentIds


def _ops(draw: st.DrawFn) -> tuple[int, list[tuple[str, str]]]:
    capacity = draw(st.integers(0, 40))
    ids = st.text(alphabet="ab\n\u00e9\ud800", max_size=3) | st.integers(0, 120).map(str)
    steps = st.tuples(st.sampled_from(["add", "in", "state"]), ids)
    return capacity, draw(st.lists(steps, max_size=400))


@settings(max_examples=300, deadline=None)
@given(st.composite(_ops)())
def test_the_native_window_answers_as_recent_ids(case: tuple[int, list[tuple[str, str]]]) -> None:
    """Adds, probes and a restart from the state (a checkpoint) in any order, on windows
    small enough that ids are forgotten and the table's clusters are shifted: every answer,
    every length the same. (Ids from a few characters, a newline, a lone surrogate.)"""
    capacity, steps = case
    native, python = _ids.IdWindow(capacity, KEY), RecentIds(capacity)
    for op, ident in steps:
        if op == "add":
            native.add(ident)
            python.add(ident)
        elif op == "in":
            assert (ident in native) == (ident in python)
        else:
            native = pickle.loads(pickle.dumps(native))
        assert len(native) == len(python)
    for ident in {ident for _, ident in steps}:
        assert (ident in native) == (ident in python)


def test_the_id_asked_of_last_is_digested_once_and_an_equal_one_is_found() -> None:
    """The live driver asks of an event's id, then the engine asks and adds the same str: the
    window keeps the last id's digest (and a reference to it, so its address is no other
    str's); an equal str made anew, or another id between, is digested as ever."""
    window = _ids.IdWindow(8, KEY)
    ident = "".join(["ev-", "0001"])
    before = sys.getrefcount(ident)
    assert ident not in window
    assert sys.getrefcount(ident) == before + 1  # (held while it is the last asked)
    assert ident not in window
    window.add(ident)
    assert ident in window
    assert "".join(["ev-", "0001"]) in window  # (another object, the same id)
    assert "ev-0002" not in window
    assert sys.getrefcount(ident) == before  # (let go once another was asked of)
    window.add("ev-0002")
    assert len(window) == 2
    assert ident in window


@pytest.mark.parametrize("seed", range(4))
def test_a_full_window_forgets_its_oldest_and_keeps_the_rest(seed: int) -> None:
    """200,000 adds through a window of 1,000 (its table of 2,048 slots at most half full, so
    every forgetting shifts a cluster), a fifth of them repeats: the same answers as the
    reference for the last 5,000 ids added, held or forgotten."""
    rng = random.Random(seed)
    native, python = _ids.IdWindow(1000, os.urandom(16)), RecentIds(1000)
    added: list[str] = []
    for n in range(200_000):
        ident = rng.choice(added[-1500:]) if added and rng.random() < 0.2 else f"ev-{seed}-{n}"
        native.add(ident)
        python.add(ident)
        added.append(ident)
    assert len(native) == len(python) == 1000
    assert [i in native for i in added[-5000:]] == [i in python for i in added[-5000:]]


def test_a_state_restores_the_key_and_the_age_of_its_ids() -> None:
    """`state()` is the key then the digests oldest first; a window made from it answers as
    the one it came from, and one of less capacity keeps the newest."""
    window = _ids.IdWindow(5, KEY)
    for ident in "abcdefg":
        window.add(ident)
    state = window.state()
    assert state[:16] == KEY
    assert len(state) == 16 + 5 * 8
    assert [i in _ids.IdWindow(5, state) for i in "abcdefg"] == [False] * 2 + [True] * 5
    assert [i in _ids.IdWindow(2, state) for i in "abcdefg"] == [False] * 5 + [True] * 2
    other_key = _ids.IdWindow(5, bytes(16))
    for ident in "cdefg":
        other_key.add(ident)
    assert other_key.state()[16:] != state[16:]  # (the key decides the digests)
    window.add("h")
    assert "c" not in window
    assert "h" in window


def test_python_states_are_taken_up_by_the_native_window() -> None:
    """A checkpoint of the Python way (the ids, joined) read by the native way: the same ids
    held, in their order."""
    python = RecentIds(3)
    for ident in ["x", "with\nnewline", "y", "z"]:
        python.add(ident)
    native = id_window(3, python.state())
    assert type(native).__name__ == "IdWindow"
    assert [i in native for i in ["x", "with\nnewline", "y", "z"]] == [False, True, True, True]
    native.add("w")
    assert "with\nnewline" not in native
    assert "y" in native


def test_the_digest_is_cpythons_siphash13() -> None:
    """With `PYTHONHASHSEED=0` CPython hashes a str of ASCII and bytes with SipHash-1-3 under a
    key of zeros: the native digest under that key is the same number for any length."""
    data = [b"", b"a", b"runwatch-0001", b"x" * 8, b"y" * 37, "\u00e9t\u00e9".encode()]
    code = f"print(*[hash(d) for d in {data!r}])"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    want = [int(v) for v in out.stdout.split()]

    def signed(v: int) -> int:
        v = v - (1 << 64) if v >= 1 << 63 else v
        return -2 if v == -1 else v

    assert want[0] == 0  # (an empty bytes hashes to 0 without SipHash: left out below)
    assert [signed(_ids.siphash13(bytes(16), d)) for d in data[1:]] == want[1:]


def test_wrong_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="16-byte key"):
        _ids.IdWindow(5, b"short")
    with pytest.raises(ValueError, match="16-byte key"):
        _ids.IdWindow(5, KEY + b"123")
    with pytest.raises(ValueError, match="0 <= capacity < 2"):
        _ids.IdWindow(-1, KEY)
    with pytest.raises(ValueError, match="0 <= capacity < 2"):
        _ids.IdWindow(2**62 + 1, KEY)  # (its table's size would overflow)
    twice = KEY + (7).to_bytes(8, "little") * 2
    with pytest.raises(ValueError, match="a digest twice"):
        _ids.IdWindow(5, twice)  # (`state()` writes each once: no state of it)
    with pytest.raises(TypeError, match="not a int"):
        id_window(5, 7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="native part's digests"):
        id_window(5, _ids.IdWindow(5, KEY).state(), native=False)
    window = _ids.IdWindow(5, KEY)
    with pytest.raises(TypeError, match="an event id is a str, not int"):
        window.add(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="an event id is a str, not bytes"):
        assert b"a" in window
    with pytest.raises(ValueError, match="a key is 16 bytes"):
        _ids.siphash13(b"", b"data")
    empty = _ids.IdWindow(0, KEY)
    empty.add("a")
    assert "a" not in empty
    assert len(empty) == 0
    assert empty.state() == KEY
