"""Python tracebacks read by their grammar, not by a marker (issue 41 item 3).

A traceback is frames -- `  File "...", line N, in f`, each with its code line (and Python
3.11+'s `^^^^` / `~~~^^^` lines, 3.13's `...<5 lines>...`) -- ending in an unindented
exception line: `RuntimeError: ...`, `ray.exceptions.RayTaskError(IndexError): ...`. It is
read as one whether or not its head (`Traceback (most recent call last):`) survived a paste,
under any prefix its logger or launcher puts before each line (the first frame's, digits
free, is the record's: vLLM's `ERROR 04-28 02:37:03 [core.py:398] `, ` | [Stage-1] ERROR ...`),
through blank lines and the timestamps a log viewer interleaves, and through a terminal's
padding (a line padded to the terminal's width with the next glued after it is split at the
padding). Chained tracebacks (`During handling of the above exception ...`, Ray's remote
traceback after its `RayTaskError(...)` line) are one record: the last exception line wins.

Python's own reports of an uncaught exception say so before the traceback -- `Exception in
thread NAME:` (threading's excepthook), `Process NAME:` (a multiprocessing child) -- and
IPython names the exception on the head line (`RuntimeError    Traceback (most recent call
last)`): such a traceback is uncaught even when the paste cut its exception line.

What the record says of its process (a pending failure, a warning) is `Failures`'
(emitters/failures.py) to decide.
"""

from __future__ import annotations

import re

TRACEBACK = "Traceback (most recent call last)"
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
#: TensorFlow 1's op errors end the report of an uncaught one with their name and these words
#: (`InvalidArgumentError (see above for traceback): ...`), after the op's creation frames
SEE_ABOVE = " (see above for traceback)"
_SEE_ABOVE = r"(?: \(see above for traceback\))?"
_EXCEPTION = (
    r"(?P<name>(?:[A-Za-z_][\w]*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Iteration|"
    r"Warning|Dead|Timeout|Failure|Fault|Abort|Killed)|Exception)(?:\([\w.]*\))?)"
    rf"{_SEE_ABOVE}(?::(?:\s.*)?|\s*)$"
)
#: an exception line: the exception's (dotted) name, then `: message` or nothing
EXCEPTION = re.compile("^" + _EXCEPTION)
#: the exception line of a traceback whose frames came before it, whatever its class's name
#: ends in (torch's `torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:`,
#: triton's `triton.runtime.errors.OutOfResources: out of resource: ...`): Python's
#: `traceback.format_exception_only` writes the class's name qualified by its module (unless
#: builtins or `__main__`), then `: message` or nothing. A name so qualified, or a compound
#: CamelCase one before a colon (a script's own class), ends the frames; a word of a line
#: another writer put between them (`Epoch: 3`, `loss: nan`) does not
NAMED = re.compile(
    r"^(?:(?:[A-Za-z_]\w*\.)+[A-Z]\w*(?:\([\w.]*\))?(?::(?:\s.*)?)?"
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+(?:\([\w.]*\))?:(?:\s.*)?)$"
)
_SUFFIX = re.compile(
    r"(?:Error|Exception|Exit|Interrupt|Iteration|Warning|Dead|Timeout|Failure|Fault|Abort"
    rf"|Killed)(?:\([\w.]*\))?{_SEE_ABOVE}(?::|\s*$)"
)
#: a frame and its file, after a prefix and indentation (a paste can lose them)
FRAME = re.compile(r'(?:^|(?<=\s))File "(?P<path>[^"\n]+)", line \d+')
#: ... as rich draws it in its traceback panel (rich/traceback.py `_render_stack`: the file,
#: `:`, the line, ` in `, the function -- or `in f:N` where the file is gone -- between the
#: panel's `│` borders -- the right one gone where a terminal's padding split the line; a path
#: wider than the panel wraps, its last piece before `:N in f`)
RICH_FRAME = re.compile(r"│ (?:(?P<path>[^\s│]+):\d+ in [^\s│]+|in [^\s│]+:\d+)\s*│?$")
#: faulthandler's frame (`  File "x.py", line 10 in main`: no comma before `in`), in its dump
#: of every thread's stack -- a dump, not an exception: a fatal signal's dump says so on its
#: own line (`Fatal Python error: ...`, the catalogue's), a timeout's (`dump_traceback_later`)
#: may be followed by more work
DUMP_FRAME = re.compile(r'File "[^"\n]+", line \d+ in ')
#: the head of a stack read most recent call first -- a dump, never Python's report of an
#: exception ("most recent call last"): faulthandler's (Python/traceback.c) and gdb's `py-bt`
#: (Tools/gdb/libpython.py `PyBacktrace`), whose frames carry Python's comma; between the head
#: and its first `File` frame gdb writes its C frames (`  <built-in method allreduce of
#: PyCapsule object at remote 0x7f...>`, `  Waiting for the GIL`, `  Garbage-collecting`)
DUMP_HEAD = "Traceback (most recent call first):"
#: gdb's lines for a frame that is no Python code's (a pattern's alternatives, for stalls.py too)
DUMP_C_WORDS = (
    r"<[^<>\n]*>|Waiting for the GIL|Garbage-collecting|\((?:unable to read python frame "
    r"information|not a python frame|frame information optimized out)\)"
)
DUMP_C_FRAME = re.compile(rf"^\s+(?:{DUMP_C_WORDS})\s*$")
#: a frame of code that never catches: runpy's for `python -m`, or the module code of an installed
#: console script (pip's wrapper in `bin/`, `Scripts\`: `sys.exit(main())`). A traceback that
#: holds one reached the program's top uncaught (a logger's starts at the frame that caught
#: it); a script's own `<module>` may be a loop that catches and logs, so it says nothing
TOP_FRAME = re.compile(
    r'(?:runpy\.py", line \d+, in _run_module_as_main|[/\\](?:bin|Scripts)[/\\][^/\\"]+", '
    r"line \d+, in <module>)\s*$"
)
#: Python's words for an exception nobody caught, on the line before its traceback
UNCAUGHT = re.compile(r"^(?:Exception in thread .+|Process [\w.:-]+):\s*$")
#: torch.distributed's excepthook (pytorch/pytorch torch/distributed/distributed_c10d.py
#: `init_process_group`, as stored at 0034a6dc: `excepthook_prefix = f"[rank{get_rank()}]"`,
#: then `_distributed_excepthook` writes what the previous `sys.excepthook` wrote with
#: `f"{excepthook_prefix}: {s}"` before each line): Python calls `sys.excepthook` only for an
#: exception that reached the top of the main thread uncaught -- a logger's traceback and a
#: thread's (`threading.excepthook`) never pass through it -- so a head under this prefix is
#: an uncaught exception's report, however early a paste cut it. (The rank's C++ log lines
#: carry `[rankN]:` glued to glog's `[E1115 ...`, with no space.)
EXCEPTHOOK = re.compile(r"\[rank\d+\]: Traceback \(most recent call last\):")
#: what a failure says of such a report cut before its exception line
EXCEPTHOOK_SAYS = "an uncaught exception (torch.distributed's excepthook printed its report)"
#: Python's words for an exception it ignored and went on after, on the line before its
#: traceback: the unraisable hook's `Exception ignored in: <function X.__del__ ...>` (and its
#: other `Exception ignored ...` messages; CPython's Python/errors.c)
IGNORED = re.compile(r"^Exception ignored\b")
#: the same report glued after another writer's unfinished line (a tqdm bar's postfix cut
#: before its `]`): the hook writes `Exception ignored in: <obj>` in one go, wherever the
#: cursor stood
IGNORED_GLUED = re.compile(r"(?<=\S)Exception ignored in: ")
#: logging's head of a record's `stack_info` (CPython Lib/logging/__init__.py `findCaller`:
#: "Stack (most recent call last):" then `traceback.print_stack`): frames of a stack the
#: program printed and went on from, no exception's
STACK_HEAD = "Stack (most recent call last):"
_NAME = r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*"
#: IPython's head: the exception's name, padding, then the head -- or the name glued to it
#: where a paste lost the padding (`NanLossDuringTrainingErrorTraceback (most recent ...`)
IPYTHON_HEAD = re.compile(
    rf"^(?:(?P<name>{_NAME})\s{{2,}}|(?P<glued>{_NAME}(?:Error|Exception|Exit|Interrupt)))"
    r"Traceback \(most"
)
#: IPython's frames: `Cell In[19], line 13`, `File ~/x/trainer.py:2245, in Trainer.train(...)`,
#: older IPython's `<ipython-input-43-2f65d1e5e9c4> in <module>()` and `/x/estimator.py in
#: train(self, input_fn)`, its arrows `---> 13 trainer.train()` and `(...)` for lines left out
_IPYTHON_FRAME = re.compile(
    r"^(?:Cell In\[\d+\], line \d+|File \S+:\d+, in |-+> |\(\.\.\.\)"
    r"|(?:<ipython-input-[\w-]+>|\S+\.pyc?) in \S+\()"
)
#: an exception named with its module (`tensorflow.python.training.basic_session_run_hooks.
#: NanLossDuringTrainingError: ...`, `ray.exceptions.RayTaskError(...)`): how Python's
#: traceback printer ends an uncaught exception's report, not how a program logs an error
QUALIFIED = re.compile(r"^(?:[a-z_][a-z0-9_]*\.)+[A-Z]\w*")
#: a terminal's padding to its width, with what came next glued after it
PADDING = re.compile(r"(?<=\S) {16,}(?=\S)")
#: a line that is only a time (a log viewer's own, between the lines it shows)
_TIME_ONLY = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?$")
#: the component a frame's file implicates (the innermost frame with one wins): the engines
#: are inference, the trainers train
PATH_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("/vllm/", "inference"), ("/vllm_ascend/", "inference"), ("/sglang/", "inference"),
    ("/tensorrt_llm/", "inference"), ("/lmdeploy/", "inference"),
    ("/verl/", "trainer"), ("/openrlhf/", "trainer"), ("/trl/", "trainer"),
    ("/areal/", "trainer"), ("/slime/", "trainer"), ("/nemo_rl/", "trainer"),
    ("/skyrl_train/", "trainer"), ("/roll/", "trainer"), ("/swift/", "trainer"),
    ("/llamafactory/", "trainer"), ("/deepspeed/", "trainer"), ("/megatron/", "trainer"),
    ("/transformers/", "trainer"), ("/accelerate/", "trainer"),
)  # fmt: skip
#: loguru's annotation of the values in a frame's code line (loguru/_better_exceptions.py, its
#: `_pipe_char` and `_cap_char`: `│    └ <Request [b'POST']>`), under the code line
_ANNOTATION = ("│", "└")
#: a record longer than this is given up (a loop printing frames is not a traceback)
MAX_RECORD_LINES = 2000


def _shape(prefix: str) -> re.Pattern[str]:
    """The prefix of a record's lines, its digits free (timestamps move)."""
    return re.compile(re.sub(r"\d+", lambda _: r"\d+", re.escape(prefix)))


def frame_prefix(line: str) -> tuple[str, str] | None:
    """(the prefix, the file) of a frame line: what stands before the frame's `File`, less
    the two spaces Python indents a frame by, or before rich's panel border (`RICH_FRAME`);
    None for any other line."""
    if 'File "' not in line:
        if "│" not in line or " in " not in line:
            return None
        at = line.find("│")
        rich = RICH_FRAME.match(line.rstrip(), at)
        return None if rich is None else (line[:at], rich.group("path") or "")
    frame = FRAME.search(line)
    if frame is None:
        return None
    lead = line[: frame.start()]
    if lead.strip() and len(lead) - len(lead.rstrip(" \t")) == 0:
        return None
    trim = 2 if lead.endswith("  ") else 0
    return lead[: len(lead) - trim], frame.group("path")


def exception_at(line: str) -> tuple[str, str] | None:
    """(the prefix, the exception line) of a line that ends a traceback after some prefix;
    None for a line that names no exception."""
    for suffix in _SUFFIX.finditer(line):  # where a name can end: cheap to find
        start = suffix.start()
        while start > 0 and (line[start - 1].isalnum() or line[start - 1] in "._"):
            start -= 1
        if EXCEPTION.match(line[start:]) is not None:
            return line[:start], line[start:].strip()
    return None


class Record:
    """A traceback being read, or read and waiting for its process to say more."""

    __slots__ = ("after_frame", "alt", "chained", "dumped", "error", "fatal", "guessed",
                 "headed", "hint", "hooked", "indent", "lines", "logged", "module", "open",
                 "paths", "prefix", "quiet", "reported", "shape", "stopped", "teardown",
                 "uncaught")  # fmt: skip

    def __init__(
        self, prefix: str, quiet: bool = False, uncaught: str | None = None, maybe: str = ""
    ) -> None:
        self.prefix = prefix
        self.shape = _shape(prefix)
        #: a head glued after text ending in ":" -- a message introducing it ("Scheduler hit
        #: an exception: Traceback"), or a prefix of every line (`stderr: `): the next line
        #: says which
        self.alt = _shape(maybe) if maybe else None
        self.error: str | None = None  # the exception line so far (the last one wins)
        self.lines = 0
        self.open = True  # still reading its lines
        self.quiet = quiet  # logged as a warning: read through, never a failure
        #: its level was the line before's (a record's message that may not be its own): a
        #: frame at the program's top (`TOP_FRAME`) says it was not logged but uncaught
        self.guessed = False
        self.uncaught = uncaught  # Python said it was uncaught (the line before its head)
        self.paths: list[str] = []  # its frames' files
        self.chained = False  # Python said the next traceback is chained to this one
        #: how far its first frame is indented (2, or more in a paste indented whole)
        self.indent: int | None = None
        self.after_frame = False  # the line before was a frame (its code line may follow)
        self.fatal = False  # a survivable fatal line, not an exception, holds its place
        #: the component a survivable fatal line's signature implicates (its frames have none)
        self.hint: str | None = None
        self.stopped = False  # read after (or ending in) a stop the processes were asked for
        self.teardown = False  # the first after a launcher killed its ranks (`exits.TEARDOWN`)
        self.headed = False  # its head (`Traceback (most recent call last):`) was read
        #: torch's distributed excepthook wrote its head (`EXCEPTHOOK`): uncaught, its head alone
        #: enough to say so
        self.hooked = False
        #: a logger's record at ERROR put it out (`logger.exception`: the record's level on
        #: its head's prefix or the line before), not Python's report of an uncaught one
        self.logged = False
        self.module = False  # a frame of it is a module's code (`in <module>`)
        self.dumped = False  # a frame of it was faulthandler's (`DUMP_FRAME`)
        self.reported = False  # decided cut at a quiet (`Failures.quiet`): said once

    @property
    def cut(self) -> bool:
        """Whether it is a traceback still being read, cut before its exception line: its head
        and a frame, or two frames, none of them faulthandler's (a dump of stacks is no
        exception). A head alone is too little: a held-out healthy console ends on one (a
        head-alone rule, tried, read one development failure and false-alerted there) --
        unless torch's distributed excepthook wrote it (`hooked`), which only an uncaught
        exception passes through."""
        if not self.open or self.quiet or self.said is not None or self.dumped:
            return False
        return len(self.paths) >= (0 if self.hooked else 1 if self.headed else 2)

    def more(self, line: str) -> bool:
        """Whether the line is more of this traceback (it takes what the line says)."""
        if self.alt is not None:
            if self.alt.match(line) is not None:
                self.shape = self.alt
            self.alt = None
        m = self.shape.match(line)
        if m is None:
            # blank lines in between; rich's right border, split off by a terminal's padding
            return bool(self.shape.pattern) and line.strip() in ("", "│")
        body = line[m.end() :].rstrip()
        self.lines += 1
        if self.lines > MAX_RECORD_LINES:
            self.error = self.uncaught = None
            return False
        stripped = body.strip()
        if stripped.startswith(CHAINED):
            self.chained = True
            return True
        if stripped.startswith(TRACEBACK):
            if (self.quiet and self.error is not None and not self.chained) or self.dumped:
                # a traceback of its own after one that was no failure, or after a dump
                return False
            self.chained = False
            return True
        if not stripped:
            return True
        after_frame, self.after_frame = self.after_frame, False
        if (frame := FRAME.search(body)) is not None and not body[: frame.start()].strip():
            self.paths.append(frame.group("path"))
            self.module = self.module or body.endswith("in <module>")
            self.dumped = self.dumped or DUMP_FRAME.search(body) is not None
            if self.guessed and TOP_FRAME.search(body) is not None:
                self.quiet = self.guessed = False
            if self.indent is None:
                self.indent = frame.start()
            self.after_frame = True
            return True
        if stripped[:1] == "│" and (rich := RICH_FRAME.match(stripped)) is not None:
            self.paths.append(rich.group("path") or "")  # (rich's panel: a frame of it)
            return True
        if after_frame and self.indent == 0 and EXCEPTION.match(stripped) is None:
            return True  # frames a paste left flush: the line after one is its code line
        if body[:1] in (" ", "\t") and self._outdented(body, stripped):
            # a paste indented whole (a markdown code block): the exception line is indented
            # too, less than its frames
            self.error = stripped[:2000]
            return True
        if (
            body[:1] in (" ", "\t")
            or _TIME_ONLY.match(stripped)
            or _IPYTHON_FRAME.match(body)
            or stripped[:1] in _ANNOTATION
        ):
            # a code line, carets, a Ray error's fields; a viewer's time; loguru's annotation
            # of a frame's values (a terminal's padding may have split it from its pipes)
            return True
        if EXCEPTION.match(stripped) is not None or (self.paths and NAMED.match(stripped)):
            self.error = stripped[:2000]
            return True
        return False

    def _outdented(self, body: str, stripped: str) -> bool:
        """Whether an indented line is the exception line of a traceback indented whole: two
        or more less than its frames (Python indents a frame by two), and an exception."""
        if self.indent is None or self.indent < 4:
            return False
        return len(body) - len(body.lstrip()) <= self.indent - 2 and bool(EXCEPTION.match(stripped))

    @property
    def caught_where_raised(self) -> bool:
        """Whether a logger put it out with one frame, no module's: the exception was raised
        in the function that caught it and logged it (`logger.exception` in an `except` around
        one statement: a tool call's KeyError, a parse's ValueError) -- a handler's report.
        Python's report of an uncaught exception, and a logged one that ends the program (a
        trainer's `except: logger.exception(...); raise`), run from the program's top or the
        catching function through the calls down to the raise: two frames or more."""
        return self.logged and self.error is not None and len(self.paths) == 1 and not self.module

    @property
    def said(self) -> str | None:
        """What the traceback says went wrong: its exception line, or (cut) Python's words
        that it was uncaught."""
        return self.error or self.uncaught

    def component(self) -> str | None:
        """The component its frames' files implicate (the innermost that does), or a fatal
        line's signature."""
        if self.hint is not None:
            return self.hint
        for path in reversed(self.paths):
            low = "/" + path.replace("\\", "/").lower()
            for part, component in PATH_COMPONENTS:
                if part in low:
                    return component
        return None
