"""The live clock rule: time the worker could not read is not silence."""

from __future__ import annotations

import math

from runwatch.stream.timekeeping.reading import (
    GAP_S,
    LAG_WINDOW_S,
    RECONNECT_S,
    WINDOW_S,
    ReadClock,
    interrupted,
    told,
)


def test_steady_reading_lets_time_go() -> None:
    clock = ReadClock()
    for t in range(100, 120):
        clock.observe(t * 0.5)
        assert clock.limit(t * 0.5, t * 0.5) == t * 0.5


def test_after_a_gap_time_holds_at_its_start_for_as_long_as_it_lasted() -> None:
    clock = ReadClock()
    clock.observe(1000.0)
    clock.observe(1009.0)  # a 9 s broker outage: the first fetch after it
    assert clock.limit(1009.0, 1009.0) == 1000.0
    assert clock.limit(1017.0, 1017.9) == 1000.0  # the emitters are still delivering
    assert clock.limit(1018.0, 1018.0) == 1018.0  # 9 s after reading resumed: judged
    assert clock.limit(1019.0, 1019.0) == 1019.0


def test_a_long_gap_holds_no_longer_than_emitters_take_to_come_back() -> None:
    clock = ReadClock()
    clock.observe(1000.0)
    clock.observe(1600.0)  # a worker paused for ten minutes
    assert clock.limit(1600.0 + RECONNECT_S - 0.1, 1600.0 + RECONNECT_S - 0.1) == 1000.0
    assert clock.limit(1600.0 + RECONNECT_S, 1600.0 + RECONNECT_S) == 1600.0 + RECONNECT_S


def test_a_second_gap_during_the_hold_keeps_the_first_start() -> None:
    clock = ReadClock()
    clock.observe(1000.0)
    clock.observe(1009.0)  # holds until 1018
    clock.observe(1012.0)
    assert clock.limit(1013.0, 1013.0) == 1000.0
    assert clock.limit(1018.0, 1018.0) == 1018.0


def test_late_records_hold_silence_reconnect_s_behind_the_wall_clock() -> None:
    """A record 4 s late says emitters deliver late, and how much later another may come it
    cannot say: time goes on RECONNECT_S behind the wall clock while such records come."""
    clock = ReadClock()
    clock.late(1000.5, 1000.6)  # on time: nothing
    assert clock.limit(1001.0, 1001.0) == 1001.0
    clock.late(1006.0, 1010.0)
    assert clock.limit(1010.0, 1010.0) == 1010.0 - RECONNECT_S
    assert clock.limit(1020.0, 1020.0) == 1020.0 - RECONNECT_S  # it goes on, behind
    clock.late(1018.0, 1021.0)  # 3 s: on time enough (LATE_S): the hold ends as it would
    end = 1010.0 + LAG_WINDOW_S  # nothing late for LAG_WINDOW_S: judged to the wall clock
    assert clock.limit(end - 0.1, end - 0.1) == end - 0.1 - RECONNECT_S
    assert clock.limit(end + 0.1, end + 0.1) == end + 0.1
    assert clock.limit(990.0, 1012.0) == 990.0  # a horizon further behind stands
    restored = ReadClock.load(clock.dump())
    clock.late(1030.0, 1040.0)
    assert clock.limit(1040.0, 1040.0) == 1040.0 - RECONNECT_S
    assert ReadClock.load((None, None, -math.inf, -math.inf)) == ReadClock()  # an older one
    assert restored.dump() == (None, None, -math.inf, -math.inf, 1010.0)


def test_late_records_without_end_delay_silence_by_reconnect_s_at_most() -> None:
    """An emitter whose every record is 2 min late (a wrong clock nobody corrects, or
    someone else's records under its name) delays silence by RECONNECT_S at most, and time
    goes on all along: a silence longer than that is judged."""
    clock = ReadClock()
    for i in range(1200):  # 10 minutes, a record every 0.5 s
        now = 1000.0 + i * 0.5
        clock.late(now - 120, now)
        assert clock.limit(now, now) == now - RECONNECT_S


def test_a_load_that_makes_beats_late_holds_silence_as_long_as_it_lasts() -> None:
    """The cluster bench (issue 43): emitters of one busy host delivering 4-7 s late for a
    minute, one of them 14 s for a while: how late the others come says nothing of how
    late the next may be. Silence is never judged past a beat still on its way: every
    record stamped before the silence clock has arrived by then; the old bounded episodes
    let time run free half of that minute."""
    clock, sent = ReadClock(), []
    for i in range(600):  # a beat every 0.1 s from one of many emitters
        ts = 1000.0 + i * 0.1
        sent.append((ts + 4.0 + 3.0 * ((i * 7) % 10) / 10, ts))  # 4 to 6.7 s late
    sent.append((1046.1, 1031.7))  # and one sender stalled, 14.4 s behind (the bench again)
    sent.sort()
    for k, (arrival, ts) in enumerate(sent):
        clock.late(ts, arrival)
        judged = clock.limit(arrival, arrival)
        in_flight = [t for a, t in sent[k + 1 :] if a > arrival]
        assert not in_flight or judged <= min(in_flight), f"at {arrival}"


def test_a_short_stall_is_not_a_gap() -> None:
    clock = ReadClock()
    clock.observe(1000.0)
    clock.observe(1000.0 + GAP_S)
    assert clock.limit(1000.0 + GAP_S, 1000.0 + GAP_S) == 1000.0 + GAP_S
    clock.observe(999.0)  # an older answer (observed late) moves nothing
    assert clock.answered == 1000.0 + GAP_S


def test_a_rebuilt_partition_holds_for_an_outage_it_did_not_see() -> None:
    clock = ReadClock.after(1000.0)  # its last record, appended before the broker stopped
    clock.observe(1012.0)  # its first answer after going live
    assert clock.limit(1012.0, 1012.0) == 1000.0
    assert clock.limit(1024.0, 1024.0) == 1024.0
    empty = ReadClock.after(float("-inf"))  # nothing in the partition yet
    empty.observe(1012.0)
    assert empty.limit(1012.0, 1012.0) == 1012.0


def test_a_gap_soon_after_another_hold_still_holds() -> None:
    """Late records are a guess, bounded; a gap in reading is not (two broker restarts)."""
    clock = ReadClock()
    clock.observe(1000.0)
    clock.observe(1009.0)  # holds until 1018
    for t in range(1010, 1020):  # reading again
        clock.observe(float(t))
    assert clock.limit(1019.0, 1019.0) == 1019.0
    clock.observe(1025.0)  # the broker away again
    assert clock.limit(1025.0, 1025.0) == 1019.0


def test_a_re_read_tells_an_outage_from_quiet_by_what_follows_the_gap() -> None:
    """(append time, event time) of each record: a gap of 10 s that late records follow
    (spooled through it, behind one emitter's newest) is an interruption; one that on-time
    records follow all the window long was quiet; one whose window is not read yet waits."""
    steady = [(1000.0 + i, 1000.0 + i) for i in range(5)]
    outage = [(1014.0, 1014.0), (1014.1, 1005.0), (1014.2, 1006.0)]
    assert interrupted(steady + outage, 999.0, complete=False) == (8, [5])
    quiet = [(1014.0 + i, 1014.0 + i) for i in range(20)]
    assert interrupted(steady + quiet, 999.0, complete=False) == (25, [])
    assert interrupted(steady + quiet[:3], 999.0, complete=False) == (5, [])  # waits
    assert interrupted(steady + quiet[:3], 999.0, complete=True) == (8, [])
    assert interrupted(outage, 1004.0, complete=False) == (3, [0])  # the gap before them
    assert interrupted(quiet[:3], float("-inf"), complete=False) == (3, [])  # the first
    # late records stamped after the gap were not spooled through it: quiet all the same
    slow = [(1014.0 + i, 1014.0) for i in range(20)]
    assert interrupted(steady + slow, 999.0, complete=False) == (25, [])


def test_what_follows_a_gap_tells_it_only_once_it_can() -> None:
    """A gap that ended at 1014: a record stamped before then, 3 s late or more, says it was
    an interruption; WINDOW_S of appends without one, that it was quiet; less, nothing yet."""
    assert told(1014.0, [(1014.0, 1014.0), (1015.0, 1009.0)]) is True
    assert told(1014.0, [(1014.0, 1014.0), (1015.0, 1015.0)]) is None
    assert told(1014.0, [(1014.0 + WINDOW_S + 0.1, 1014.0 + WINDOW_S)]) is False
    assert told(1014.0, [(1016.0, 1013.5)]) is None  # stamped in the gap, but not late
    assert told(1014.0, []) is None
