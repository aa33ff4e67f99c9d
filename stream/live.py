"""The live driver: one partition's records in, alert transitions and dead letters out.

No Kafka and no clock here (the worker passes both in), so everything the worker decides
is unit-testable. One `LiveDriver` owns one partition of `runwatch.events`: an `Engine` for
the runs in it, and the clock offsets of the hosts that emit them (`ClockOffsets`).

Time. Events are applied on their event time, corrected onto the broker's clock (the
record's append time) so that none is later than its arrival and a run's events from one
host keep their order (`ClockOffsets.shift`). Conditions that ripen without events (a
heartbeat that stops) are caught by `tick(now)` with the wall clock, held back by `grace`
seconds so that an event still in flight when its moment passes is applied before that
moment is judged. Applying
events on event time (not "wall clock at arrival") keeps the live verdicts equal to what a
re-read of the partition gives, which is what a restarted worker relies on.

Silence. The rules on silence (`Rule.silence`) are judged on the engine's silence clock,
which the driver holds (`Engine.hold`) while its reading says not everything may be in yet
(`ReadClock`: after an outage at the outage's start while the emitters deliver what they
spooled, and behind the wall clock by the delay of records arriving late); every other
rule, and every event, stays on event time -- a NaN step that arrives late is still judged
at its own time.

Restarts. A worker that takes over a partition re-reads it from the start with
`replaying = True` (transitions are held, not returned), then `finish_replay` compares what
the rebuilt engine made with what `runwatch.alerts` already holds (`PublishedAlerts`) and
returns only the missing transitions. Transition ids are deterministic (`key#n`), so "not
lost, not repeated" is checkable by id; per key the n-th transition is firing when n is odd.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, Protocol, cast

import msgspec

from runwatch.emitters import events as ev
from runwatch.emitters.bounds import MAX_EVENT_BYTES
from runwatch.emitters.events import FLEET_RUN
from runwatch.emitters.topics import Topics
from runwatch.stream.alerts import Alert, transition_id
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import MAX_AHEAD_RAW, admit_lines, decode, events_of
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.fleet.stage import FleetStage
from runwatch.stream.native import native
from runwatch.stream.published import PublishedAlerts
from runwatch.stream.records import EMITTED, Headers, is_batch, lines_of, record_events
from runwatch.stream.refused import Refused
from runwatch.stream.state.fleet import FleetState
from runwatch.stream.timekeeping.reading import GAP_S, LATE_S, ReadClock, interrupted, told
from runwatch.stream.timekeeping.skew import ClockOffsets
from runwatch.stream.timekeeping.timebounds import (
    MAX_AHEAD_LIVE,
    MAX_TS,
    MIN_TS,
    span,
    time_problem,
)

#: (value, broker append time in seconds, offset): one record of the driver's partition.
RawRecord = tuple[bytes | None, float, int]
#: (event, its raw bytes, broker append time in seconds, offset, its line in a batch record
#: from 1, else 0): a record, or a line of one, already decoded.
Decoded = tuple[ev.Event, bytes, float, int, int]

INF = float("inf")


class KafkaRecord(Protocol):
    """What `feed_records` reads of a consumer's record (aiokafka's, the unit tests')."""

    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int: ...  # milliseconds
    @property
    def offset(self) -> int: ...
    @property
    def headers(self) -> Headers | None: ...


#: Hosts whose clock is at most this many seconds behind the broker's are taken as they are
#: (that much may be delivery delay); a clock ahead is always corrected (`ClockOffsets.shift`).
DEFAULT_MIN_CORRECTION = 1.0
#: Seconds the wall clock is held back by when judging conditions that ripen in silence.
DEFAULT_GRACE = 0.5
#: Recent event ids kept per partition to drop duplicates (emitter retries).
DEFAULT_DEDUP = 100_000
#: Bounded state: a finished run leaves the rules this long after its end (its events are
#: in the history), a run silent this long too; late events of a finished run that left
#: are dropped (up to this many such runs remembered).
KEEP_FINISHED_S = 3600.0
SILENT_AFTER_S = 86_400.0
GONE_REMEMBERED = 100_000


def _source(src: ev.Source) -> object:
    """The clock an event was stamped with: its host's, else its process's."""
    return src.host or (src.component, src.instance, src.pid)


def _plain(records: list[KafkaRecord]) -> Iterable[Decoded] | None:
    """The events of `records`, every line decoded in one step (`decode.admit_lines`, what
    replay decodes with), or None where a record has no value or a line is not plain: then
    `feed_records` decodes each alone, which decides each and words every reason. The
    records' lines and the checks of their bytes in one native call (`_fetched.c`) where it
    was built; the rest, decoding on, is `decode.events_of`, as for the Python's. Handed on
    lazily, the one loop that applies them building each step (-1.3% of the feed's
    instructions under callgrind against a list of them)."""
    if _NATIVE_PLAIN is None:
        return _plain_in_python(records)
    got = _NATIVE_PLAIN(records, EMITTED, is_batch, MAX_EVENT_BYTES)
    if got is None:
        return None
    joined, lines, arrivals, offsets, numbers = got
    admitted = events_of(joined, len(lines))
    if admitted is None:
        return None
    return zip(admitted[0], lines, arrivals, offsets, numbers, strict=True)


#: a fetch's lines, joined, and their columns, or None (`_plain`), where the install built it
_NATIVE_PLAIN: (
    Callable[..., tuple[bytes, list[bytes], list[float], list[int], list[int]] | None] | None
) = native("runwatch.stream._fetched", "plain")


def _plain_in_python(records: list[KafkaRecord]) -> list[Decoded] | None:
    """`_plain` in Python: the reference of the native step, and what runs without it."""
    # the tuples' columns, a line each, zipped once at the end (not a loop over records)
    lines: list[bytes] = []
    arrivals: list[float] = []
    offsets: list[int] = []
    numbers: list[int] = []  # the line in a batch record from 1, else 0
    for record in records:
        raw = record.value
        if raw is None:
            return None
        if record.headers and is_batch(record.headers):
            batch = lines_of(raw)
            n = len(batch)
            lines += batch
            arrivals += repeat(record.timestamp / 1000.0, n)
            offsets += repeat(record.offset, n)
            numbers += range(1, n + 1)
        else:
            lines.append(raw)
            arrivals.append(record.timestamp / 1000.0)
            offsets.append(record.offset)
            numbers.append(0)
    events = admit_lines(lines) if lines else None
    if events is None:
        return None
    return list(zip(events, lines, arrivals, offsets, numbers, strict=True))


def _gapped(items: list[Decoded], before: float) -> bool:
    """Whether the append times of `items` (after one at `before`, -inf: none) have a gap
    of GAP_S, the only place `reading.interrupted` finds an outage or a gap to wait on."""
    previous = before
    for item in items:
        arrival = item[2]
        if arrival - previous > GAP_S and previous != -INF:
            return True
        previous = arrival
    return False


def _shifted(event: ev.Event, offset: float) -> ev.Event:
    changes: dict[str, float] = {"ts": event.ts + offset}
    since = getattr(event, "since", None)
    if isinstance(since, float | int) and not isinstance(since, bool):
        changes["since"] = since + offset  # rank.status: when the rank entered its phase
    if isinstance(event, msgspec.Struct):
        return cast(ev.Event, msgspec.structs.replace(event, **changes))
    return event.model_copy(update=changes)


class LiveDriver:
    """Runs the rules live for one partition of `runwatch.events`."""

    def __init__(
        self,
        config: RulesConfig | None = None,
        *,
        topic: str = Topics().events,
        partition: int = 0,
        grace: float = DEFAULT_GRACE,
        min_correction: float = DEFAULT_MIN_CORRECTION,
        clocks: ClockOffsets | None = None,
        dedup_capacity: int = DEFAULT_DEDUP,
        arrival_gaps: bool = False,
        fleet: bool = False,
    ) -> None:
        """`fleet`: judge fleet incidents too (`runwatch.stream.fleet`), for a driver that
        sees every run (`serve`); a Kafka worker sees its partitions' runs only.
        `arrival_gaps`: a re-read reads interruptions of reading from the records' append
        times (`reading.interrupted`: a gap that late records follow), so that it holds
        silence where the live worker's fetches went unanswered -- and a rebuild's end,
        taken on the wall clock, counts as an answer (the Kafka worker's drivers; serve's
        records are only as gappy as its traffic)."""
        self.engine = Engine(config, dedup_capacity=dedup_capacity)
        stage = FleetStage(self.engine) if fleet else None
        self.fleet = stage if stage is not None and stage.enabled else None
        self._held_fleet: list[Alert] = []  # fleet transitions `evict` made, for `tick`
        self.topic = topic
        self.partition = partition
        self.grace = grace
        self.min_correction = min_correction
        self.clocks = clocks or ClockOffsets()
        self.replaying = False
        self._held: list[Alert] = []
        self._held_dead: list[Refused] = []
        self.arrival = float("-inf")  # broker time of the latest record fed
        #: holds time after an outage, while emitters deliver what they spooled through it
        self.reading = ReadClock()
        self.arrival_gaps = arrival_gaps
        #: a re-read's records past a gap, until what follows tells what the gap was
        self._pending: list[Decoded] = []
        self.applied = 0
        self.invalid = 0
        self.failures = 0  # events that raised in the rules (isolated, dead-lettered)
        self.late = 0  # events of runs that finished and left (`evict`), dropped
        self.gone: OrderedDict[str, None] = OrderedDict()  # those runs, the newest last
        self.corrected = 0
        #: offset of the last record fed (a Kafka offset; serve: the end of its log line)
        self.position: int | None = None

    # -- input -----------------------------------------------------------------------------

    def feed(self, records: Iterable[RawRecord]) -> tuple[list[Alert], list[Refused]]:
        """Decode and apply a batch of records in order; return transitions made and
        invalid records.

        While replaying, transitions are held for `finish_replay` and nothing is returned
        (invalid records went to the dead-letter topic when they were first read live).
        """
        decoded: list[Decoded] = []
        dead: list[Refused] = []
        offset = None
        for raw, arrival, offset in records:
            if raw is None:
                dead.append(self._dead("empty record (no value)", b"", offset, "not_json"))
                continue
            try:
                decoded.append((decode(raw), raw, arrival, offset, 0))
            except InvalidEvent as err:
                dead.append(self._dead(err.reason, raw, offset, err.kind))
        out = self.feed_events(decoded, dead)
        self._fed_to(offset)
        return out

    def feed_records(self, records: Iterable[KafkaRecord]) -> tuple[list[Alert], list[Refused]]:
        """`feed`, for this partition's Kafka records as the consumer gives them (value, the
        broker's time in ms, offset, headers): a record carries one event, or with the batch
        header several of one run (`runwatch.stream.records`), applied in line order; a bad
        line is refused alone (a dead letter at the record's offset with its line number,
        its reason naming the line)."""
        records = records if isinstance(records, list) else list(records)
        plain = _plain(records)
        if plain is not None:  # (the same events, decoded in one step)
            out = self.feed_events(plain, [])
            self._fed_to(records[-1].offset)
            return out
        decoded: list[Decoded] = []
        dead: list[Refused] = []
        offset = None
        for record in records:
            raw, arrival, offset = record.value, record.timestamp / 1000.0, record.offset
            if raw is None:
                dead.append(self._dead("empty record (no value)", b"", offset, "not_json"))
                continue
            if record.headers and is_batch(record.headers):
                for number, (line, got) in enumerate(record_events(raw, batch=True), 1):
                    if isinstance(got, InvalidEvent):
                        dead.append(self._dead(got.reason, line, offset, got.kind, number))
                    else:
                        decoded.append((got, line, arrival, offset, number))
                continue
            try:  # (one event: `record_events` without the generator)
                decoded.append((decode(raw), raw, arrival, offset, 0))
            except InvalidEvent as err:
                dead.append(self._dead(err.reason, raw, offset, err.kind))
        out = self.feed_events(decoded, dead)
        self._fed_to(offset)
        return out

    def _fed_to(self, offset: int | None) -> None:
        if self._pending:  # (applied up to the first record it waits with)
            offset = self._pending[0][3] - 1 if offset is None else min(
                offset, self._pending[0][3] - 1)  # fmt: skip
        if offset is not None and (self.position is None or offset > self.position):
            self.position = offset

    def feed_events(
        self, items: Iterable[Decoded], dead: list[Refused] | None = None
    ) -> tuple[list[Alert], list[Refused]]:
        """Apply events a caller has decoded already (`runwatch serve` validates a request
        before it logs and acknowledges it), in order; like `feed` otherwise. `dead`: the
        invalid records of the same batch, returned (or held) with those found here."""
        if self.replaying and self.arrival_gaps:
            self._reread(list(items), dead or [], complete=False)
            return [], []
        return self._apply(items, dead)

    def _reread(self, items: list[Decoded], dead: list[Refused], complete: bool) -> None:
        """A re-read's records: applied up to a gap whose window they do not cover yet (the
        rest waits: at most WINDOW_S of the partition's appends), with a hold of silence at
        each gap late records follow (see `arrival_gaps`)."""
        pending = self._pending
        if not pending and not _gapped(items, self.arrival):
            self._apply(items, dead)  # (what `interrupted` says where no gap: all of them)
            return
        if pending and not complete and told(pending[0][2], self._times(items)) is None:
            pending += items  # (those waiting said nothing: the new ones only are read)
            self._apply([], dead)
            return
        items = [*pending, *items]
        ready, outages = interrupted(self._times(items), self.arrival, complete)
        self._pending = items[ready:]
        starts = sorted({0, *outages})
        for start, end in zip(starts, [*starts[1:], ready], strict=True):
            if start in outages:  # nothing was appended in the gap before this record
                self.reading.answered_by(self.arrival)
                self.reading.observe(items[start][2])
            self._apply(items[start:end], dead)
            dead = []

    def _times(self, items: list[Decoded]) -> list[tuple[float, float]]:
        """(append time, event time on the broker's clock as far as its host's offset is
        known) of each record."""
        out = []
        offset, limit = self.clocks.offset, self.min_correction
        for event, _, arrival, _, _ in items:
            skew = offset(_source(event.src))
            if skew is not None and not -limit <= skew <= limit:
                out.append((arrival, event.ts + skew))
            else:
                out.append((arrival, event.ts))
        return out

    def _apply(
        self, items: Iterable[Decoded], dead: list[Refused] | None = None
    ) -> tuple[list[Alert], list[Refused]]:
        engine, seen, reading = self.engine, self.engine.seen, self.reading
        held_of, shift = self.clocks.held, self.clocks.shifter()
        # the host of the event before and its clock record: a batch record's lines are one
        # process's, so most events after a record's first find their host here
        host_before: object = None
        held: Any = None
        out: list[Alert] = []
        dead = [] if dead is None else dead
        limit = self.min_correction
        arrival = self.arrival
        gone = self.gone
        offset = None
        applied = 0
        held_for = None  # the arrival `engine.hold` was last set for (a batch's lines share it)
        for event, raw, arrival, offset, line in items:
            if event.id in seen:  # before the skew bookkeeping; the engine's one counter
                engine.duplicates += 1
                continue
            if gone and event.run in gone:  # a late event of a run that finished and left
                self.late += 1
                continue
            ts = event.ts
            if ts < MIN_TS or ts >= MAX_TS or ts - arrival > MAX_AHEAD_RAW:  # (else no call)
                problem = time_problem(ts, arrival, MAX_AHEAD_RAW)
                if problem is not None:  # not even a wrong clock: keep it out of the estimate
                    dead.append(self._dead(problem, raw, offset, "bad_time", line))
                    continue
            src = event.src  # (`_source` written out)
            host = src.host or (src.component, src.instance, src.pid)
            if host != host_before:
                held, host_before = held_of(host, arrival), host
            skew = shift(held, event.run, ts, arrival, limit)
            if skew:
                event = _shifted(event, skew)
                self.corrected += 1
                ts = event.ts  # (else the ts read above: one attribute read an event)
            if ts - arrival > MAX_AHEAD_LIVE:
                why = f"ts is {span(ts - arrival)} ahead of the time the event arrived"
                if skew:
                    why += f" (its host's clock corrected by {skew:+.0f}s)"
                dead.append(self._dead(why, raw, offset, "bad_time", line))
                continue
            try:
                # now: event time, but never past its arrival -- one event stamped ahead
                # (within the bounds) must not move time on for every run of the partition;
                # silence is not judged past an outage's start while its backlog comes in
                if arrival - ts > LATE_S:  # (`ReadClock.late` changes nothing otherwise)
                    reading.late(ts, arrival)
                    held_for = None
                if arrival != held_for:  # (the same arrival and reading: the same limit)
                    engine.hold = reading.limit(INF, arrival)
                    held_for = arrival
                alerts = engine.apply(event, ts if ts <= arrival else arrival)
                if alerts:  # (most events make none: no loop)
                    for alert in alerts:
                        alert.to_json()  # what cannot be published must not be made
            except InvalidEvent as err:
                dead.append(self._dead(err.reason, raw, offset, err.kind, line))
                continue
            except Exception as err:  # a bug meets an input: isolate the event, go on
                self.failures += 1
                dead.append(self._dead(f"could not be applied: {type(err).__name__}: {err}",
                                       raw, offset, "failed_in_rules", line))  # fmt: skip
                continue
            if alerts:
                out += alerts if self.fleet is None else self.fleet.transitions(alerts)
            applied += 1
        self.applied += applied
        self.invalid += len(dead)
        self._fed_to(offset)
        if arrival > self.arrival:
            self.arrival = arrival
        if self.replaying:
            self._held += out
            self._held_dead += dead
            return [], []
        return out, dead

    @property
    def duplicates(self) -> int:
        """Events dropped because their id was applied before (the engine's count)."""
        return self.engine.duplicates

    def _dead(
        self, reason: str, raw: bytes, offset: int, kind: str = "schema", line: int = 0
    ) -> Refused:
        return Refused(reason, raw, self.topic, self.partition, offset, kind, line or None)

    def evict(
        self,
        now: float,
        keep_finished_s: float = KEEP_FINISHED_S,
        silent_after_s: float = SILENT_AFTER_S,
    ) -> tuple[list[str], list[str]]:
        """Let go of runs finished over `keep_finished_s` ago and runs silent over
        `silent_after_s` (at `now`): the state follows the live runs, not the history.
        Returns (finished, silent) runs that left."""
        runs = self.engine.runs
        finished, silent = [], []
        for run, tracked in runs.items():
            state = tracked.state
            if state.finished_ts is not None:
                if state.finished_ts < now - keep_finished_s:
                    finished.append(run)
            elif state.clock < now - silent_after_s:
                silent.append(run)
        for run in finished:
            self.gone[run] = None
            if len(self.gone) > GONE_REMEMBERED:
                self.gone.popitem(last=False)
        for run in finished + silent:
            del runs[run]
        self.clocks.forget(finished + silent)
        if self.fleet is not None and silent:  # a fleet incident they held may resolve
            self._held_fleet += self.fleet.left(set(silent), now)
        return finished, silent

    def tick(self, now: float, heard: float = -INF) -> list[Alert]:
        """Judge conditions that ripen without events, at wall clock `now` less the grace;
        silence no further than the reading lets it (or `heard`, where that is further).
        A rule that fails on a run's state is counted (`failures`) and time goes on."""
        try:
            self.engine.hold = max(self.reading.limit(INF, now), heard)
            out = self.engine.advance(now - self.grace)
            if self.fleet is not None and out:
                out = self.fleet.transitions(out)
            if self._held_fleet:  # what evicting silent runs closed (`evict`)
                out, self._held_fleet = self._held_fleet + out, []
        except Exception:  # a bug meets a state: that check is skipped, not every later one
            self.failures += 1
            return []
        if self.replaying:
            self._held += out
            return []
        return out

    # -- rebuild after a restart or a rebalance --------------------------------------------

    def start_replay(self) -> None:
        """From now on hold transitions: the records fed are being re-read."""
        self.replaying = True

    def finish_replay(
        self, published: PublishedAlerts, now: float, *, dead_after: tuple[int, int] = (-1, 0)
    ) -> tuple[list[Alert], list[Refused]]:
        """Catch up to wall clock `now`; return the transitions `runwatch.alerts` lacks,
        and the invalid records (and lines of batch records) past `dead_after`, the place
        (`Refused.place`: offset, line) of the last one the dead-letter topic holds for this
        partition: a batch record may hold several bad lines, each its own letter at the
        record's offset, and a predecessor that published some of them leaves the rest.

        Per key, the rebuilt engine made E transitions (numbered 1..E) and the topic holds
        P. E > P: transitions P+1..E were lost (the worker died before publishing them);
        they are returned in the order they happened. The previous owner judged silence as
        far as the last firing of a silence rule it published, so the rebuilt engine's
        silence clock goes at least that far (it has read all the previous owner had): its
        own hold, after an outage, must not take back what was judged. E < P then only
        where the re-read knows more than the previous owner did -- a process it judged
        silent whose beats came after all: the engine's count moves to P and the transition
        that says so (a resolve) is returned.
        """
        engine = self.engine
        if self.arrival_gaps:  # the records waiting on a gap, judged by what there is; and
            pending, self._pending = self._pending, []  # the ends were taken at `now`: a
            self._reread(pending, [], complete=True)  # broker away since the last record
            if pending:  # appended held reading then too
                self._fed_to(pending[-1][3])
            self.reading.answered_by(self.arrival)
            self.reading.observe(now)
        # how far the previous owner judged silence: a silence rule's firing is stamped on
        # its silence clock; every other transition at an event's time, which says nothing
        # of it (a NaN step read late, after an outage, while silence was held)
        silence = {rule.rule_id for rule in engine.rules if rule.silence}
        judged = max((a.ts for a in published.last.values()
                      if a.firing and a.rule in silence and a.run in engine.runs),
                     default=-INF)  # fmt: skip
        self.tick(now, heard=judged)
        held, self._held = self._held, []
        dead = [d for d in self._held_dead if d.position is not None and d.place > dead_after]
        self._held_dead = []
        self.replaying = False
        # Per key the engine made E transitions in all (a checkpoint's and the re-read's);
        # the re-read made the last h of them, numbered E-h+1..E.
        made: dict[str, list[Alert]] = {}
        for alert in held:
            made.setdefault(alert.key, []).append(alert)
        numbered: dict[str, int] = {}
        out: list[Alert] = []
        for alert in held:
            key = alert.key
            if key not in numbered:
                numbered[key] = self._made(alert.run, key, len(made[key])) - len(made[key])
            numbered[key] += 1
            if numbered[key] > published.count(key):
                out.append(alert)
        for key in published:
            last = published.last.get(key)
            if last is None:
                continue  # all a checkpoint's: the engine made that many
            if last.run == FLEET_RUN:  # the fleet stage's, not a run's
                if self.fleet is not None:
                    fleet_fix = self.fleet.reconcile(last, published.count(key), engine.now)
                    if fleet_fix is not None:
                        out.append(fleet_fix)
                continue
            tracked = engine.runs.get(last.run)
            count = published.count(key)
            if tracked is None:
                continue
            total = tracked.transitions.get(key, 0)
            if total >= count:
                continue
            tracked.transitions[key] = count
            if total % 2 == count % 2:
                continue  # same state: firing iff odd
            fix = _restore(engine, key, count + 1, made.get(key), last)
            if fix is not None:
                tracked.transitions[key] = count + 1
                out.append(fix)
        return out, dead

    def _made(self, run: str, key: str, at_least: int) -> int:
        if run == FLEET_RUN and self.fleet is not None:
            return max(at_least, self.fleet.count(key))
        tracked = self.engine.runs.get(run)
        return max(at_least, tracked.transitions.get(key, 0) if tracked is not None else 0)

    # -- checkpoints -----------------------------------------------------------------------

    def dump_state(self) -> dict[str, Any]:
        """The driver's state as a checkpoint keeps it (`runwatch.stream.checkpoint`): the
        engine's, the hosts' clock offsets, the runs that left, the counters, the position,
        and while replaying what the re-read made so far (`finish_replay` sorts it out)."""
        return {
            "engine": self.engine.dump_state(),
            "clocks": self.clocks,
            "arrival": self.arrival,
            "reading": self.reading.dump(),
            "counts": (self.applied, self.invalid, self.failures, self.late, self.corrected),
            "gone": list(self.gone),
            "position": self.position,
            # a rebuild's checkpoint: what the re-read made and has not handed out yet, so
            # that a takeover of a half-rebuilt partition still publishes it (plain data)
            "held": [alert.to_json() for alert in self._held],
            "held_dead": [msgspec.structs.astuple(d) for d in self._held_dead],
            "fleet": self.fleet.state if self.fleet is not None else None,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Take over what `dump_state` gave (same rules config; the caller checks). Raises
        before it changes anything when the state does not fit."""
        clocks, arrival, position = state["clocks"], state["arrival"], state["position"]
        applied, invalid, failures, late, corrected = state["counts"]
        gone = OrderedDict.fromkeys(state["gone"])
        reading = ReadClock.load(state["reading"])
        held = [Alert.from_json(raw) for raw in state["held"]]
        held_dead = [Refused(*fields) for fields in state["held_dead"]]
        if not isinstance(clocks, ClockOffsets):
            raise TypeError(f"clocks is a {type(clocks).__name__}")
        fleet = state.get("fleet")
        if (fleet is None) != (self.fleet is None) or not isinstance(
            fleet, FleetState | None
        ):  # a worker's checkpoint for serve, or serve's for a worker
            raise TypeError("the checkpoint's fleet state does not fit this driver")
        self.engine.load_state(state["engine"])
        if self.fleet is not None and fleet is not None:
            self.fleet.load(fleet)
        self.clocks, self.arrival, self.position, self.gone = clocks, arrival, position, gone
        self.reading = reading
        self._held, self._held_dead = held, held_dead
        self.applied, self.invalid, self.failures, self.late, self.corrected = (
            applied, invalid, failures, late, corrected,
        )  # fmt: skip


def _restore(
    engine: Engine, key: str, number: int, made: list[Alert] | None, last: Alert
) -> Alert | None:
    """Transition `number` of `key`, in the engine's current state for it."""
    ident = transition_id(key, number)
    if number % 2 == 1:  # the engine has it firing
        return engine.restate(last.run, key, number)
    at = engine.time_of(last.rule)
    if made and not made[-1].firing:
        return msgspec.structs.replace(made[-1], id=ident, ts=at)
    # The engine does not hold it now: resolve the published firing.
    return msgspec.structs.replace(
        last, id=ident, ts=at, state="resolved", summary=f"resolved: {last.summary}"
    )
