"""`FarAhead`: an event far ahead of a replayed stream waits for company. Several sources
near it, or three of one source while nothing else goes on at the stream's time, mean the
stream moved; three of one source while others go on at the old time are one source gone
wrong, and are refused."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runwatch.stream.timekeeping.ahead import FarAhead

T, HOUR = 1_800_000_000.0, 3600.0


def feed(ahead: FarAhead[str], events: list[tuple[float, str, str]]) -> tuple[list[str], list[str]]:
    passed: list[str] = []
    refused: list[str] = []
    for ts, source, item in events:
        out, bad = ahead.offer(ts, source, item)
        passed += out
        refused += [i for i, _ in bad]
    refused += [i for i, _ in ahead.finish()]
    return passed, refused


def test_a_single_source_resuming_after_a_gap_moves_the_stream() -> None:
    events = [(T, "run-a", "a0"), (T + 10, "run-a", "a1")]
    events += [(T + 5 * HOUR + k, "run-a", f"late{k}") for k in range(3)]
    passed, refused = feed(FarAhead(), events)
    assert passed == ["a0", "a1", "late0", "late1", "late2"]
    assert refused == []


def test_two_sources_ahead_together_move_the_stream() -> None:
    events = [(T, "run-a", "a0"), (T + 5 * HOUR, "run-a", "a1"), (T + 5 * HOUR + 1, "run-b", "b1")]
    passed, refused = feed(FarAhead(), events)
    assert passed == ["a0", "a1", "b1"]
    assert refused == []


def test_one_source_far_ahead_while_the_stream_goes_on_is_refused() -> None:
    events = [(T, "run-a", "a0")]
    for k in range(5):
        events.append((32_503_680_000.0, "hostile", f"h{k}"))  # the year 3000, five times
        events.append((T + 10 + k, "run-a", f"a{k + 1}"))
    passed, refused = feed(FarAhead(), events)
    assert passed == ["a0", "a1", "a2", "a3", "a4", "a5"]
    assert refused == ["h0", "h1", "h2", "h3", "h4"]


_offsets = st.lists(st.floats(-2 * HOUR, 2 * HOUR, allow_nan=False), max_size=8)


@given(_offsets, _offsets)
def test_a_batch_passes_in_one_step_only_as_its_events_would_one_by_one(
    before: list[float], batch: list[float]
) -> None:
    """`passes_all` of a batch is True only if `passes` of each in turn would be, and leaves
    the stream's time where they would; False changes nothing."""
    one, many = FarAhead[str](), FarAhead[str]()
    for ts in (T + x for x in before):
        if not one.passes(ts):
            one.offer(ts, "src", "x")
        if not many.passes(ts):
            many.offer(ts, "src", "x")
    stamps = [T + x for x in batch]
    high, held = many.high, len(many)
    if many.passes_all(stamps):
        assert all(one.passes(ts) for ts in stamps)
        assert many.high == one.high
    else:
        assert (many.high, len(many)) == (high, held)
