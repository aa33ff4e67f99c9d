"""A process's failure read from its console, as `component.failed`.

Two kinds of evidence:

- **Fatal lines**, those only a dying component prints, or a failed collective or weight
  update: the signatures of the fatal-error catalogue (`runwatch.emitters.catalogue`, data
  read from the frameworks' sources: docs/catalogue.md lists them). Each is a failure at
  once, of the component its signature implicates, unless its logger prefix names a level
  below the one its source writes it at.
- **An uncaught exception**: a traceback, read by its grammar (`emitters/tracebacks.py`:
  frames and an exception line, with or without their head, chained ones as one) whose
  last line names the exception. A handled exception prints the same thing, so a traceback
  is only *pending* until the process says more: if the same source goes on working (a
  step, a progress bar, engine stats: anything the parsers read as progress) it was handled;
  if the output ends with it (the file, or the watched command) it was the process's last
  word -- a failure.
  A traceback logged at WARNING, INFO or DEBUG is a warning, never a failure; so is one
  logged at ERROR with one frame, no module's (`Record.caught_where_raised`: raised and caught
  in one function, a handler's report -- an exception that ends a program runs through calls
  from the program's top or from the function that logs it before re-raising); so is one
  Python says it ignored (`Exception ignored in: <function X.__del__ ...>` before it: the
  unraisable hook's report of an exception in a finaliser or at exit, after which the
  program goes on).

Each line is first read **as printed** (`printed`): what a terminal, a collector or a paste put
around it -- a tqdm bar's last refresh before it on the same line, a collector's RFC 3339 time,
a markdown quote, emphasis or code fence -- is taken off once, and every reading after it (the
catalogue, the exit grammar, the traceback grammar) sees the program's line.

Lines are read with whatever prefix their logger puts before each line of a record (vLLM's
`ERROR 04-28 02:37:03 [core.py:398] `, loguru's time and level): the prefix of the
`Traceback` line, or of the first frame when the head is gone, with its digits free, is the
prefix of the record's other lines.
"""

from __future__ import annotations

import re
from typing import Any

from runwatch.emitters.catalogue import CATALOGUE
from runwatch.emitters.exits import MARKERS as EXIT_MARKERS
from runwatch.emitters.exits import (
    READY_MARKER,
    STOP_MARKERS,
    TEARDOWN,
    TEARDOWN_MARKER,
    clean_exit,
    crashed_pod,
    exit_report,
    ready_pod,
    stop_request,
)
from runwatch.emitters.logparse import notes
from runwatch.emitters.prefixes import GLOG_YEAR
from runwatch.emitters.printed import BAR_BEFORE, printed
from runwatch.emitters.tracebacks import (
    DUMP_C_FRAME,
    DUMP_FRAME,
    DUMP_HEAD,
    EXCEPTHOOK_SAYS,
    IGNORED,
    IGNORED_GLUED,
    IPYTHON_HEAD,
    PADDING,
    QUALIFIED,
    SEE_ABOVE,
    STACK_HEAD,
    TRACEBACK,
    UNCAUGHT,
    Record,
    exception_at,
    frame_prefix,
)

Found = tuple[str, dict[str, Any]]

#: literal pieces a line must hold for `Failures.read` to look at it (the scanner's markers):
#: a traceback's head or frame, an exception line's name and colon (a traceback's tail that
#: stands alone: `jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: ...`), Ray's
#: exceptions and TensorFlow 1's op errors, and the catalogue's
#: Python's words that the exception it reports next was ignored (`Exception ignored in: ...`)
IGNORED_MARKER = "Exception ignored"
MARKERS = (TRACEBACK, 'File "', "Error: ", "Exception: ", "ray.exceptions.", SEE_ABOVE.strip(),
           IGNORED_MARKER, *CATALOGUE.literals, *EXIT_MARKERS, *STOP_MARKERS,
           TEARDOWN_MARKER, READY_MARKER)  # fmt: skip
_QUIET_LEVELS = re.compile(r"\b(?:WARNING|WARN|INFO|DEBUG)\b")
#: the levels of a record on the line before a traceback that make it that record's: a
#: program logs a handled exception with its traceback as a warning (`logger.warning(...,
#: exc_info=True)`); an INFO or DEBUG line before one is the program's last progress line
#: before it died more often than a record that carries it
_QUIET_BEFORE = re.compile(r"\b(?:WARNING|WARN)\b")
#: a record's level that `logger.exception` writes (Python's logging, loguru, glog's letter)
_ERROR_LEVEL = re.compile(rf"\bERROR\b|(?:^|[\s\[])E{GLOG_YEAR}\d{{4}} \d\d:")
_NOBODY = object()  # no source (None is the process's)
#: how many crashed pods a source's rows are remembered for (`Failures._restarted`): a
#: `kubectl get pods -w` of a crash-looping fleet names each pod again and again; the oldest
#: goes first, so no output can grow the memory without end
PODS_KEPT = 256
#: how many other sources' lines may come between a source's exception line and the message
#: it goes on with (`said_just_before`): another process's, written at the same moment
SAID_WITHIN = 8
#: what may stand before an exception line that is Python's own report: markup (`**`, `>`)
#: or one tag with no space in it (a launcher's `[trainer22|6]:`), no logger's words
_BARE = re.compile(r"^(?:[^\sA-Za-z0-9]*|\[[^\]\s]*\]:?)$")


def fatal(line: str) -> Found | None:
    """A catalogued fatal line as `component.failed` (how = fatal), with the component its
    signature implicates as a hint for a line no launcher names the source of; a line a
    terminal or a paste wrapped is read as printed (`printed`)."""
    return _fatal(printed(line)[0])


def _fatal(line: str) -> Found | None:
    """`fatal` of a line as printed: padding around it is no part of it -- but a line a
    terminal wrapped after a word keeps that word's space (torch's `DataLoader worker (pid N)
    is killed by signal: ` with the signal's name on the next line)."""
    text = line.strip()
    signature = CATALOGUE.match(text)
    if signature is None and text and line[-1:].isspace():
        signature = CATALOGUE.match(text + " ")
    if signature is None:
        return None
    line = text
    fields: dict[str, Any] = {"error": line[:2000], "how": "fatal"}
    if signature.component != "process":  # "process": whichever printed it, as the prefix says
        fields["component"] = signature.component
    if signature.meaning == "abort":
        fields[ABORT] = True  # the parser decides once it sees what the exception was
    if signature.survivable:
        fields[SURVIVABLE] = True  # `Failures` holds it until the process says more
    if signature.meaning == "signalled":
        fields[SIGNALLED] = True  # `Failures`: what fails after it is its doing
    if signature.at_exit:
        fields[AT_EXIT] = True  # `LineParser`: no failure once the console's work was done
    return ("component.failed", fields)


#: a field of a fatal line's that says the process aborts on an uncaught C++ exception (a
#: catalogue signature of meaning "abort"): `LineParser` holds it for one line, and drops it
#: when the exception was a collective's timeout (torch's watchdog aborts so), which the
#: collective reader reports
ABORT = "_abort"
#: what a failure says of a traceback the output ended inside of, before its exception line
CUT = "an uncaught traceback, cut before its exception line"
#: a field of a fatal line's that says the process may survive it (`Signature.survivable`)
SURVIVABLE = "_survivable"
#: a field of a fatal line's that says a launcher was sent a signal from outside that ended the
#: run (a catalogue signature of meaning "signalled": SIGTERM, SIGHUP): a failure, and what
#: fails after it -- its ranks torn down -- is its doing, as after a user's stop
SIGNALLED = "_signalled"
#: a field of a fatal line's that says its source also writes it when the program exits with
#: its work done (`Signature.at_exit`): `LineParser` drops it when the console's last progress
#: was the engine's offline bar at its total and no work began since
AT_EXIT = "_at_exit"


class Failures:
    """Reads fatal lines and tracebacks (`runwatch.emitters.tracebacks`), per source (a Ray
    worker, a rank, the process)."""

    def __init__(self) -> None:
        self._records: dict[Any, Record] = {}
        #: source -> a traceback it ended and said no more after, when a later one began: a
        #: launcher's traceback after its child's (accelerate's, torchrun's) is often cut
        #: before its exception line, and the earlier one still names the failure
        self._ended: dict[Any, Record] = {}
        self._before: dict[Any, str] = {}  # source -> its line before (a logger's record)
        self._dump_heads: dict[Any, bool] = {}  # source -> a dump's head was its last word
        #: sources whose last words were Python's `Exception ignored ...` (its unraisable hook),
        #: and how many times: the next exceptions it reports -- tracebacks or, with none, the
        #: exception line, after a repr a terminal may have wrapped -- are the ones Python
        #: ignored (two processes sharing one unprefixed stream interleave theirs)
        self._ignored: dict[Any, int] = {}
        self._ignored_now: Any = _NOBODY  # the source whose line being read said so
        #: the line that said the processes were asked to stop (`exits.stop_request`): what
        #: fails after it is the stop's doing
        self._stopped: str | None = None
        #: DeepSpeed's launcher's last `Killing subprocess N` (`exits.TEARDOWN`), while neither
        #: its stop nor a traceback followed it, and its source
        self._teardown: str | None = None
        self._teardown_source: Any = None
        #: whether a failure was read since the output began: a teardown it explains is its
        self._told = False
        #: why tracebacks and exception lines gave no failure, since the owner last took them
        self.notes = notes()
        #: whether the line read last was taken as a death its source may survive (pending)
        self.took = False
        #: per source, the pods whose crash (a `kubectl get pods` row) is a pending record ->
        #: that record: a later row of the pod running ready takes it back (`_restarted`)
        self._pods: dict[Any, dict[str, Record]] = {}
        #: sources whose line read last said (or went on saying) their pending exception ->
        #: the other sources' lines read since; the source of the line being read when its
        #: line before did (`said_just_before`)
        self._said: dict[Any, int] = {}
        self._said_before: Any = _NOBODY

    @property
    def reading(self) -> bool:
        """A traceback is being read: every next line matters (not only marked ones)."""
        return any(r.open for r in self._records.values())

    def read(self, source: Any, line: str) -> list[Found]:
        """What this line says of its source's failure."""
        self._ignored_now = _NOBODY
        self.took = False
        self._said_before = source if self._said.pop(source, None) is not None else _NOBODY
        if self._said and line.strip():  # (per source: Ray's workers print between each other's)
            self._said = {k: n + 1 for k, n in self._said.items() if n < SAID_WITHIN}
        record = self._records.get(source)
        error = record.error if record is not None else None
        found = self._read_printed(source, line)
        after = self._records.get(source)
        said = None if after is None else after.error
        if said is not None and (after is not record or said != error):
            self._said[source] = 0  # this line said (or went on saying) the exception
        self._told = self._told or bool(found)
        return found

    @property
    def saying(self) -> bool:
        """A source said its exception lately: the next lines matter whatever they hold (its
        next one may go on the message, `said_just_before`)."""
        return bool(self._said)

    def said_just_before(self, source: Any) -> bool:
        """Whether the source's line before the one just read (`read` of `source`) was its
        exception's line, no more than `SAID_WITHIN` other sources' lines between: what it
        prints next may be that exception's message going on (detectron2's
        `FloatingPointError: Loss became infinite or NaN at iteration=27!` and the `loss_dict =
        {...}` it holds), not work that went on after it."""
        return self._said_before is not _NOBODY and self._said_before == source

    def goes_on(self, source: Any) -> None:
        """The line just read went on the source's exception's message without saying more of
        the exception (a record it holds, begun on this line and ended on a later one): its
        next line is still the message's (`said_just_before`)."""
        self._said[source] = 0

    def _read_printed(self, source: Any, line: str) -> list[Found]:
        """`read`: a line a terminal padded to its width read as the lines it glued."""
        record = self._records.get(source)
        if (
            (record is None or (record.open and not record.prefix))
            and TRACEBACK not in line  # IPython's head pads the exception's name
            and " " * 16 in line
            and PADDING.search(line)
            and exit_report(line) is None  # (a table's padded column: kubectl's NAME)
        ):
            # a terminal padded the line to its width and glued the next one after it
            return [f for piece in PADDING.split(line) for f in self._read(source, piece)]
        return self._read(source, line)

    def _read(self, source: Any, line: str) -> list[Found]:
        out: list[Found] = []
        # one reading of how the line was printed, for every reading after it: a bar's
        # refresh on its line is what its source printed just before it
        line, bar = printed(line)
        before, self._before[source] = bar or self._before.get(source, ""), line
        # a dump's head (`DUMP_HEAD`) and gdb's C frames after it: its frames are a dump's
        dump_head = bool(self._dump_heads) and self._dump_heads.pop(source, False)
        if (dump_head and DUMP_C_FRAME.match(line)) or (
            "call first)" in line and line.rstrip().endswith(DUMP_HEAD)
        ):
            self._dump_heads[source] = True
        record = self._records.get(source)
        if IGNORED_MARKER in line and (IGNORED.match(line.strip()) or IGNORED_GLUED.search(line)):
            self._ignored[source] = self._ignored.get(source, 0) + 1
            self._ignored_now = source  # a bar before it on its line is no progress after it
        if any(m in line for m in STOP_MARKERS) and (stop := stop_request(line)) is not None:
            self._stop(source, stop, record)
        elif TEARDOWN_MARKER in line and TEARDOWN.search(line) and self._stopped is None:
            self._teardown, self._teardown_source = line.strip(), source
        if record is not None and record.open:
            if record.more(line):
                return out
            record.open = False  # the traceback ended; it waits for the process to say more
        report = pending = None
        if (found := _fatal(line)) is not None and self._stopped is not None:
            self.notes.append(f"`{found[1]['error'][:60]}` came after the stop: its doing")
        elif found is not None:
            if found[1].pop(SIGNALLED, False):
                out.append(found)
                self._stop(source, found[1]["error"], record, asked=False)
            elif found[1].pop(SURVIVABLE, False):
                # a child's death its parent may survive: pending, as a traceback is
                pending = self._pending(source, found[1]["error"], found[1].get("component"))
            else:
                out.append(found)
        elif (report := exit_report(line)) is not None and self._stopped is None:
            # a launcher's, an orchestrator's or a shell's report that a process ended badly
            # (emitters/exits.py): pending, for a launcher may restart it and go on
            pending = self._pending(source, report)
        elif self._pods and (pod := ready_pod(line)) is not None:
            self._restarted(source, pod)
        if pending is not None:
            self.took = True
            if (pod := crashed_pod(line)) is not None:
                pods = self._pods.setdefault(source, {})
                pods.pop(pod, None)  # (its newest crash, last in the order)
                if len(pods) >= PODS_KEPT:
                    del pods[next(iter(pods))]
                pods[pod] = pending
        if (at := line.find(TRACEBACK)) >= 0:
            self._head(source, line, at, before)
        elif (frame := frame_prefix(line)) is not None:
            # frames whose head the output lost (a pasted tail, a cut line): the prefix
            # before the frame's indentation is the record's
            prefix, path = frame  # (after `Exception ignored`, the ignored one's frames)
            quiet = bool(_QUIET_LEVELS.search(prefix)) or self._ignored_one(source)
            self._begin(source, Record(prefix, quiet=quiet))
            record = self._records[source]
            record.paths.append(path)
            # faulthandler's dump, or logging's stack_info after its head: no exception's
            record.dumped = (
                DUMP_FRAME.search(line) is not None
                or before.rstrip().endswith(STACK_HEAD)
                or dump_head
            )
            body = line[len(prefix) :]
            record.indent, record.after_frame = len(body) - len(body.lstrip()), True
        elif (tail := exception_at(line)) is not None:
            alone = found is None and report is None and _alone(*tail)
            if (
                _qualified(*tail)
                or _indented_after(before, tail[0])
                or alone
                or _panel_after(before, tail[0])
            ):
                # the end of a traceback whose frames were not in the output, but for the
                # code line before it (a pasted tail), or one that names its exception with
                # its module, as only Python's report of an uncaught one does, or one that
                # stands alone at its line's start: pending, the process's death if it is
                # the source's last word
                ignored = self._ignored_one(source)
                ended = Record(tail[0], quiet=ignored or bool(_QUIET_LEVELS.search(tail[0])))
                ended.error, ended.open = tail[1][:2000], False
                self._begin(source, ended)
            elif not out:
                self.notes.append(
                    f"`{tail[1][:60]}` names an exception, but no traceback's frames come "
                    "before it: a logged error, not an uncaught exception"
                )
        return out

    def raised(self, source: Any, line: str) -> Found | None:
        """A collective's failure -- a line the collective reader read a timeout in -- that
        stands as Python's exception line (`RuntimeError: NCCL communicator was aborted on rank
        2. Original reason for failure was: [Rank 2] Watchdog caught ...`, gloo's `RuntimeError:
        [...] Timed out waiting 1800000ms for send operation to complete`), nothing but a tag or
        markup before it: the rank raised it. Its process is dead whatever the paste lost
        before it -- its process group aborted, no collective of the rank can go on -- unlike
        another exception named without frames (a logged error). A traceback that ends in it
        says so itself."""
        record = self._records.get(source)
        if record is not None and (record.open or record.said is not None):
            return None
        tail = exception_at(line)
        if tail is None or not _BARE.match(tail[0].strip()):
            return None
        if self.notes and tail[1][:60] in self.notes[-1]:
            self.notes.pop()  # no logged error after all
        return ("component.failed", {"error": tail[1][:2000], "how": "exception"})

    def _head(self, source: Any, line: str, at: int, before: str) -> None:
        """A traceback's head: its record, at the prefix before it (before rich's panel's top
        border, whose frames are a border's width further: `tracebacks.RICH_FRAME`)."""
        prefix = line[:at]
        if (top := _RICH_TOP.search(prefix)) is not None:
            prefix = prefix[: top.start()]
        # Python's logging prints a record's traceback on the lines after its message:
        # the level is on the line before
        level = prefix if prefix.strip() else before[:80]
        uncaught = before.strip() if UNCAUGHT.match(before.strip()) else None
        ignored = self._ignored_one(source)
        if ignored or IGNORED.match(before.strip()):
            # Python reports an exception it ignored (in a `__del__`, at exit) and goes on:
            # read through, never a failure
            record = Record(prefix, quiet=True)
        elif (named := IPYTHON_HEAD.match(line)) is not None:  # the exception, on the head
            record = Record("", uncaught=named.group("name") or named.group("glued"))
        else:
            # "Scheduler hit an exception: Traceback ...": a message introduces it, and its
            # frames follow on lines of their own -- or it follows a bar's refresh
            glued = prefix.rstrip().endswith(":") or BAR_BEFORE.search(prefix) is not None
            teardown, self._teardown = self._teardown, None
            if teardown is not None and uncaught is None:
                # the first traceback after DeepSpeed's launcher killed its ranks is its own
                # `CalledProcessError` (to 0.5.7): a rank exited non-zero
                uncaught = f"{teardown} (DeepSpeed's launcher: a rank exited non-zero)"
            levels = _QUIET_LEVELS if prefix.strip() else _QUIET_BEFORE
            quiet = bool(levels.search(level)) and uncaught is None
            maybe = prefix if glued and prefix.rstrip().endswith(":") else ""
            record = Record("" if glued else prefix, quiet, uncaught, maybe=maybe)
            # the level of the line before may be another record's (an access log, a bar):
            # the traceback's own frames can still say it reached the program's top
            record.guessed = quiet and not prefix.strip()
            record.teardown = teardown is not None
            record.logged = uncaught is None and _ERROR_LEVEL.search(level) is not None
        record.headed = True
        self._begin(source, record)

    def excepthook(self, source: Any) -> None:
        """The traceback whose head the source's line just read began was written by torch's
        distributed excepthook (`tracebacks.EXCEPTHOOK`): uncaught, whatever the line before
        it said and wherever the paste cut it."""
        record = self._records.get(source)
        if record is None or not record.open or not record.headed or record.stopped:
            return
        record.hooked = True
        record.quiet = record.guessed = record.logged = False

    def _stop(self, source: Any, stop: str, record: Record | None, asked: bool = True) -> None:
        """The processes were asked to stop (`asked`), or a launcher was sent a signal from
        outside that ended the run (its line is the failure): a traceback this line ends (a
        `SignalException`, a `KeyboardInterrupt`) and every one after it is the stop's or the
        signal's, no failure -- but an exception the traceback named before it (a chain: the
        stop came while the program handled a failure) stays the source's failure."""
        self._teardown = None
        for other in self._records.values():
            if other.teardown:  # a child's, cut, between the launcher's kills and its stop
                other.quiet = other.stopped = True
        if self._stopped is None:
            self._stopped = stop
            said = (
                "the processes were interrupted (SIGINT: a user's Ctrl-C)"
                if asked
                else "a launcher was sent a signal that ended the run (its failure)"
            )
            self.notes.append(f"`{stop[:60]}`: {said}; what failed after it is its doing")
        if record is not None and record.open:
            if record.error is not None and not record.quiet:
                earlier = Record(record.prefix)
                earlier.error, earlier.open, earlier.paths = record.error, False, record.paths[:]
                self._ended[source] = earlier
            record.quiet = record.stopped = True

    def _pending(self, source: Any, error: str, component: str | None = None) -> Record:
        """A death the source may go on after: a failure if it says no more (as a traceback);
        `component` is what its signature implicates, when it names one."""
        ended = Record("", quiet=False)
        ended.error, ended.open, ended.fatal, ended.hint = error, False, True, component
        self._begin(source, ended)
        return ended

    def _restarted(self, source: Any, pod: str) -> None:
        """A row of `pod` running with every container ready, after a row of its crash: the
        kubelet's restart succeeded, and the crash's report (still pending) is taken back."""
        crashed = self._pods.get(source)
        record = None if crashed is None else crashed.pop(pod, None)
        if record is None:
            return
        if self._records.get(source) is record:
            del self._records[source]
        if self._ended.get(source) is record:
            del self._ended[source]
        self.notes.append(
            f"pod {pod[:60]} runs again with every container ready: its crash was a restart "
            "that succeeded"
        )

    def _begin(self, source: Any, record: Record) -> None:
        """A new traceback of the source: the one it ended before waits behind it."""
        before = self._records.get(source)
        if before is not None and not before.open and before.said is not None and not before.quiet:
            self._ended[source] = before
        if self._stopped is not None:
            record.quiet = record.stopped = True
        self._records[source] = record

    def waiting(self, source: Any) -> bool:
        """Whether the source ended a traceback (or a survivable death) and said nothing since
        that tells whether it went on."""
        record = self._records.get(source)
        return record is not None and not record.open and record.said is not None

    def saw(self, source: Any, line: str) -> None:
        """A line of the source nobody read: the line before its next one -- and a line
        between an exception's line and what follows (`said_just_before`), as every line
        `runwatch diagnose` reads is."""
        self._before[source] = line
        self._said.pop(source, None)

    def _ignored_one(self, source: Any) -> bool:
        """Whether the exception `source` reports now is one Python said it ignored (one
        of its `Exception ignored` lines taken)."""
        left = self._ignored.pop(source, 0)
        if left > 1:
            self._ignored[source] = left - 1
        return left > 0

    def progressed(self, source: Any) -> None:
        """The source went on working: a traceback it printed was handled, and a stop it
        printed before stopped nothing (a `KeyboardInterrupt` a loop caught)."""
        if self._stopped is not None:
            self.notes.append(f"work went on after `{self._stopped[:60]}`: no stop after all")
            self._stopped = None
        self._ended.pop(source, None)
        if source != self._ignored_now:
            self._ignored.pop(source, None)
        record = self._records.get(source)
        if record is not None and not record.open:
            del self._records[source]
            if record.said is not None and not record.quiet:
                self.notes.append(
                    f"the traceback ending `{record.said[:60]}` was handled: its process "
                    "went on working after it (a step, a bar, engine stats)"
                )

    def job_went_on(self, source: Any) -> None:
        """The job made a step (`source` printed it): what a Ray worker logged at ERROR with
        its traceback, another process than the one that went on, was a report. A Ray
        worker's exception is carried to its caller (`_raylet.pyx` `store_task_errors` stores
        it as the task's `RayTaskError`; the worker prints nothing of it and lives on), so
        its own console shows a traceback only when its code logs one -- and whether the
        job survived is the caller's to say: a step after it says it did. A worker's death
        is said by Ray's own lines (the catalogue's), and an unlogged traceback (a thread's
        death, Python's own report) keeps waiting on its own source."""
        for other, record in list(self._records.items()):
            if other == source or not isinstance(other, tuple) or other[:1] != ("ray",):
                continue
            said = record.error
            if not record.logged or said is None or record.quiet:
                continue  # (one still open has read its exception line: its chain may go on)
            del self._records[other]
            self._ended.pop(other, None)
            self.notes.append(
                f"the traceback ending `{said[:60]}` was logged at ERROR by a Ray worker "
                "and the job made a step after it: a report, its caller went on"
            )

    def quiet(self) -> list[tuple[Any, Found]]:
        """The output went quiet with the process still running (`runwatch watch` on a hung
        job: one rank died, the others wait in a collective): each source whose last word
        was an uncaught traceback (or a death it may survive) failed -- decided now, as the
        output's end would, and once. A source that goes on after all shows progress, which
        lets its alert go; the rest wait for more, or for the end. A traceback cut in its
        frames is decided too, as `runwatch diagnose` decides it at a file's end: no process
        pauses that long inside a traceback it is printing. Its record stays open and
        reported (`quiet`): should the rest of it come after all, it is read into it, not
        said a second time."""
        out = []
        for source, record in list(self._records.items()):
            cut = record.cut
            if (found := self._decided(source, record)) is None:
                continue
            out.append((source, found))
            self._ended.pop(source, None)  # the earlier record it may name is said too
            if cut:
                record.quiet = record.reported = True  # open: its rest is read, not said
            else:
                del self._records[source]
        return out

    def _last_word(self, source: Any, record: Record) -> Record:
        """The record that names the source's last word: its last traceback, or -- when that
        one names nothing (cut, logged or not) or was the stop's -- the one it ended before,
        after which the source made no progress."""
        earlier = self._ended.get(source)
        if (record.said is None or record.stopped) and earlier is not None:
            return earlier
        return record

    def _decided(self, source: Any, record: Record) -> Found | None:
        """The failure a source's last traceback says, if it says one."""
        record = self._last_word(source, record)
        if record.caught_where_raised and not record.quiet:
            record.quiet = True  # said once: `finish` words no other note for it
            self.notes.append(
                f"the traceback ending `{(record.said or '')[:60]}` was logged at ERROR with one "
                "frame: raised and caught in one function, a handler's report"
            )
            return None
        if (said := record.said) is not None and not record.quiet:
            how = "fatal" if record.fatal else "exception"
            fields: dict[str, Any] = {"error": said, "how": how}
        elif record.cut:
            # the output ended (or went quiet) inside the traceback's frames: nothing handled
            # it, and the process printed nothing after -- cut before its exception line, it
            # was the process's last word all the same (a cut record has a frame: `Record.cut`)
            if record.paths:
                fields = {"error": f"{CUT} (last frame: {record.paths[-1][-120:]})"}
            else:  # (torch's excepthook's head alone: `Record.cut`)
                fields = {"error": f"{EXCEPTHOOK_SAYS}, cut after its head"}
            fields["how"] = "exception"
        else:
            return None
        if (component := record.component()) is not None:
            fields["component"] = component  # a hint, as a fatal line's
        return ("component.failed", fields)

    def finish(self) -> list[tuple[Any, Found]]:
        """The output ended: each source's last traceback was its last word."""
        out = []
        for source, record in self._records.items():
            if (found := self._decided(source, record)) is not None:
                out.append((source, found))
                continue
            record = self._last_word(source, record)
            said = record.said
            if said is not None and record.stopped:
                pass  # the stop's, said once (`_stop`)
            elif record.caught_where_raised or record.reported:
                pass  # said by `_decided`, or at a quiet (`quiet`)
            elif said is not None:
                self.notes.append(
                    f"the traceback ending `{said[:60]}` was logged as a warning, or Python "
                    "said it ignored it (`Exception ignored in: ...`)"
                )
            elif record.paths:
                self.notes.append(
                    "a traceback ends before its exception line and its source printed more "
                    "after it (or it was logged as a warning): no failure to name"
                )
        if self._teardown is not None and not out and not self._told:
            out.append((self._teardown_source, _torn_down(self._teardown)))
        self._records.clear()
        self._ended.clear()
        self._pods.clear()
        self._ignored.clear()
        self._said.clear()
        self._stopped = self._teardown = None
        self._told = False
        return out


def _torn_down(line: str) -> Found:
    """DeepSpeed's launcher killed its ranks and the output ended with neither its stop's
    line nor a failure said: it does so only when a rank exited non-zero or a signal ended
    the run (`exits.TEARDOWN`), and a user's Ctrl-C writes its stop right after -- the line
    that said which (a rank's error, `exits with return code`) was not kept."""
    said = "DeepSpeed's launcher killed its ranks: a rank failed or a signal ended the run"
    error = f"{line[-300:]} ({said})"
    return ("component.failed", {"error": error, "how": "fatal", "component": "trainer"})


def _indented_after(before: str, prefix: str) -> bool:
    """Whether the line before is the prefix's code line: the same prefix (digits free),
    then indentation."""
    m = re.match(re.sub(r"\d+", lambda _: r"\d+", re.escape(prefix)), before)
    return m is not None and before[m.end() : m.end() + 1] in (" ", "\t")


#: the bottom border of rich's traceback panel (rich/traceback.py renders the frames in a
#: `Panel`, ROUNDED box by default, SQUARE where a legacy terminal lacks its corners), after
#: which it prints the exception line unboxed
_PANEL_BOTTOM = re.compile(r"^\s*[╰└]─{8,}[╯┘]\s*$")


#: the top border of rich's traceback panel before its title (`╭───── Traceback (most recent
#: call last) ─────╮`, rich/traceback.py's Panel)
_RICH_TOP = re.compile(r"╭─*\s*$")


def _panel_after(before: str, prefix: str) -> bool:
    """Whether the line before is the bottom of rich's traceback panel under the same prefix
    (digits free): the exception line after it ends an uncaught exception's report, as a
    frame's code line does Python's."""
    if "─" not in before:
        return False
    m = re.match(re.sub(r"\d+", lambda _: r"\d+", re.escape(prefix)), before)
    return m is not None and _PANEL_BOTTOM.match(before[m.end() :]) is not None


def _alone(prefix: str, line: str) -> bool:
    """Whether an exception line stands as Python prints the last line of an uncaught
    exception's report -- at the line's start, nothing but markup or one tag before it
    (`RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer`) -- though
    the paste lost its frames: pending like any traceback's end, it is the process's death if
    the source says no more (the end of a console), a logged error if it goes on. A warning's
    category is none."""
    if not _BARE.match(prefix.strip()) or line.split(":", 1)[0].endswith("Warning"):
        return False
    return not clean_exit(line)  # `RuntimeError: Process X died with exit code 0`: it ended well


def _qualified(prefix: str, line: str) -> bool:
    """Whether an exception line stands alone and names its exception with its module
    (`tracebacks.QUALIFIED`), or as TensorFlow 1 ends an op error's report (`SEE_ABOVE`): the
    last line of the report of an uncaught exception whose frames the output lost. A
    warning's category is no failure."""
    if prefix.strip() or (QUALIFIED.match(line) is None and SEE_ABOVE not in line.split(":")[0]):
        return False
    name = line.split(":", 1)[0]
    return not name.endswith("Warning")
