"""One batch of transitions in the notifier: where each is shown, what waits for the batch's
end (the replies of a thread, sent as few messages as Slack's limits allow), the threads as
they stand meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from runwatch.notify.outcome import Outcome
from runwatch.notify.store import NotifyStore
from runwatch.notify.threads import Section, Thread
from runwatch.stream.alerts import Alert

#: At most this many transitions, and this much text, in one message (chat.update refuses a
#: text over 4,000 characters: its method reference, `msg_too_long`).
MAX_SECTIONS = 20
MAX_CHARS = 3500


@dataclass(frozen=True)
class Route:
    """Where a transition is shown: `key`, its thread; `fleet`, the fleet incident it is or
    belongs to; `own`, the run incident's own thread when it is shown elsewhere."""

    key: str
    fleet: str | None = None
    own: str | None = None


@dataclass(frozen=True)
class Staged:
    """A reply waiting for its batch's end: its place in the batch, and its thread after it."""

    index: int
    alert: Alert
    section: Section
    thread: Thread


class Batch:
    """One `notify_many`: the threads as they stand after what is staged, the replies staged
    per thread, the roots to re-render at the end, the outcomes."""

    def __init__(self, store: NotifyStore, size: int) -> None:
        self.store = store
        self.threads: dict[str, Thread | None] = {}
        self.groups: dict[str, list[Staged]] = {}
        self.dirty: dict[str, Alert] = {}  # thread key -> the transition its root shows last
        self.tracked: set[str] = set()  # threads changed with no message (own-mode counts)
        self.outcomes: list[Outcome | None] = [None] * size
        self.ids: set[str] = set()

    def thread(self, key: str | None) -> Thread | None:
        if key is None:
            return None
        if key not in self.threads:
            self.threads[key] = self.store.thread(key)
        return self.threads[key]

    def set(self, th: Thread) -> None:
        self.threads[th.key] = th


def chunks(staged: list[Staged]) -> Iterator[list[Staged]]:
    """Staged replies in messages of at most MAX_SECTIONS sections and MAX_CHARS of text."""
    chunk: list[Staged] = []
    size = 0
    for s in staged:
        grow = len(s.section.text) + 2
        if chunk and (len(chunk) >= MAX_SECTIONS or size + grow > MAX_CHARS):
            yield chunk
            chunk, size = [], 0
        chunk.append(s)
        size += grow
    if chunk:
        yield chunk
