"""`runwatch diagnose FILE...`: the timeline of a run, after the fact, from the logs it left.

What a person otherwise rebuilds by hand from a driver's `.err` and a vLLM `.out`: per step,
when it started and ended, when its rollout's trajectories were done, how long the last one
took alone (the straggler tail), and how long inference sat idle while trajectories waited
(the GPU-idle gap) -- then the alerts the rules raise on the same events.

Time comes from the lines themselves:
- a timestamp at the start of a line (after Ray's prefix): ISO, `2026-03-14 14:01:00,000`
  (Python logging's default; PRIME-RL's JSON logs), AReaL's `20260314-14:01:00.000`, or
  vLLM's `INFO 03-14 14:01:00` (month and day, in the year `--year` gives, else the first
  full timestamp's in any file, else this year), or a time of day alone, `14:01:00`
  (PRIME-RL's consoles: on the day `--date` gives, else the first full timestamp's, else the
  day the file was last written, moving to the next day when the clock goes back by more
  than 12 hours); read as UTC unless `--utc-offset`;
- a tqdm bar's elapsed field (`[03:53<...`): a bar's updates are placed at the time the bar
  started (the latest timestamp in its file when it showed n = 0) plus their elapsed time;
- any other line takes the latest time seen in its file.
The logs' end is not always when what they show ended: a log that ends inside a wait its
framework declared (Horovod's stall inspector, torch's store-based barrier, a dump of ranks in
a collective, vLLM's message queue while it serves) and that nothing after it ended ended in
its hang -- unless the log shows a failure: its processes died, they did not hang -- and time
runs on past it to where ranks_stalled or inference_stalled decides it
(`hang_window`). So does a log whose engine's own stats lines, to its last one, say it holds
requests and makes no tokens, once they show that lasting a minute by their own clock
(`stalls.Waits.stalled_engines`): the end of a file decides it as the end of `runwatch watch`'s
output does (`hangs.at_end`).
The lines are read with `runwatch watch`'s parsers (`runwatch.emitters.logparse`). When no
verl step line says where steps end, the "Training Progress" bar does: its advance to k ends
step k and starts step k + 1.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from runwatch.emitters.console import LineParser
from runwatch.emitters.encodings import AsUtf8
from runwatch.emitters.hangs import at_end, ended_in_hang
from runwatch.emitters.logparse import segments
from runwatch.emitters.prefixes import JOURNAL, time_places
from runwatch.emitters.wraps import unwrapped
from runwatch.stream.alerts import Alert
from runwatch.stream.config import RulesConfig
from runwatch.stream.decode import decode_obj
from runwatch.stream.engine import Engine
from runwatch.stream.exceptions import InvalidEvent
from runwatch.stream.state.run import RunState

#: how far into a line its time may begin (after a logger's or a launcher's prefix)
_START = 40
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?")
#: AReaL's `%Y%m%d-%H:%M:%S.mmm` (areal/utils/logging.py DATE_FORMAT, after its `(AReaL) `)
_COMPACT = re.compile(r"\b(\d{4})(\d{2})(\d{2})-(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")
_SHORT = re.compile(
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})"
)
_CLOCK = re.compile(r"^(?:\[[\w-]+\]:)?(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,6}))?\s")
#: glog's `[E419 10:42:28.858931807` (torch's C++ lines: month and day, no year)
_GLOG = re.compile(r"\[[EWIF](\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")
#: glog's own prefix, no bracket (google/glog src/logging.cc `LogMessage::Init`: the
#: severity's letter, the year where `FLAGS_log_year_in_prefix` (newer glog, default true),
#: then `mmdd hh:mm:ss.uuuuuu`, the thread id padded to 5, `file:line] `): `I1130 12:34:56.789012
#:  1234 file.cc:12] ` (Paddle's and Caffe's C++ lines)
_GLOG_PLAIN = re.compile(
    r"(?<![\w.:/-])[IWEF](\d{4})?(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})"
    r" +\S+ [^\s:\]]+:\d+\] "
)
#: Open MPI's `--timestamp-output`, ctime's `Tue May 20 21:16:06 2025`
_CTIME = re.compile(r"\b[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})")
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_ELAPSED = re.compile(r"\[(?:(\d+):)?(\d+):(\d{2})[<,\]]")
STEP_BARS = ("Training Progress",)
#: events of lines without a time are placed this far apart, in file order
UNTIMED_STEP = 0.001
#: lines that looked like metrics or failures and gave no event, said per file at most
NOTES = 20
#: what after a word of failure or of a hang makes it a name or a count, not a state: a piece
#: of an identifier or a file's name (`errors_total`, `failed-jobs`, `error.log`), a count of
#: none (`error=0`, `Failed requests: 0`, `Error: 0`), a heading (`Stuck:`), a C++ scope
#: or a call (`c10::Error::Error(...)`)
_NOT_A_STATE = r"(?![-_(]|\.\w|::|(?:\s+\w+)?\s*[=:|]\s*(?:0|none|null|false)\b|\s*:\s*$)"
#: a line that reads like an error that no reader placed and that no traceback follows: a note,
#: so a user can report it. A logger's ERROR, a process's death, a timeout or an OOM in words,
#: wherever they stand ...
_LOOKS_FAILED = re.compile(
    r"(?<![\w.])(?:ERROR|FATAL|CRITICAL)\b"
    r"|(?i:\b(?:died|killed|crashed|segmentation fault|segfault|core dumped|aborted"
    r"|fatal error|timed out|out of memory|unresponsive|not responding)\b)"
)
#: ... and weaker words, an exception's name or `error` and `failed` as a state, on a line no
#: logger marked as information or a warning (`_CALM`: NCCL's `INFO Failed to open
#: libibverbs.so`, c10d's `[W ...] The client socket has failed to connect`, retried); not a
#: constructor's call (`raise ValueError(msg)`)
_SAYS_FAILED = re.compile(
    r"(?:Error|Exception)\b(?!\s*[=(])"
    + _NOT_A_STATE
    + r"|(?i:\b(?:error|fail(?:s|ed|ure)?)\b)"
    + _NOT_A_STATE
)
#: a logger's level below an error in a line's head: its words (`INFO`, `WARNING`), glog's
#: letter and date (`W1203 10:00:00`, torch's `[W socket.cpp:601]`, `[W427 01:04:16 ...]`);
#: not NCCL's `WARN`, its logger's level for errors (debug.cc: INFO and WARN alone)
_CALM = re.compile(
    r"(?<![\w.])(?:INFO|DEBUG|TRACE|NOTICE|(?<!NCCL )WARN|WARNING)\b|(?<![\w.])\[?[IDW]\d{0,4} "
)
#: ... the words the branches of both hold, lower-cased: most lines hold none, and a substring
#: test of each is cheaper than the patterns' search
_FAILED_WORDS = ("error", "fatal", "critical", "died", "killed", "crash", "segmentation",
                 "segfault", "core dumped", "abort", "timed out", "out of memory",
                 "unresponsive", "not responding", "fail", "exception")  # fmt: skip
UNKNOWN_ERROR = (
    "reads like an error, but it is no traceback and no line of the catalogue "
    "(docs/catalogue.md): if it was a failure, report it with the console"
)
#: a line that reads like a hang or a wait on resources (`stuck`, a deadlock, a task that
#: `cannot be scheduled`, Ray's `1+ pending` demands) that no reader took for a wait: no
#: framework's wait the catalogue of waits declares, no wording the console's grammar of waits
#: knows; not one a program avoids (tokenizers' `Disabling parallelism to avoid deadlocks`)
_LOOKS_STALLED = re.compile(
    r"(?i)(?<!avoid )(?<!prevent )(?:\b(?:hangs?|hanging|hung|stuck|stall(?:s|ed|ing)?"
    r"|deadlock(?:s|ed)?|unschedulable|cannot be scheduled|not (?:yet )?ready|no available)"
    r"|\d\+ pending)\b" + _NOT_A_STATE
)
_STALLED_WORDS = ("hang", "hung", "stuck", "stall", "deadlock", "unschedulable",
                  "cannot be scheduled", "not ready", "not yet ready", "no available",
                  "+ pending")  # fmt: skip
#: a line's numbers (times, counts, and hex ids with them, which `wraps`' and `stalls`' digit
#: patterns do not fold): lines that differ only in them are one line repeated
_NUMBERS = re.compile(r"[0-9a-f]*\d[0-9a-f]*")
UNKNOWN_WAIT = (
    "reads like a hang or a wait on resources, but it is no wait the catalogue of waits "
    "(docs/catalogue.md) or the console's grammar of waits knows: if the job hung here, "
    "report it with the console"
)


def looks_like(body: str, took_for_a_wait: bool) -> str | None:
    """Why a line no reader placed may be worth a note (`UNKNOWN_ERROR`, `UNKNOWN_WAIT`), else
    None. An error in words outranks all; a hang's words on a line the waits reader took are
    its to explain (a wait too short says so at the console's end, `Waits.short_wait`)."""
    low = body.lower()
    if any(w in low for w in _FAILED_WORDS) and (
        _LOOKS_FAILED.search(body) is not None
        or (_SAYS_FAILED.search(body) is not None and _CALM.search(body, 0, 100) is None)
    ):
        return UNKNOWN_ERROR
    if took_for_a_wait or not any(w in low for w in _STALLED_WORDS):
        return None
    return UNKNOWN_WAIT if _LOOKS_STALLED.search(body) is not None else None


@dataclass
class Timed:
    """One event read from a log, at the time its line says."""

    ts: float
    kind: str
    fields: dict[str, Any]
    component: str
    where: str  # file:line
    #: the Ray worker the line came from (its pid, and its node's address), when one did
    origin: dict[str, Any] | None = None


@dataclass
class Bar:
    """A tqdm bar of one file: when it started, what it said last."""

    start: float | None
    n: int = -1


@dataclass
class StepRow:
    """One row of the timeline."""

    step: int
    started: float | None = None
    done: float | None = None
    rollout_done: float | None = None  # the rollout bar reached its total
    last_but_one: float | None = None  # ... and total - 1 (the straggler tail starts)
    rollout: tuple[int, int] | None = None  # the bar's last n, total within the step
    gap: float | None = None  # seconds inference was idle while trajectories waited

    @property
    def tail(self) -> float | None:
        if self.rollout_done is None or self.last_but_one is None:
            return None
        return self.rollout_done - self.last_but_one


@dataclass
class Diagnosis:
    events: list[Timed] = field(default_factory=list)
    steps: list[StepRow] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    first: float | None = None
    last: float | None = None
    unread: int = 0  # events the engine refused (reported on stderr)
    #: (file, events, where they end: its last write, or None when placed before its first
    #: time) for files with lines that carried no time of their own
    untimed: list[tuple[Path, int, float | None]] = field(default_factory=list)
    #: (file, events, its last time) for files with lines after their last time, placed
    #: just after it in file order
    after_last: list[tuple[Path, int, float]] = field(default_factory=list)
    #: (file:line, why, the line): lines that looked like metrics or failures and gave no
    #: event -- what a user can report when the logs raise nothing
    notes: list[tuple[str, str, str]] = field(default_factory=list)


def _first_date(paths: Sequence[Path]) -> date | None:
    """The date of the first full timestamp in the files (their first MB each)."""
    for path in paths:
        with path.open("rb") as f:
            text = AsUtf8()  # (a UTF-16 file's dates, as its lines are read)
            raw = f.read(1 << 20)
            head = (text.feed(raw) + text.feed(b"", final=True)).decode("utf-8", "replace")
        m = _ISO.search(head) or _COMPACT.search(head)
        if m is not None:
            try:
                return date(*(int(x) for x in m.groups()[:3]))
            except ValueError:
                continue
    return None


def time_of_day(line: str) -> float | None:
    """The `HH:MM:SS` a line starts with when it carries no date (PRIME-RL's loguru
    consoles, after torchrun's `[trainer0]:`), in seconds since midnight; None if none."""
    m = _CLOCK.match(line[:40])
    if m is None:
        return None
    h, mi, sec = (int(x) for x in m.groups()[:3])
    if h > 23 or mi > 59 or sec > 60:
        return None
    return h * 3600 + mi * 60 + sec + (float(f"0.{m.group(4)}") if m.group(4) else 0.0)


def stamp(line: str, year: int, offset: float) -> float | None:
    """The time a log line carries at its start, in seconds since the epoch; None if none."""
    # (one whole within the first 40 characters -- a date in the message after a logger's own
    # time is not the line's -- then read on past them: a prefix before it, a pod's name, must
    # not cut its fraction off)
    m = _ISO.search(line[:_START]) or _COMPACT.search(line[:_START])
    if m is not None and (m := m.re.match(line, m.start())) is not None:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float(f"0.{m.group(7)}") if m.group(7) else 0.0
    elif (m := _SHORT.match(line[:64])) is not None:
        y = year
        mo, d, h, mi, s = (int(x) for x in m.groups())
        frac = 0.0
    elif (m := _CTIME.search(line[:60])) is not None and m.group(1) in _MONTHS:
        mo, (d, h, mi, s, y) = _MONTHS[m.group(1)], (int(x) for x in m.groups()[1:])
        frac = 0.0
    elif (m := JOURNAL.match(line)) is not None and m.group(1) in _MONTHS:
        y, mo = year, _MONTHS[m.group(1)]
        d, h, mi, s = (int(x) for x in m.groups()[1:])
        frac = 0.0
    elif (m := _GLOG.search(line[:60])) is not None:
        y = year
        mo, d, h, mi, s = (int(x) for x in m.groups()[:5])
        frac = float(f"0.{m.group(6)}") if m.group(6) else 0.0
    elif (m := _GLOG_PLAIN.search(line[:120])) is not None:
        y = int(m.group(1)) if m.group(1) else year
        mo, d, h, mi, s = (int(x) for x in m.groups()[1:6])
        frac = float(f"0.{m.group(7)}")
    else:
        return None
    try:
        when = datetime(y, mo, d, h, mi, s, tzinfo=UTC).timestamp()
    except ValueError:
        return None
    return when + frac - offset


def elapsed(line: str) -> float | None:
    """A tqdm bar's elapsed time, seconds."""
    m = _ELAPSED.search(line)
    if m is None:
        return None
    hours, minutes, seconds = (int(x) if x else 0 for x in m.groups())
    return hours * 3600 + minutes * 60 + seconds


class Days:
    """The day a line's time of day falls on: the day of the last full timestamp, else the
    first day given; a later time of day more than 12 hours before the last one is the next
    day. Local time, the logs' own clock."""

    def __init__(self, first: date) -> None:
        self.midnight = datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp()
        self.last: float | None = None  # the last time of day seen

    def saw(self, local: float) -> None:
        """A full timestamp (local seconds since the epoch)."""
        self.midnight = local - local % 86400
        self.last = local % 86400

    def place(self, seconds: float) -> float:
        """A time of day, as local seconds since the epoch."""
        if self.last is not None and seconds < self.last - 43200:
            self.midnight += 86400
        self.last = seconds
        return self.midnight + seconds


Lines = Callable[[Path], Iterable[tuple[int, bytes]]]


def file_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of a file's lines, read as they come, not the whole file at once."""
    with path.open("rb") as f:
        yield from enumerate(f, 1)


@dataclass
class FileRead:
    """What one file gave: its events, the latest time it shows (a last line may say when
    the run was stopped), and how many events carried no time of their own."""

    events: list[Timed]
    latest: float
    untimed: int = 0
    placed_at: float | None = None  # untimed events before any time: they end here
    #: events of lines after the file's last time, placed just after it in file order
    after_last: int = 0
    last_time: float | None = None  # the last time the file's lines say
    #: (file:line, why, the line) of lines that looked like metrics or failures and gave
    #: no event (the first `NOTES` of them)
    notes: list[tuple[str, str, str]] = field(default_factory=list)
    #: the file ended inside a wait its framework declared (`stalls.Waits.hung_since`): when
    #: its ranks last changed phase; None too when the file shows a failure (`hangs.FAILED`)
    hung_since: float | None = None
    #: ... or inside an engine's own (`stalls.Waits.engine_hung_since`): when it began
    engine_hung_since: float | None = None


def read(
    path: Path, parser: LineParser, year: int, offset: float, day: date,
    lines: Lines = file_lines,
) -> FileRead:  # fmt: skip
    """The events of one log file, each at the time its line says (module docstring). Events
    of lines before the file says any time wait for the first time it says, and are placed
    just before it, in order (1 ms apart); in a file that never says one, they end at the
    time the file was last written. Events of lines after the file's last time -- and what
    the end of the file decides (a traceback that was its process's last word) -- belong to
    the file's end: they are placed after that time, in order, 1 ms apart (a step line and
    the traceback after it are not simultaneous)."""
    out: list[Timed] = []
    latest = float("-inf")
    now: float | None = None
    bars: dict[str, Bar] = {}
    days = Days(day)
    waiting: list[tuple[str, dict[str, Any], str]] = []  # events before any time, in order
    untimed = 0
    trailing: list[int] = []  # events (indexes in `out`) of lines since the last time
    parts = (
        (number, part)
        for number, line in unwrapped(  # (a paste's hard wraps joined again)
            (number, line.decode("utf-8", "replace").rstrip("\r\n")) for number, line in lines(path)
        )
        for part in segments(line)
    )

    def place(kind: str, fields: dict[str, Any], at: float, where: str) -> None:
        nonlocal latest
        src = fields.pop("src", None)
        hint = fields.pop("component", None)
        component = (
            (src or {}).get("component")
            or hint
            or ("inference" if kind == "inference.stats" else "trainer")
        )
        origin = {k: src[k] for k in ("pid", "host") if k in src} if src else None
        if "waited" in fields:
            parser.waits.since(fields, at)  # the wait a line shows, from the line's time
        out.append(Timed(at, kind, fields, component, where, origin))
        latest = max(latest, at)

    def settle(first: float) -> None:
        for k, (kind, fields, where) in enumerate(waiting):
            place(kind, fields, first - UNTIMED_STEP * (len(waiting) - k), where)
        waiting.clear()

    number = 0
    notes: list[tuple[str, str, str]] = []
    suspect: tuple[str, str, str] | None = None  # a line like an error no reader placed
    suspect_words = ""  # ... its words without numbers
    suspected: set[str] = set()  # ... those noted: a repeat is noted once
    for number, raw in parts:
        body, found = parser.read(raw)
        said = parser.notes()
        for why in said:
            if len(notes) < NOTES:
                notes.append((f"{path.name}:{number}", why, body.strip()[:200]))
        failures = parser.failures  # (a traceback read, a death held pending, a reader's line)
        explained = found or said or failures.reading or failures.took
        if suspect is not None and not explained and len(notes) < NOTES:
            notes.append(suspect)
            suspected.add(suspect_words)
        suspect = None
        if (
            not explained
            and len(notes) < NOTES  # (else no room: no pattern runs)
            and (looks := looks_like(body, parser.waits.took)) is not None
        ):
            words = _NUMBERS.sub("N", body.strip())
            if words not in suspected:
                suspect, suspect_words = (f"{path.name}:{number}", looks, body.strip()[:200]), words
        ts = None
        for text in time_places(body):
            if (ts := stamp(text, year, offset)) is not None:
                days.saw(ts + offset)
                break
            if (seconds := time_of_day(text)) is not None:
                ts = days.place(seconds) - offset
                break
        if ts is not None:
            if now is None:
                settle(ts)
            now = ts
            latest = max(latest, ts)
            trailing.clear()
        for kind, fields in found:
            at = now
            if kind == "progress":
                bar = bars.setdefault(fields["name"], Bar(now))
                if fields["n"] < bar.n or bar.start is None:  # a new bar of the same name
                    bar.start = now
                bar.n = fields["n"]
                spent = elapsed(body)
                if bar.start is not None and spent is not None:
                    at = bar.start + spent
            where = f"{path.name}:{number}"
            if at is None:
                waiting.append((kind, fields, where))  # no time yet: placed when one comes
                untimed += 1
            else:
                if ts is None and at == now:
                    trailing.append(len(out))
                place(kind, fields, at, where)
    last_words = parser.finish()
    read_kinds = [e.kind for e in out] + [kind for kind, _, _ in waiting]
    last_words += at_end(parser, read_kinds + [kind for kind, _ in last_words])
    if suspect is not None and not last_words and len(notes) < NOTES:
        notes.append(suspect)  # (what the end decides may be its failure: then no note)
    for kind, fields in last_words:
        if now is None:
            waiting.append((kind, fields, f"{path.name}:{number}"))
            untimed += 1
        else:
            trailing.append(len(out))
            place(kind, fields, now, f"{path.name}:{number}")
    if now is not None:  # the lines after the last time: the file's end, in their order
        for k, index in enumerate(trailing, 1):
            out[index].ts = now + UNTIMED_STEP * k
        if trailing:
            latest = max(latest, now + UNTIMED_STEP * len(trailing))
    placed_at = None
    if waiting:  # the file never said a time: its last write is when it ended
        placed_at = path.stat().st_mtime
        settle(placed_at + UNTIMED_STEP)
    for why in parser.notes():
        if len(notes) < NOTES:
            notes.append((f"{path.name}:{number}", why, ""))
    after = len(trailing) if now is not None else 0
    hung = ended_in_hang(parser.waits, (e.kind for e in out))  # (none if it shows a failure)
    return FileRead(out, latest, untimed, placed_at, after, now, notes, hung.ranks_since,
                    hung.engine_since)  # fmt: skip


def step_events(events: list[Timed], bars: Sequence[str] = STEP_BARS) -> list[Timed]:
    """step.started / step.done from the training bar, when no line said where steps end."""
    if any(e.kind == "step.done" for e in events):
        return []
    out: list[Timed] = []
    last = -1
    for e in sorted(events, key=lambda e: e.ts):
        if e.kind != "progress" or e.fields["name"] not in bars:
            continue
        n = e.fields["n"]
        if n > last >= 0:
            for k in range(last + 1, n + 1):
                out.append(Timed(e.ts, "step.done", {"step": k}, "trainer", e.where))
            out.append(Timed(e.ts, "step.started", {"step": n + 1}, "trainer", e.where))
        elif last < 0:
            out.append(Timed(e.ts, "step.started", {"step": n + 1}, "trainer", e.where))
        last = max(last, n)
    return out


def diagnose(
    paths: Sequence[Path],
    *,
    run: str = "diagnose",
    config: RulesConfig | None = None,
    year: int | None = None,
    day: date | None = None,
    offset: float = 0.0,
    on_refused: Any = None,
    lines: Lines = file_lines,
) -> Diagnosis:
    """Read the files, place their events in time, replay them through the rules. `year`
    and `day` are those of timestamps without one (module docstring); `lines` reads a file
    (the command's shows progress at a terminal)."""
    first = _first_date(paths)
    year = year or (first.year if first else None) or time.gmtime().tm_year
    events: list[Timed] = []
    end = float("-inf")
    hung: float | None = None  # the latest start of a declared wait a file ended in
    engine_hung: float | None = None  # ... of an engine's
    untimed: list[tuple[Path, int, float | None]] = []
    after_last: list[tuple[Path, int, float]] = []
    notes: list[tuple[str, str, str]] = []
    for path in paths:
        written = datetime.fromtimestamp(path.stat().st_mtime + offset, UTC).date()
        got = read(path, LineParser(), year, offset, day or first or written, lines)
        events += got.events
        end = max(end, got.latest)
        if got.untimed:
            untimed.append((path, got.untimed, got.placed_at))
        if got.after_last and got.last_time is not None:
            after_last.append((path, got.after_last, got.last_time))
        notes += got.notes
        if got.hung_since is not None:
            hung = max(hung or got.hung_since, got.hung_since)
        if got.engine_hung_since is not None:
            engine_hung = max(engine_hung or got.engine_hung_since, got.engine_hung_since)
    events += step_events(events)
    events.sort(key=lambda e: e.ts)
    result = Diagnosis(events=events, untimed=untimed, after_last=after_last, notes=notes)
    if not events:
        return result
    result.first, result.last = events[0].ts, max(end, events[-1].ts)
    engine = Engine(config or RulesConfig.default())
    rows: dict[int, StepRow] = {}
    for i, e in enumerate(events):
        src = {"component": e.component, "host": e.where.split(":")[0], **(e.origin or {})}
        obj = {"v": 1, "id": f"{run}-{i}", "ts": e.ts, "run": run, "kind": e.kind, "src": src,
               **e.fields}  # fmt: skip
        try:
            result.alerts += engine.apply(decode_obj(obj))
        except InvalidEvent as err:
            result.unread += 1
            if on_refused is not None:
                on_refused(e.where, err.reason)
            continue
        _timeline(rows, e, engine.runs[run].state)
    # what held at the end of the logs fires; rules that gather what several processes say
    # (collective_timeout's `settle`) get their window after it, and a wait the logs end in
    # runs on to where ranks_stalled or inference_stalled decides it (`hang_window`)
    until = result.last + gather_window(engine.config)
    rules = engine.config
    ranks = hang_window(rules, "ranks_stalled", "timeout", hung)
    engines = hang_window(rules, "inference_stalled", "stalled_for", engine_hung)
    result.alerts += engine.advance(max(until, ranks, engines))
    state = engine.runs[run].state if run in engine.runs else None
    result.steps = [rows[k] for k in sorted(rows)]
    inference_seen = any(e.kind == "inference.stats" for e in events)
    for row in result.steps:
        if state is not None and row.done is None:
            row.gap = open_gap(state, row, result.last)
        if not inference_seen:
            row.gap = None  # no log said what inference did: unknown, not "never idle"
    return result


def gather_window(config: RulesConfig) -> float:
    """How long past the end of the logs time runs: collective_timeout's `settle`, so the
    ranks' timeouts at the very end are reported (they are all in the logs already)."""
    rule = config.by_id().get("collective_timeout")
    settle = getattr(rule.params, "settle", 0.0) if rule is not None else 0.0
    return float(settle)


def hang_window(config: RulesConfig, rule_id: str, param: str, hung: float | None) -> float:
    """Where time runs to when a log ends inside a wait its framework declared (Horovod's
    stall inspector, torch's store-based barrier, a stack dump of ranks in a collective; vLLM's
    message queue while it serves: `stalls.Waits`) that nothing after it ended -- no
    progress, no barrier's completion, no failure: the job hung there, for a job that went on
    would have printed the wait's end. The log cannot say for how long it hung after its last
    line, and it says it never stopped hanging: time runs to just past where the rule's limit
    (`param` of `rule_id`: ranks_stalled's `timeout`, inference_stalled's `stalled_for`) after
    the wait began (`hung`) ends, and the rule decides. -inf when no log ended so."""
    rule = config.by_id().get(rule_id)
    if hung is None or rule is None:
        return float("-inf")
    return hung + float(getattr(rule.params, param, 0.0)) + UNTIMED_STEP


def _timeline(rows: dict[int, StepRow], e: Timed, state: Any) -> None:
    if e.kind == "step.started":
        rows.setdefault(e.fields["step"], StepRow(e.fields["step"])).started = e.ts
    elif e.kind == "step.done":
        number = e.fields["step"]
        row = rows.setdefault(number, StepRow(number))
        row.done = e.ts
        step = state.steps.by_number.get(number)
        row.gap = step.gap if step is not None else None
    elif e.kind == "progress" and e.fields["name"] not in STEP_BARS and rows:
        row = rows[max(rows)]  # the step under way
        n, total = e.fields["n"], e.fields.get("total")
        row.rollout = (n, total) if total else row.rollout
        if total and n == total - 1:
            row.last_but_one = e.ts
        if total and n == total:
            row.rollout_done = e.ts


def open_gap(state: RunState, row: StepRow, end: float) -> float | None:
    """The idle gap of a step still under way at the end of the logs."""
    since = state.inference.idle_since
    if row.done is not None or since is None:
        return row.gap
    return (row.gap or 0.0) + end - max(since, row.started or since)


def clock(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%H:%M:%S", time.gmtime(ts))


def minutes(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 60:.0f}m" if seconds >= 60 else f"{seconds:.0f}s"


def table(rows: Iterable[StepRow], end: float) -> list[str]:
    """The timeline as text lines, one per step."""
    out = [f"{'step':>5}  {'started':>8}  {'rollout done':>12}  {'last traj alone':>15}  "
           f"{'GPU idle, work waiting':>22}  {'step done':>9}  {'took':>5}"]  # fmt: skip
    for r in rows:
        took = (r.done or end) - r.started if r.started is not None else None
        rollout = clock(r.rollout_done)
        if r.rollout_done is None and r.rollout is not None:
            rollout = f"{r.rollout[0]}/{r.rollout[1]}"
        tail = minutes(r.tail)
        if r.tail is None and r.last_but_one is not None:
            tail = f"{minutes(end - r.last_but_one)}+"
        done = clock(r.done) if r.done is not None else "running"
        out.append(f"{r.step:>5}  {clock(r.started):>8}  {rollout:>12}  {tail:>15}  "
                   f"{minutes(r.gap):>22}  {done:>9}  {minutes(took):>5}")  # fmt: skip
    return out
