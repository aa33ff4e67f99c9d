"""One parser for a console: every reader on each line, and a scanner that finds the lines
worth reading in a byte stream (`runwatch watch`, `runwatch diagnose`).

`LineParser.read` takes a line's wrappers off (colour codes, Ray's prefix, a launcher's:
`runwatch.emitters.prefixes`), then asks each reader: failures (`failures`), timed-out
collectives (`collectives`), tqdm bars and what follows them on the line, engine stats, verl,
PRIME-RL and AReaL step lines (`logparse`), printed metric dicts and OpenRLHF's bar postfix
(`metric_lines`). Readers that need more than one line (a traceback, a watchdog message a
terminal cut) say so through `following`, and `finish` gives what the end of the output
decides (a traceback that was the process's last word).

`LineScanner` finds the few interesting lines without looking at the rest: `bytes.find` for
a handful of literal markers runs over each chunk in C, and only the lines around a hit are
decoded and parsed -- plus every line after one while a reader is following. Lines end at
`\\n` or `\\r` (tqdm rewrites its bar with `\\r`). `peek` reads the unfinished line at the end
of what came so far, for a bar that has not been overwritten yet (tqdm writes `\\r` + bar and
no line end until its next refresh): its progress is read when it is written, and once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ahocorasick_rs import AhoCorasick, BytesAhoCorasick

from runwatch.emitters import collectives, env, stalls
from runwatch.emitters.failures import ABORT, AT_EXIT, Failures
from runwatch.emitters.failures import MARKERS as FAILURE_MARKERS
from runwatch.emitters.logparse import (
    _AREAL_STEP,
    AREAL_REWARD_KEY,
    Found,
    notes,
    parse_areal_row,
    parse_prime_rl_step,
    parse_sglang,
    parse_verl_step,
    parse_vllm,
    ray_origin,
    ray_prefix,
    tqdm_bar,
)
from runwatch.emitters.metric_lines import MetricLines
from runwatch.emitters.metric_shape import MARKERS as METRIC_MARKERS
from runwatch.emitters.metric_shape import counter
from runwatch.emitters.prefixes import launcher_prefix, strip_colour
from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.emitters.step_numbers import OVERFLOW_STEPS
from runwatch.emitters.tracebacks import EXCEPTHOOK
from runwatch.emitters.trainer import step_events

#: kinds that say a process goes on working (a traceback it printed before was handled)
PROGRESS_KINDS = frozenset({"progress", "step.metrics", "step.done", "reward", "inference.stats"})
#: kinds that say the job made a step (not a bar's count: a rollout's bar runs on a while a
#: worker dies)
_STEP_KINDS = frozenset({"step.metrics", "step.done"})
#: the words a line that names a counter holds (`MetricLines`' markers' kind)
_COUNTER_MARKERS = ("step", "Step", "STEP", "iter", "Iter", "ITER", "poch", "POCH", "batch",
                    "Batch")  # fmt: skip
_MAX_TAIL = 1 << 20
_HEAD = 256  # how much of a line's start can hold Ray's prefix, colour codes included


def _origin(line: str) -> tuple[dict[str, Any] | None, str, str]:
    """(the Ray worker that forwarded the line or None, the launcher's prefixes around the Ray
    driver before Ray's -- `docker compose`'s, `--tee`'s, a collector's time -- or "", the
    line without them and Ray's prefix)."""
    if not (line.startswith("(") or "pid=" in line[:6]):  # Ray's prefix, or its cut tail
        if "pid=" not in line[:_HEAD]:
            return None, "", line  # (no Ray prefix under a launcher's either: one look, not two)
        outer, _ = launcher_prefix(line)
        if outer is line or not outer.startswith("("):
            return None, "", line
        src, body = ray_origin(outer)  # (a line of its own that opens a bracket: not Ray's)
        return (src, line[: len(line) - len(outer)], body) if src is not None else (None, "", line)
    src, body = ray_origin(line)
    return src, "", body


def _source(src: dict[str, Any] | None, rank: int | None) -> Any:
    """Who printed a line, as far as the line says: a Ray worker, a rank, or the process."""
    if src is not None:
        return ("ray", src.get("host"), src["pid"])
    if rank is not None:
        return ("rank", rank)
    return None


class LineParser:
    """Every reader on one line; `server` names vLLM/SGLang servers (else vllm/sglang).

    One parser per output (a watched stream, a file): multi-line readers keep their state in
    it."""

    def __init__(
        self,
        reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS,
        server: str | None = None,
        overflow_steps: int | None = None,
    ) -> None:
        self.reward_keys = tuple(reward_keys)
        self.server = server
        #: AReaL's global step whose stats table is being printed (its "Train step N/M done."
        #: line comes first); None outside one
        self._areal_step: int | None = None
        self.failures = Failures()
        self._bars: dict[tuple[Any, Any], int] = {}  # (source, bar name) -> the count it showed
        self._steps: dict[Any, int] = {}  # source -> the highest step its metrics named
        #: source -> the highest count its lines named while a failure of it waits
        self._counters: dict[Any, int] = {}
        #: consecutive loss-scale overflow skips that are a failure (`step_numbers`)
        steps = overflow_steps if overflow_steps is not None else env.overflow_steps(OVERFLOW_STEPS)
        self.metrics = MetricLines(self.reward_keys, steps)
        self.wrapped = collectives.Wrapped()
        self.spread = collectives.Spread()  # a timeout worded over lines (`collectives.Spread`)
        self.waits = stalls.Waits()  # ranks' waits the console declares (`stalls`)
        self._srcs: dict[Any, dict[str, Any]] = {}  # source -> the Ray worker it is
        #: a process's abort on an uncaught C++ exception, held for the line after it (its
        #: `what():`): no failure of its own when that, or a line before, was a collective's
        #: timeout -- the watchdog's abort, which `collective_timeout` reports
        self._abort: tuple[Found, dict[str, Any] | None] | None = None  # (it, its Ray worker)
        self._timed_out = False  # a collective timed out in this output
        #: ... one whose watchdog aborts its process for it (NCCL's, HCCL's): an abort after it
        #: is the watchdog's, reported as the collective's timeout
        self._watchdog_aborts = False
        #: `collectives.SOME_FAILED` alone, held (with its Ray worker) while the watchdog's
        #: lines after it may say the failure was an NCCL error, no timeout; lines seen since
        self._some: dict[Any, tuple[Found, dict[str, Any] | None, int]] = {}  # by who said it
        #: a line of this output said the collectives failed of an NCCL error and no process's
        #: steps went on since (two steps of one: an elastic restart's -- not the step a process
        #: had done when the error came, printed after it): a dump signal
        #: (`collectives.dump_signal`) held or read after it was that error's
        self._nccl_failed = False
        self._steps_since_nccl: dict[Any, int] = {}  # by process: the steps it went on by
        self._notes = notes()  # lines no reader could read, since `notes` was last called
        #: (a piece of a line, the bar `_readers_of` found at its start, or None): `_readers`
        #: reads that piece's bar without matching it again (watch's cost per line)
        self._bar: tuple[str, tuple[Found, int] | None] | None = None
        #: the console's last progress was the engine's offline bar reaching its total, no work
        #: begun since: what a program exiting with its work done writes is no failure
        #: (`AT_EXIT`)
        self._done = False

    @property
    def following(self) -> bool:
        """The next lines matter whatever they hold (a traceback, a cut watchdog message)."""
        return (
            self.wrapped.held is not None
            or self.failures.reading
            or self.failures.saying
            or self.metrics.following
            or self._abort is not None
            or bool(self._some)
            or self.waits.following
            or self.spread.held is not None
        )

    def parse(self, line: str) -> list[Found]:
        """The events a line shows. A line Ray forwarded from a worker gives them with
        `src` (that worker, `ray_origin`) among their fields, and, unless `server` names
        it, its server is named after it (`vllm@IP/PID`): an engine in a Ray actor is a
        server of its own. A field `component` is a hint for a line nobody names the source
        of (an engine's fatal error): not an event field."""
        return self.read(line)[1]

    def read(self, line: str) -> tuple[str, list[Found]]:
        """(the line without colour codes and Ray's prefix and suffix, its events): what
        `runwatch diagnose` also reads the line's own timestamp from."""
        if self.wrapped.held is None and not any(m in line for m in collectives.WRAP_MARKERS):
            return self._read(line)
        whole, this = self.wrapped.take(line)
        body, out = self._read(whole) if whole is not None else ("", [])
        if this is not None:
            body, found = self._read(this)
            out += found
        return body, out

    def before(self, line: str) -> None:
        """A line no reader was shown, just before one they are (`LineScanner`): its source's
        line before, for the failures reader."""
        src, _, body = _origin(strip_colour(line))
        body, rank = launcher_prefix(body)
        self.failures.saw(_source(src, rank), body)
        self.waits.unread(body)

    def notes(self) -> list[str]:
        """Why lines that looked like metrics or failures since the last call gave no event
        (`runwatch diagnose` says them for a console it cannot place)."""
        kept_by = (self._notes, self.metrics.notes, self.failures.notes, self.waits.notes)
        out = [why for kept in kept_by for why in kept]
        for kept in kept_by:
            kept.clear()
        return out

    def quiet(self) -> list[Found]:
        """What the output's going quiet decides while its command still runs (a hung job:
        `runwatch watch` calls this once the output has said nothing for a while): a cut
        watchdog line's rest is not coming, an abort's `what():` neither, and a traceback
        its process printed last was its last word (`Failures.quiet`)."""
        return self._last_words(self.failures.quiet)

    def finish(self) -> list[Found]:
        """What the end of the output decides: a traceback its process printed last."""
        return self._last_words(self.failures.finish, ended=True)

    def _last_words(
        self, failed: Callable[[], list[tuple[Any, Found]]], ended: bool = False
    ) -> list[Found]:
        out: list[Found] = []
        if (held := self.wrapped.flush()) is not None:
            out += self._read(held)[1]
        if self._some:
            out += [self._released((found, src)) for found, src, _ in self._some.values()]
            self._some.clear()
            self._timed_out = self._watchdog_aborts = True
        if self._abort is not None:
            out.append(self._released(self._abort))
            self._abort = None
        if ended:
            out += self.metrics.finish()
            if (short := self.waits.short_wait()) is not None:
                self._notes.append(short)
        for source, (kind, fields) in failed():
            if (src := self._srcs.get(source)) is not None:
                fields["src"] = src
            out.append((kind, fields))
        return out

    def _read(self, line: str) -> tuple[str, list[Found]]:
        try:
            return self._readers_of(line)
        except Exception as err:  # a reader's slip (or a number too long to hold) costs this
            # line alone: the output, the other lines and the other readers go on
            self._notes.append(f"a line could not be read ({str(err)[:80]!r}): skipped")
            return line, []

    def _readers_of(self, line: str) -> tuple[str, list[Found]]:
        src, outer, body = _origin(strip_colour(line))
        line, rank = launcher_prefix(body)
        lead = outer + body[: len(body) - len(line)]  # (where a collector's time stands)
        hooked = _excepthook_head(body, line, rank)
        found: list[Found] = []
        while (bar := tqdm_bar(line)) is not None and (rest := line[bar[1] :]).strip():
            # a bar has no line end: what the program writes next (a traceback's head, a
            # launcher's record, a step line) starts right after its `]` on the same line and
            # is a line of its own, for every reader -- with a launcher prefix of its own, or
            # the bar's. Text no marker of the scanner's is in (`LITERALS`) is no line any
            # reader takes, as `LineScanner` would not show it: the bar's line is read whole.
            if not self.following and not _TEXT_MARKERS.find_matches_as_indexes(rest):
                break
            meter = line[: bar[1]]
            self._bar = (meter, bar)
            found += self._line(meter, src, rank, lead)
            line, own = launcher_prefix(rest)
            if own is not None:
                rank = own  # (torch's excepthook head glued after the bar is its too)
                hooked = hooked or _excepthook_head(rest, line, own)
            if len(line) != len(rest):
                lead = rest[: len(rest) - len(line)]  # (the piece's own prefixes)
            self.failures.saw(_source(src, rank), meter)  # its line before: the bar
        self._bar = (line, bar)  # (a bar with nothing after it, or none)
        found += self._line(line, src, rank, lead)
        if hooked:
            self.failures.excepthook(_source(src, rank))  # (torch's: uncaught, `tracebacks`)
        return outer + body, found

    def _line(
        self, line: str, src: dict[str, Any] | None, rank: int | None, lead: str = ""
    ) -> list[Found]:
        """The events of one line as its program wrote it (Ray's and a launcher's prefixes
        taken off: `src`, `rank`; `lead`, the launcher's, where its clock may stand)."""
        source = _source(src, rank)
        if src is not None:
            self._srcs[source] = src
        found = self.failures.read(source, line)
        timeout = None
        marked = any(m in line for m in collectives.MARKERS)
        if marked:
            timeout = collectives.parse(line, rank)
            if timeout is not None and self._timed_out and collectives.unnamed(timeout[1]):
                timeout = None  # `SOME_FAILED` after a line that said which collective
        worded = marked and any(m in line for m in collectives.SPREAD_MARKERS)
        if worded or self.spread.held is not None:
            spread = self.spread.read(line, rank)
            if timeout is not None:
                self.spread.held = None  # (the line said its timeout whole: its lines after
            else:  # name the call again, no second one)
                timeout = spread
        timeout, released = self._some_failed(timeout, line, src, source)
        if released:
            found += released
            self._timed_out = self._watchdog_aborts = True
        aborting = False
        if timeout is not None:
            found.append(timeout)
            self._timed_out = True
            aborting = collectives.watchdog_aborts(timeout[1])
            self._watchdog_aborts |= aborting
            if (raised := self.failures.raised(source, line)) is not None:
                found.append(raised)  # the rank raised the collective's failure
        found = self._aborts(found, aborting, src)
        found = self._at_exit(found)
        declared = self.waits.read(line, rank, lead)
        made = (self.metrics.made, self.metrics.unnamed)
        found += self._parse(line, src, source)
        self._work(found)
        self.waits.saw(found, line, src, lead)
        self.metrics.saw(found)
        advanced = any([self._advanced(source, kind, fields) for kind, fields in found])
        if self.failures.said_just_before(source):
            if advanced and self._stepless(found, made):
                advanced = False  # metrics that name no step, after it: the exception's message
            elif not found and self.metrics.following:
                self.failures.goes_on(source)  # a record the message holds, over lines
        if advanced or (self.failures.waiting(source) and self._counted(source, line)):
            self.failures.progressed(source)  # (each event seen: `_advanced` keeps the steps)
        if any(kind in _STEP_KINDS for kind, _ in found) and advanced:
            self.failures.job_went_on(source)  # a Ray worker's logged traceback: a report
            if self._nccl_failed:  # (restarted) a later dump signal is not that error's
                went = self._steps_since_nccl[source] = self._steps_since_nccl.get(source, 0) + 1
                self._nccl_failed = went < 2
        if advanced and not declared:
            declared = self.waits.progressed()  # the job went on: its waits ended
        for kind, fields in declared:
            if kind == "inference.stats":  # an engine's own wait: which engine is the line's
                fields["server"] = self._server(fields.pop("engine"), src)
        found += declared
        if src is not None:
            for _, fields in found:
                fields["src"] = src
        return found

    def _some_failed(
        self, timeout: Found | None, line: str, src: dict[str, Any] | None, source: Any
    ) -> tuple[Found | None, list[Found]]:
        """torch's `SOME_FAILED` says the collectives failed or timed out (and, torch 2.4 on,
        the watchdog's status line of a work that failed "either" way, `collectives.undecided`,
        before any line of this output said a timeout); the watchdog's lines after it say
        which: held while they may (`collectives.SOME_FAILED_SAYS` lines of
        the process that said it -- every rank says it at once, their lines interleaved),
        dropped when one says an NCCL error or a line names the timed-out collective itself,
        given out -- a timeout whose cause the paste cut -- when none did (or at the output's
        end, or its going quiet). The heartbeat monitor's dump signal (`collectives.dump_signal`)
        is held to the output's end or quiet, for its process ends after it, and dropped by an
        NCCL error any process says. Returns (this line's timeout, the held ones given out)."""
        if timeout is not None and (self._timed_out or not collectives.undecided(timeout[1])):
            self._some.clear()  # named in their place, or after a line that said a timeout
            return timeout, []
        failed = collectives.failed_otherwise(line)
        if failed:
            self._nccl_failed, self._steps_since_nccl = True, {}
        out: list[Found] = []
        for who, (found, said_by, seen) in list(self._some.items()):
            if failed and collectives.dump_signal(found[1]):
                del self._some[who]  # a dump signal: any rank's NCCL error was what it signalled
                continue
            if None not in (who, source) and who != source:
                continue  # another process's line says nothing of this one's
            if failed:
                del self._some[who]  # no timeout
            elif collectives.dump_signal(found[1]):
                continue  # (held to the output's end: the process ends after it)
            elif seen + 1 < collectives.SOME_FAILED_SAYS:
                self._some[who] = (found, said_by, seen + 1)
            else:
                del self._some[who]
                out.append(self._released((found, said_by)))
        if timeout is not None and not (self._nccl_failed and collectives.dump_signal(timeout[1])):
            self._some.setdefault(source, (timeout, src, 0))  # this line's own, held
        return None, out

    def _aborts(
        self, found: list[Found], timed_out: bool, src: dict[str, Any] | None
    ) -> list[Found]:
        """A held abort given out unless this line (its `what():`) or an earlier one was a
        collective's timeout whose watchdog aborts the process for it (`watchdog_aborts`);
        this line's abort held in its place. A process that aborts itself over another timeout
        (ps-lite's LOG(FATAL) of its nodes' registration) dies of it: its abort stands."""
        held, self._abort = self._abort, None
        out: list[Found] = []
        if held is not None and not timed_out and not self._watchdog_aborts:
            out.append(self._released(held))
        for kind, fields in found:
            if fields.pop(ABORT, False):
                if not self._watchdog_aborts:
                    self._abort = ((kind, fields), src)
            else:
                out.append((kind, fields))
        return out

    def _at_exit(self, found: list[Found]) -> list[Found]:
        """A fatal line its source also writes when the program exits (`AT_EXIT`: vLLM's
        client reporting its engine core's end, which multiprocessing's atexit terminates before
        the client's finaliser runs) is no failure once the engine's work was done: the
        console's last progress its offline bar at its total, nothing begun since."""
        out: list[Found] = []
        for kind, fields in found:
            if fields.pop(AT_EXIT, False) and self._done:
                self._notes.append(
                    f"`{str(fields.get('error', ''))[:60]}` came after the last bar reached its "
                    "total, no work begun since: the program's exit, no failure"
                )
                continue
            out.append((kind, fields))
        return out

    def _work(self, found: list[Found]) -> None:
        """Whether the engine's work is done, after this line's events (`_done`): its offline
        bar (vLLM's `Processed prompts`, what `LLM.generate` and its kin show) at its total says
        so; any other progress (that bar short of it, another bar, a step, engine stats) says
        not -- a trainer's rollout bar at its total is a step of a run that goes on."""
        for kind, fields in found:
            if kind == "progress":
                total = fields.get("total")
                self._done = (
                    str(fields.get("name", "")).startswith(stalls.SERVING_BAR)
                    and isinstance(total, int | float)
                    and fields.get("n", 0) >= total > 0
                )
            elif kind in PROGRESS_KINDS:
                self._done = False

    @staticmethod
    def _released(held: tuple[Found, dict[str, Any] | None]) -> Found:
        (kind, fields), src = held
        if src is not None:
            fields["src"] = src
        return kind, fields

    def _stepless(self, found: list[Found], before: tuple[int, int]) -> bool:
        """Whether the line's progress is metric records alone, none of which named its step
        (`before`: the metric readers' counts before the line)."""
        made, unnamed = self.metrics.made - before[0], self.metrics.unnamed - before[1]
        only_records = all(kind == "step.metrics" for kind, _ in found if kind in PROGRESS_KINDS)
        return only_records and made > 0 and made == unnamed

    def _counted(self, source: Any, line: str) -> bool:
        """Whether a line, while a failure of its source waits on what it says next, counts
        further than an earlier such line did (`Train Epoch: 1516` after `Epoch: 1515`): the
        process went on, though no reader took the line for a step's metrics."""
        if not any(m in line for m in _COUNTER_MARKERS) or (n := counter(line)) is None:
            return False
        last = self._counters.get(source)
        self._counters[source] = n if last is None else max(last, n)
        if last is not None and n > last:
            del self._counters[source]
            return True
        return False

    def _advanced(self, source: Any, kind: str, fields: dict[str, Any]) -> bool:
        """Whether an event says its process went on working: a bar's repaint at the count
        it showed (tqdm closes a bar at exit, after the traceback that ended the job) does
        not."""
        if kind not in PROGRESS_KINDS:
            return False
        if kind != "progress":
            # a step's metrics printed again (a bar's last repaint at exit shows its postfix
            # once more) are no step further
            step = fields.get("step")
            if not isinstance(step, int):
                return True
            last_step = self._steps.get(source)
            self._steps[source] = step if last_step is None else max(last_step, step)
            return last_step is None or step > last_step or kind != "step.metrics"
        # a bar's name as pasted: a markdown mark before it (`**Steps`) is no other bar
        key, n = (source, str(fields.get("name", "")).lstrip("*>_` ")), fields.get("n", 0)
        last = self._bars.get(key)
        self._bars[key] = n if last is None else max(last, n)
        return last is None or n > last

    def _parse(self, line: str, src: dict[str, Any] | None, source: Any) -> list[Found]:
        if self.metrics.following:  # a record spread over lines: this one may go on it
            taken, ended = self.metrics.more(source, line)
            if taken:
                return ended
            return ended + self._readers(line, src, source)
        return self._readers(line, src, source)

    def _readers(self, line: str, src: dict[str, Any] | None, source: Any) -> list[Found]:
        known, self._bar = self._bar, None
        bar = known[1] if known is not None and known[0] is line else tqdm_bar(line)
        if line.startswith("│") and self._areal_step is not None:
            row = parse_areal_row(line)
            keys = (AREAL_REWARD_KEY, *self.reward_keys)
            return step_events(row, self._areal_step, keys, done=False) if row else []
        if "Train step " in line and (m := _AREAL_STEP.search(line)) is not None:
            self._areal_step = int(m.group(1)) - 1  # AReaL logs global_step + 1
            return []
        if bar is not None:
            # a refresh (what was printed after it on its line -- verl's step line after its
            # "Training Progress" bar, an engine's stats line after a rollout's bar, a
            # trainer's metrics dict or a traceback after its bar -- is read as its own line)
            refresh, end = bar
            out = [refresh]
            fields = refresh[1]
            meter = line[:end]
            postfix = meter[meter.rfind("[") :]
            openrlhf = None  # (OpenRLHF's bar with its own keys: the postfix is the step's)
            if fields["name"].startswith("Train epoch"):
                openrlhf = self.metrics.bar(source, fields["name"], fields["n"],
                                            fields.get("total"), postfix)  # fmt: skip
            if openrlhf is not None:
                out += openrlhf
            elif "=" in postfix or ":" in fields["name"]:  # torchtune: `1|31|Loss: 2.3: 3%|`
                out += self.metrics.postfix(source, fields["name"], fields["n"], postfix[1:-1])
            self.metrics.refreshed(source, fields["name"], fields["n"])
            return out  # what follows the bar on its line is a line of its own (`_readers_of`)
        if "#running-req: " in line:
            found = parse_sglang(line, self._server("sglang", src))
            return [found] if found else []
        if "Running: " in line and (stats := parse_vllm(line, self._server("vllm", src))):
            return [stats]
        if "step:" in line and (steps := parse_verl_step(line, self.reward_keys)):
            return steps
        if "Step " in line and (steps := parse_prime_rl_step(line, self.reward_keys)):
            return steps
        return self.metrics.read(source, line)

    def _server(self, kind: str, src: dict[str, Any] | None) -> str:
        """The server a stats line is about: the name given (`--server`), else the engine's
        kind, per forwarding process when the line was forwarded."""
        if self.server:
            return self.server
        if src is None:
            return kind
        where = f"@{src['host']}" if "host" in src else ""
        return f"{kind}{where}/{src['pid']}"


def bar_of(line: str) -> list[Found]:
    """The tqdm refresh a line starts with, read without touching any reader's state."""
    line = strip_colour(line)
    src, line = ray_origin(line) if line.startswith("(") else (None, line)
    bar = tqdm_bar(launcher_prefix(line)[0])
    if bar is None:
        return []
    refresh = bar[0]
    if src is not None:
        refresh[1]["src"] = src
    return [refresh]


#: Literal pieces of the lines worth reading (step lines, engine stats, Ray's `pid=`,
#: AReaL's table, printed dicts, the failure and collective markers, a bar's `%|` where a
#: paste or a file lost the `\r` before it)
LITERALS: tuple[bytes, ...] = (
    b"Running: ", b"#running-req: ", b"pid=", "│ ".encode(), b"{'", b'{"', b"%|",
    *sorted({m.encode() for m in (*FAILURE_MARKERS, *collectives.MARKERS, *METRIC_MARKERS,
                                  *stalls.MARKERS, *stalls.WAIT_MARKERS)}),
)  # fmt: skip
#: All of them found in one pass (Aho-Corasick in Rust: its cost hardly grows with the
#: number of markers, the catalogue's included -- bench/watch.py)
_MARKERS = BytesAhoCorasick(list(LITERALS))
#: the same markers in decoded text: what follows a bar on its line (`LineParser`)
_TEXT_MARKERS = AhoCorasick([m.decode() for m in LITERALS])


class LineScanner:
    """Feed bytes as they come; get the events of the complete lines among them.

    Only lines around markers are looked at: a segment right after `\\r` (tqdm writes every
    refresh as `\\r` + bar), and lines holding one of `LITERALS`, all found in one pass over
    the bytes. A segment after `\\r` on a line Ray forwarded is read with that line's prefix
    (`segments`): its bar is the worker's.
    """

    def __init__(self, parser: LineParser) -> None:
        self.parser = parser
        # the stream starts a line; the tail always starts with the break before it
        self._tail = b"\n"
        #: Ray's prefix of the line the tail continues, when that line began in earlier bytes
        self._prefix = ""
        #: the unfinished line `peek` read, and what it gave (so its end does not give it again)
        self._peeked: tuple[bytes, list[Found]] | None = None

    def feed(self, data: bytes) -> list[Found]:
        if self._tail:
            data = self._tail + data
        last = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if last < 0:
            self._tail = data if len(data) <= _MAX_TAIL else b""
            return []
        out = self._scan(data, last + 1)
        if data[last] == 13 and (line := data.rfind(b"\n", 0, last)) >= 0:
            self._prefix = self._prefix_of(data, line + 1)
        # keep the line break before the unfinished line: a tqdm bar is known by its "\r"
        self._tail = data[last:] if len(data) - last <= _MAX_TAIL else b""
        return out

    def peek(self) -> list[Found]:
        """The progress the unfinished line shows now (a tqdm refresh waiting for the next
        one to end it), once: call it when the output pauses. Only bars are read this way --
        a line cut mid-write would give half a step's metrics."""
        tail = self._tail
        if len(tail) < 2 or tail[:1] != b"\r" or (self._peeked and self._peeked[0] == tail):
            return []
        found = bar_of(self._prefix + tail[1:].decode("utf-8", "replace"))
        self._peeked = (tail, found)
        return found

    def finish(self) -> list[Found]:
        """The last line, when the stream ended without a line break. (What the end of the
        whole output decides is the parser's: `LineParser.finish`, once every stream of it
        ended.)"""
        data, self._tail = self._tail, b""
        return self._scan(data + b"\n", len(data) + 1) if data.strip(b"\r\n") else []

    def _prefix_of(self, data: bytes, start: int) -> str:
        """Ray's prefix of the line that starts at `start` ("" for none)."""
        if data[start : start + 1] not in (b"(", b"\x1b"):  # ray_prefix's test, before decoding
            return ""
        head = data[start : start + _HEAD]
        return ray_prefix(head.split(b"\r", 1)[0].decode("utf-8", "replace"))

    def _starts(self, data: bytes, end: int) -> set[int]:
        find, rfind = data.find, data.rfind
        starts: set[int] = set()
        line_end = -1  # the end of the line of the last hit: more hits on it add nothing
        for _, pos, _ in _MARKERS.find_matches_as_indexes(data):
            if pos >= end:
                break
            if pos < line_end:
                continue
            starts.add(max(rfind(b"\n", 0, pos), rfind(b"\r", 0, pos)) + 1)
            line_end = find(b"\n", pos, end)
            if line_end < 0:
                line_end = end
        pos = find(b"\r", 0, end)
        while pos >= 0:
            if pos + 1 < end and data[pos + 1] not in (10, 13):  # not "\r\n" line ends
                starts.add(pos + 1)
            pos = find(b"\r", pos + 1, end)
        if self.parser.following:
            starts.add(1)  # the line after the tail's break goes on what was being read
        return starts

    def _scan(self, data: bytes, end: int) -> list[Found]:
        find, rfind = data.find, data.rfind
        starts = sorted(self._starts(data, end))
        out: list[Found] = []
        parser = self.parser
        peeked, self._peeked = self._peeked, None
        i = 0
        last = -1
        read_to = -1  # where the last line read ended
        while i < len(starts):
            start = starts[i]
            i += 1
            if start <= last or start >= end:
                continue
            stops = [s for s in (find(b"\n", start, end), find(b"\r", start, end)) if s >= 0]
            stop = min(stops) if stops else end
            if stop <= start:
                continue
            last = start
            # where the line before ends: "\r\n" is one line end, no empty line after a "\r"
            # (one at 0 or before it ended in bytes fed before: the tail's break)
            ended = start - 2 if data[start - 2 : start] == b"\r\n" else start - 1
            if ended > 0 and data[start - 1] == 10 and read_to < ended:
                # the line before, which no marker showed: what the failures reader knows of
                # its source's line before (a traceback's code line, Python's "Exception in
                # thread X:"), as `runwatch diagnose`, reading every line, knows it
                before = max(rfind(b"\n", 0, ended), rfind(b"\r", 0, ended)) + 1
                if before > read_to:
                    parser.before(data[before:ended].decode("utf-8", "replace"))
            read_to = stop
            text = data[start:stop].decode("utf-8", "replace")
            if start > 0 and data[start - 1] == 13:  # a part after "\r": whose line is it?
                line = rfind(b"\n", 0, start)
                prefix = self._prefix if line < 0 else self._prefix_of(data, line + 1)
                text = prefix + text
            found = parser.parse(text)
            if peeked is not None and start == 1 and data.startswith(peeked[0]):
                found = [f for f in found if f not in peeked[1]]  # read when it was written
                peeked = None
            out.extend(found)
            if parser.following:  # the next line goes on what is being read
                following = stop + 1
                while following < end and data[following] in (10, 13):
                    following += 1
                if following < end and (i >= len(starts) or starts[i] != following):
                    starts.insert(i, following)
        return out


def _excepthook_head(text: str, line: str, rank: int | None) -> bool:
    """Whether `text`'s prefixes end in torch's excepthook head: its `[rankN]:` the last of them
    (under `--tee`'s), `line` what is left after them."""
    at = len(text) - len(line) - len(f"[rank{rank}]:")
    return rank is not None and EXCEPTHOOK.match(text, at) is not None
