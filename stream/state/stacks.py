"""A run's request for its processes' stacks, and the answers: evidence of a hang.

The engine asks (`ask`) when an incident opens on a hang, at most once per incident and
`PER_HOUR` times per run and hour; the run view carries the request to the emitters,
whose `process.stacks` answers land here (`answer`); the incident's end lets it go
(`clear`). Answers keep file, line and function per frame as plain tuples, at most
`MAX_ANSWERS` processes.
"""

from __future__ import annotations

from typing import Any

from runwatch.stream.state.compact import Compact, blank

PER_HOUR = 6
MAX_ANSWERS = 256

#: (file, line, function): one frame, outermost first in a thread
Frame = tuple[str, int, str]


class StackAnswer:
    """One process's answer: its threads (name, frames), or why it could not be taken."""

    __slots__ = ("error", "how", "rank", "threads", "truncated", "ts")

    def __init__(
        self,
        ts: float,
        rank: int | None,
        how: str,
        threads: list[tuple[str, list[Frame]]],
        truncated: bool,
        error: str | None,
    ) -> None:
        self.ts, self.rank, self.how = ts, rank, how
        self.threads, self.truncated, self.error = threads, truncated, error


class Stacks(Compact):
    """The run's current request (an incident id) and the processes' answers to it."""

    __slots__ = ("answers", "asked", "request", "requested_at")

    def __init__(self) -> None:
        self.request: str | None = None
        self.requested_at = float("-inf")
        self.asked: list[float] = []  # when requests went out, the last hour's
        self.answers: dict[str, StackAnswer] = {}  # process name -> its answer

    def ask(self, request: str, now: float) -> bool:
        """Ask for stacks on behalf of incident `request`; False when it was asked already
        or the run's hourly budget is spent."""
        if request == self.request:
            return False
        self.asked = [t for t in self.asked if t > now - 3600.0]
        if len(self.asked) >= PER_HOUR:
            return False
        self.asked.append(now)
        self.request, self.requested_at, self.answers = request, now, {}
        return True

    def answer(self, process: str, event: Any) -> None:
        """A `process.stacks` event of `process`: kept when it answers the current request."""
        if event.request != self.request or (
            process not in self.answers and len(self.answers) >= MAX_ANSWERS
        ):
            return
        threads = [(t.name, [(f.file, f.line, f.function) for f in t.frames])
                   for t in event.threads or ()]  # fmt: skip
        self.answers[process] = StackAnswer(event.ts, event.src.rank, event.how, threads,
                                            bool(event.truncated), event.error)  # fmt: skip

    def clear(self, request: str) -> bool:
        """The incident `request` closed: its request and answers go."""
        if self.request != request:
            return False
        self.request, self.answers = None, {}
        return True


#: every run's until it writes its own (`compact.blank`)
NO_STACKS = blank(Stacks(), "NO_STACKS")
