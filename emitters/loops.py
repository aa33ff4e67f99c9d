"""A console that ends inside a loop: hung, whatever words the loop uses.

A job that waits on something that never comes -- a peer that never connects, a resource no
node frees, a server that never answers -- very often says so the same way again and again
until someone stops it: a retry loop, a poll, a status table printed anew, a "still waiting".
Each framework words it its own way (`stalls.Waits` reads the wordings it knows), but the
shape is one: the console's last lines are the same lines over and over, their numbers aside.

A line's shape (`shape`) is its words with its numbers taken out and sorted by what they
are: the clock it prints (its time of day, or Ray's `(autoscaler +4m44s)`), durations
(`5s`, `2m17s`, `120 seconds`), ids (hex, addresses, ports, pids), an attempt's counter
(`retry 5/288`, `attempt 3 of 10`, `(try=2)`), and any other number, a value. The console's
tail ends inside a loop (`loop_at_end`) when its last lines are whole repeats of one cycle of
shapes (a line, or a block of lines: a status table), and in none of them did a value change
-- a changed value (a step, a loss, a count of shards loaded, a countdown's second) is
progress, whatever the words; a clock, a duration, an id or an attempt's counter changing is
not. The loop is a hang once the console shows it lasting a minute (`stalls.GENERIC_LASTED`):
by the clock its lines print, from its first line to its last, or by the wait its words state
(`taking more than 60 seconds`, `for 120 s`, `has not ... in the last 60 s`, a growing elapsed
duration), or -- where they print no clock -- said `stalls.GENERIC_UNTIMED` times (repeats, or
an attempt's counter that far) by lines whose words say a wait (`stalls`' grammar of wait
verbs) or an attempt. A loop of lines whose words say neither needs the clock.

Loops that are healthy stay silent (`healthy`): lines another reader took (an engine's stats,
a metric line, a bar: `LineParser` knows their shapes; an idle engine's stats repeat
unchanged), a server answering requests (an access log's `"GET /health HTTP/1.1" 200`), a
server or worker idle for its next request or job (the grammar's `_NO_STALL` words), a
keep-alive or health check that succeeds, a cluster with no demand waiting (Ray's status
block's `(no resource demands)`), and a countdown (a duration that shrinks ends by itself).

`runwatch diagnose` and `runwatch watch` decide it on the same lines, the console's last ones
(`Tail`): diagnose when a file ends, watch when the output ends or goes quiet.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from runwatch.emitters.logparse import ray_origin
from runwatch.emitters.prefixes import launcher_prefix, strip_colour
from runwatch.emitters.stalls import (
    _WAIT_VERB,
    ELAPSED,
    GENERIC_LASTED,
    GENERIC_UNTIMED,
    MARKERS,
    _lasted,
    _seconds,
)
from runwatch.emitters.waits import DECLARED

#: the console's last lines kept for the decision (a status table of Tune's is ~30 lines; a
#: loop is judged on at most this many)
TAIL_LINES = 240
#: the bytes of output kept for them
TAIL_BYTES = 1 << 16
#: a person's stop: `^C` as a terminal echoes it (before a traceback's head, or alone)
_CTRL_C = re.compile(r"^\s*(?:\^C)+\s*$")
#: the longest KeyboardInterrupt traceback looked back over
_STOP_LINES = 80
#: a loop whose words say no wait is one on a timer: this many cycles at least, by the clock
REGULAR_CYCLES = 4
#: the longest cycle looked for, in lines
MAX_PERIOD = 60
#: the bytes of a line looked at (a line longer is cut: a dump of a tensor is no loop's line)
_LINE_MAX = 2000

_UNIT = r"(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?)"
#: the pieces of a line, in the order they are tried at each place (`_TOKEN`'s groups)
_TOKEN = re.compile(
    # a clock: an ISO date and time, or a time of day, or Ray's job clock
    r"(?P<date>\d{4}-\d{2}-\d{2}[ T])?(?P<clock>(?<![\d:.])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?)"
    r"(?![\d:])"
    r"|\((?:autoscaler|scheduler) \+(?P<job>(?:\d+h)?(?:\d+m)?\d+s)\)"
    # an attempt's counter, after its word: `retry 5/288`, `attempt 3 of 10`, `(try=2)`
    r"|(?i:(?P<aword>\b(?:retry|retries|retrying|attempt|attempts|try|tries)"
    r"(?:\s*(?:#|no\.?|number|=|:))?\s*)(?P<attempt>\d+)(?:\s*(?:/|of)\s*\d+)?)\b"
    r"|(?i:(?P<ordinal>\b\d+)(?:st|nd|rd|th)? (?:attempt|retry|try)\b)"
    # ids: hex, uuids, addresses and ports, pids
    r"|(?P<id>\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|(?i:pid[=: ]\s*|process\(|port[=: ]\s*|(?:localhost|\]|\w[\w-]*\.[\w.-]+):)\d{2,7}\b)"
    # a duration: `5s`, `2m17s`, `120 seconds`, `0:01:23` is a clock above
    rf"|(?P<dur>(?<![\w.])\d+(?:\.\d+)?\s*{_UNIT}\b(?:\s*\d+(?:\.\d+)?\s*{_UNIT}\b)*)"
    # the clock as seconds since the epoch (2014-2033: a JSON log's `created`, absl's)
    r"|(?P<epoch>(?<![\w.])1[4-9]\d{8}(?:\.\d+)?(?![\w.]))"
    # a gauge: a size, a share (`5.1/15.5 GiB`, `0.4%`): memory in use drifts, no progress
    r"|(?P<gauge>(?<![\w.])\d+(?:\.\d+)?(?:/\d+(?:\.\d+)?)?\s?(?:[KMGTP]i?B|B|%)(?!\w))"
    # any other number: a value
    r"|(?P<num>(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
)
_JOB = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(\d+)s")
_DUR_PART = re.compile(rf"(\d+(?:\.\d+)?)\s*({_UNIT})\b", re.IGNORECASE)
#: a server answering a request: an access log's line (uvicorn's and nginx's `"GET /health
#: HTTP/1.1" 200`, Ray Serve's `GET /-/healthz 200 1.2ms`)
_ANSWERED = re.compile(
    r'\b(?:GET|POST|PUT|HEAD|DELETE|PATCH|OPTIONS) /\S*(?: HTTP/[\d.]+)?"? [1-5]\d\d\b'
)
#: a pulse that says all is well: a health check, a keep-alive, a heartbeat, a ping -- not one
#: that failed or was missed
_PULSE = re.compile(r"(?i)health|keep-?alive|heartbeat|\bping\b|\bpong\b")
_PULSE_BAD = re.compile(r"(?i)fail|error|miss|timed? ?out|unhealthy|lost|refused|no response")
#: an idle cluster: Ray's autoscaler status block with nothing asked for
#: (python/ray/autoscaler/_private/util.py `format_info_string`: "(no resource demands)")
_NO_DEMAND = re.compile(r"\(no resource demands\)")
#: words that say a line is an attempt or a thing not yet there (a loop of them needs no wait
#: verb): a retry, a connection refused, a request pending, infeasible or not schedulable
_ATTEMPT_WORDS = re.compile(
    r"(?i)\b(?:retr(?:y|ies|ying)|attempt|re-?connect(?:ing)?|trying|pending|infeasible"
    r"|unavailable|unreachable|not (?:yet )?(?:ready|available|reachable|connected)"
    r"|(?:failed|unable|could not|cannot|can't) to connect|connection refused"
    r"|cannot (?:currently )?be scheduled|no nodes? (?:satisfy|available|can))\b"
)


@dataclass(frozen=True)
class Shape:
    """A line's words without its numbers, and its numbers by what they are."""

    words: str  # the line with each number replaced by its kind's mark
    values: tuple[str, ...]  # the numbers that are values: one changing is progress
    gauges: tuple[str, ...]  # sizes and shares: one changing is progress in a loop of no wait
    durations: tuple[float, ...]  # the durations it says, in seconds
    attempts: tuple[int, ...]  # its attempt counters
    clock: float | None  # the seconds of the day (of the job, Ray's) it prints, first one
    rank: int | None  # the rank its launcher's prefix names
    body: str  # the line without prefixes


def _duration(text: str) -> float:
    total = 0.0
    for n, unit in _DUR_PART.findall(text):
        u = unit.lower()
        scale = (0.001 if u == "ms" or u.startswith("milli") else 60.0 if u[0] == "m"
                 else 3600.0 if u[0] == "h" else 1.0)  # fmt: skip
        total += float(n) * scale
    return total


def shape(line: str) -> Shape:
    """A line's shape (module docstring)."""
    line = strip_colour(line[:_LINE_MAX]).rstrip()
    _, body = ray_origin(line) if line.startswith("(") or "pid=" in line[:6] else (None, line)
    body, rank = launcher_prefix(body)
    words: list[str] = []
    values: list[str] = []
    gauges: list[str] = []
    durations: list[float] = []
    attempts: list[int] = []
    clock: float | None = None
    at = 0
    for m in _TOKEN.finditer(body):
        words.append(body[at : m.start()])
        at = m.end()
        kind = m.lastgroup
        if m.group("clock") is not None:
            if clock is None:
                h, mi, s = m.group("clock").replace(",", ".").split(":")
                clock = int(h) * 3600.0 + int(mi) * 60.0 + float(s)
            words.append("<t>")
        elif m.group("job") is not None:
            if clock is None:
                h, mi, s = (int(x or 0) for x in _JOB.fullmatch(m.group("job")).groups())  # type: ignore[union-attr]
                clock = h * 3600.0 + mi * 60.0 + s
            words.append("<t>")
        elif m.group("epoch") is not None and clock is None:  # (after a clock: a count)
            clock = float(m.group("epoch")) % 86400.0
            words.append("<t>")
        elif m.group("epoch") is not None:
            values.append(m.group("epoch"))
            words.append("#")
        elif m.group("attempt") is not None:
            attempts.append(int(m.group("attempt")))
            words.append(m.group("aword").strip().lower() + " <n>")
        elif m.group("ordinal") is not None:
            attempts.append(int(m.group("ordinal")))
            words.append("<n>")
        elif kind == "id":
            words.append("<id>")
        elif kind == "gauge":
            gauges.append(m.group("gauge"))
            words.append("<g>")
        elif kind == "dur":
            durations.append(_duration(m.group("dur")))
            words.append("<d>")
        else:
            values.append(m.group("num"))
            words.append("#")
    words.append(body[at:])
    text = " ".join("".join(words).split())
    return Shape(
        text, tuple(values), tuple(gauges), tuple(durations), tuple(attempts), clock, rank, body
    )


@dataclass(frozen=True)
class Loop:
    """The loop a console ends inside: its lines, its cycle's length, how long it shows."""

    lines: int
    period: int
    waited: float  # the seconds the console shows it lasting
    phase: str  # its words (the shape of its cycle's first line that says most)
    rank: int | None


class Tail:
    """The console's last bytes, kept as they come (the chunks themselves: no copy, nothing
    decoded until a loop is looked for) -- enough for `TAIL_LINES` lines of common length."""

    def __init__(self, keep: int = TAIL_BYTES) -> None:
        self.keep = keep
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._dropped = False  # earlier bytes were let go: the first line kept may be cut

    def feed(self, data: bytes) -> None:
        """More output (a chunk, or a line with its break)."""
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= self.keep:
            self._size -= len(self._chunks.popleft())
            self._dropped = True

    def add(self, line: str) -> None:
        """One more line (without its break)."""
        self.feed(line.encode("utf-8", "replace") + b"\n")

    def lines(self) -> list[str]:
        """The last `TAIL_LINES` whole lines kept (the first, perhaps cut, left out when
        earlier bytes were let go)."""
        data = b"".join(self._chunks)
        if self._dropped:
            data = data[data.find(b"\n") + 1 :]
        return data.decode("utf-8", "replace").split("\n")[-TAIL_LINES:]


def _kept(lines: Iterable[str]) -> list[str]:
    """The lines a loop is judged on: not blank, not a paste's `...`; a line tqdm rewrote is
    its last refresh."""
    out = []
    for line in lines:
        line = line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line
        text = line.strip()
        if not text or text.strip(".…[] ") == "":
            continue
        out.append(line)
    return out


def _unstopped(lines: list[str]) -> list[str]:
    """The lines without a person's stop after them: `^C`, and the KeyboardInterrupt
    tracebacks Python prints for it (a stop, no failure; one a process) -- someone gave up
    waiting on the loop before them."""
    end = len(lines)
    while end:
        if _CTRL_C.match(lines[end - 1]):
            end -= 1
            continue
        if not lines[end - 1].strip().startswith("KeyboardInterrupt"):
            break
        head = next((k for k in range(end - 1, max(end - _STOP_LINES, 0) - 1, -1)
                     if "Traceback (most recent call last)" in lines[k]), None)  # fmt: skip
        if head is None or lines[head].split("Traceback", 1)[0].strip("^C \t"):
            break  # (a line's text before the head: not a stop's own)
        end = head
    return lines[:end]


class _Shapes:
    """The lines' shapes, each made when first asked for: a tail that is no loop is seldom
    read further back than its longest cycle."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._made: dict[int, Shape] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i: int) -> Shape:
        if (made := self._made.get(i)) is None:
            made = self._made[i] = shape(self.lines[i])
        return made

    def last(self, count: int) -> list[Shape]:
        n = len(self.lines)
        return [self[i] for i in range(n - count, n)]


def _period(shapes: _Shapes) -> tuple[int, int]:
    """(the cycle's length, how many of the last lines repeat it) for the longest run of the
    console's last lines that repeats one cycle; (0, 0) for none."""
    n = len(shapes)
    best = (0, 0)
    last = shapes[n - 1].words
    for p in range(1, min(MAX_PERIOD, n // 2) + 1):
        if shapes[n - 1 - p].words != last:
            continue
        i = n - 1
        while i - p >= 0 and shapes[i].words == shapes[i - p].words:
            i -= 1
        length = n - 1 - i + p  # the lines from the loop's first to the last
        if length >= 2 * p and length > best[1]:
            best = (p, length)
        if best[1] >= n - 1:
            break
    return best


def _changed(shapes: Sequence[Shape], period: int, worded: bool) -> bool:
    """Whether a value changed between repeats of the cycle (progress), or a duration counts
    down (it ends by itself); in a loop whose words say no wait, a gauge too (an idle
    process's memory drifting is all there is to tell it from a stuck one's)."""
    for i in range(period, len(shapes)):
        a, b = shapes[i - period], shapes[i]
        if a.values != b.values or (not worded and a.gauges != b.gauges):
            return True
    return any(_counts_down([s.durations for s in shapes[j::period]]) for j in range(period))


def _counts_down(said: list[tuple[float, ...]]) -> bool:
    """Whether a line's duration shrinks at every repeat, three at least (Triton's shutdown,
    `exiting in 30s, 29s, ...`) -- not a retry's interval drawn at random (`retrying in 3.2s`,
    then `4.9s`, then `1.7s`: a backoff's jitter), which goes up as often."""
    if len(said) < 3 or not all(said):
        return False
    return any(
        all(b[k] < a[k] for a, b in itertools.pairwise(said) if len(a) > k and len(b) > k)
        for k in range(len(said[0]))
    )


def _healthy(shapes: Sequence[Shape], taken: set[str]) -> bool:
    """Whether a cycle is a healthy loop's (module docstring)."""
    for s in shapes:
        if s.words in taken or _ANSWERED.search(s.body) or _NO_DEMAND.search(s.body):
            return True
        if _PULSE.search(s.body) and not _PULSE_BAD.search(s.body):
            return True
        if _WAIT_VERB.search(s.body) is not None and _IDLE.search(s.body) is not None:
            return True  # (waiting for its next request, job, task: idle)
    return False


#: a server or worker idle for its next piece of work (`stalls._NO_STALL`'s words), an
#: evaluator for the trainer's next checkpoint (TensorFlow's `checkpoints_iterator`: "Waiting
#: for new checkpoint at ...")
_IDLE = re.compile(
    r"(?i)\b(?:for|on) (?:the |a )?(?:(?:new |next |incoming |more )?"
    r"(?:requests?|work|jobs?|tasks?|connections?|clients?|input|messages?|commands?)"
    r"|(?:new|next|a newer) checkpoints?)\b"
)


def _says_wait(s: Shape) -> bool:
    return _WAIT_VERB.search(s.body) is not None or _ATTEMPT_WORDS.search(s.body) is not None


def _framework(s: Shape) -> bool:
    """Whether a framework's own reader decides the line's wait (`stalls.MARKERS`: vLLM's
    queue, Horovod's inspector, ...): its judgement stands -- vLLM's queue at start-up is a
    compilation, no hang."""
    return any(m in s.body for m in MARKERS)


def _needed(cycle: Sequence[Shape]) -> float:
    """How long a loop must be shown lasting: a minute, or as long as the declared waits'
    catalogue says a wait of its lines must (`lasted`: the raylet's worker timing out once is
    a slow worker)."""
    declared = (DECLARED.match(s.body) for s in cycle)
    return max([GENERIC_LASTED] + [hit[0].lasted for hit in declared if hit is not None])


def _regular(starts: Sequence[float]) -> bool:
    """Whether a cycle's starts (by the clock) come on a timer: `REGULAR_CYCLES` of them at
    least, every interval within a quarter (or two seconds) of their median -- a poll or a
    retry's period, not work's own pace (a warning each time a step goes wrong)."""
    if len(starts) < REGULAR_CYCLES:
        return False
    gaps = sorted((b - a) % 86400.0 for a, b in itertools.pairwise(starts))
    median = gaps[len(gaps) // 2]
    slack = max(2.0, median / 4)
    return median > 0 and all(abs(g - median) <= slack for g in gaps)


def loop_at_end(lines: Iterable[str], taken: Iterable[str] = ()) -> Loop | None:
    """The loop the lines (a console's last ones) end inside, once they show it lasting a
    minute (module docstring); None where they end in none, or in a healthy one, or in one a
    framework's reader decides. `taken`: lines another reader read (an
    engine's stats, a metric line)."""
    kept = _unstopped(_kept(lines))
    if len(kept) < 2:
        return None
    shapes = _Shapes(kept)
    period, length = _period(shapes)
    if not period:
        return None
    loop = shapes.last(length)
    cycle = loop[-period:]
    worded = [s for s in cycle if _says_wait(s)]
    if _changed(loop, period, bool(worded)) or _healthy(cycle, {shape(t).words for t in taken}):
        return None
    if any(map(_framework, cycle)):
        return None
    repeats = length / period
    clocks = [s.clock for s in loop if s.clock is not None]
    shown = 0.0
    if len(clocks) >= 2:
        gone = (clocks[-1] - clocks[0]) % 86400.0
        shown = gone if gone <= 43200.0 else 0.0  # (out of order: no time passed)
    stated = 0.0
    for s in cycle:
        if (lasted := _lasted(s.body) or ELAPSED.search(s.body)) is not None:
            stated = max(stated, _seconds(lasted))
    growing = [s.durations for s in loop if s.durations]
    if worded and len(growing) >= 2 and growing[-1][0] > growing[0][0]:
        stated = max(stated, growing[-1][0])  # (an elapsed wait said again, longer)
    waited = max(shown, stated)
    needed = _needed(cycle)
    if not worded:  # words that say no wait: a timer's loop, shown by the clock
        starts = [s.clock for s in loop[::period] if s.clock is not None]
        if shown < needed or not _regular(starts):
            return None
    elif waited < needed:
        attempts = max((a for s in loop for a in s.attempts), default=0)
        if clocks or max(repeats, attempts) < GENERIC_UNTIMED:
            return None
    lead = worded[0] if worded else cycle[0]
    return Loop(length, period, waited, _phase_of(lead), loop[-1].rank)


#: a word of a phase: letters and the marks words carry, no digit, no mark of a number
_WORD = re.compile(r"[A-Za-z][A-Za-z_.,:;'()/-]*")


def _phase_of(s: Shape) -> str:
    words = [w for w in s.words.split() if _WORD.fullmatch(w)]
    return ("loop: " + " ".join(words))[:80]
