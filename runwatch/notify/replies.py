"""A thread's replies: staged for the batch's end and sent as few messages as Slack's
per-channel limit allows, and the one fold that edits a message of ours to show more.

A batch's replies in one thread are one message (sections, `Message`); a reply that finds
its channel's post budget spent (`runwatch.notify.pace`) is folded into the thread's latest
reply if that one is recent and has room; a quick resolve is folded into its firing's
message. Every fold is the same edit: chat.update carrying, in its metadata, the ids of every
transition the message shows, begun in the ledger (with what the thread and the message will
be) before and recorded after -- so a crash mid-post or mid-edit is found again by
`runwatch.notify.recover` and nothing is shown twice or lost.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from runwatch.emitters.events import FLEET_RUN
from runwatch.exceptions import SlackError
from runwatch.notify import messages as msg
from runwatch.notify.batch import MAX_CHARS, MAX_SECTIONS, Batch, Staged, chunks
from runwatch.notify.config import NotifyConfig
from runwatch.notify.outcome import Outcome
from runwatch.notify.recover import metadata
from runwatch.notify.slack import AUTH_ERRORS, SlackPoster
from runwatch.notify.store import NotifyStore
from runwatch.notify.threads import After, Message, Section, Thread, after, firing_of
from runwatch.stream.alerts import Alert

log = logging.getLogger("runwatch.notify")

#: A reply is folded into the thread's latest reply only if that one is this recent (s).
BURST_WINDOW = 60.0

RootView = Callable[[Thread, Alert, Batch], tuple[str, msg.Blocks]]


class Replies:
    """Stages, folds and sends replies for a `Notifier`; `root_view` renders a thread's
    root (the notifier's, which knows fleet threads)."""

    def __init__(
        self,
        config: NotifyConfig,
        poster: SlackPoster,
        store: NotifyStore,
        clock: Callable[[], float],
        root_view: RootView,
    ) -> None:
        self.config = config
        self.poster = poster
        self.store = store
        self.clock = clock
        self.root_view = root_view

    def text(self, a: Alert, th: Thread) -> str:
        """A transition as a reply in thread `th`."""
        if a.incident is None:
            return msg.reply(a)
        if th.run == FLEET_RUN and a.run != FLEET_RUN:
            return msg.member_reply(a, a.incident.role)
        return msg.incident_reply(a, a.incident.role)

    def stage(self, index: int, a: Alert, th: Thread, batch: Batch, now: float) -> bool:
        """A reply: folded into its firing's message when a quick resolve, else staged for
        the batch's end. Whether it was staged."""
        if self.foldable(a, th):
            self.flush_thread(th.key, batch)  # what the thread had staged goes first
            th = batch.thread(th.key) or th
            if self.fold(a, th, now, batch):
                return False
        updated = after(th, a, now)
        section = Section((a.id,), self.text(a, th))
        batch.groups.setdefault(th.key, []).append(Staged(index, a, section, updated))
        batch.set(updated)
        return True

    def foldable(self, a: Alert, th: Thread) -> bool:
        """A resolve within `fold_within` of its firing, whose message is known -- unless
        the end of a run that did not end `ok` resolved it (contract §8: a crash that ended
        the run always reaches Slack as both messages). A failure the run outlived to end ok
        (a traceback printed, then exit 0) folds like any quick resolve."""
        if a.firing or self.config.fold_within <= 0:
            return False
        if a.details.get("reason") == "run_finished" and a.details.get("status") != "ok":
            return False
        firing = firing_of(a, th)
        if firing is None or a.ts - firing.ts > self.config.fold_within:
            return False
        # in this thread: a run's firing shown in its own thread before the run went on in a
        # fleet thread is not edited; the resolve is a reply where the run is now
        return self.store.message_ts(firing.id, th.key) is not None

    def fold(self, a: Alert, th: Thread, now: float, batch: Batch) -> bool:
        """Edit the firing's message (the thread's root, or its reply) to show the resolve
        too; False when Slack will not take the edit (the message deleted, say): then a
        reply."""
        firing = firing_of(a, th)
        target = self.store.message_ts(firing.id, th.key) if firing is not None else None
        if firing is None or target is None:
            return False
        updated = after(th, a, now)
        message: Message | None = None
        if target == th.ts:
            text, blocks = msg.with_fold(*self.root_view(updated, a, batch), firing, a)
        else:
            blocks = None
            shown = self.store.message(th.channel, target)
            note = msg.fold_note(firing, a)
            if shown is not None:  # the section that showed the firing gets the note
                message = dataclasses.replace(shown, sections=tuple(
                    Section((*s.ids, a.id), f"{s.text}\n{note}") if firing.id in s.ids else s
                    for s in shown.sections))  # fmt: skip
                text = message.text
            else:  # a reply from before messages were kept: it showed the firing alone
                role = a.incident.role if a.incident is not None else "root"
                text = msg.folded_reply(firing, a, role)
        if not self.edit([a], th, target, text, blocks, updated, message, batch):
            return False
        if target != th.ts:
            batch.dirty[th.key] = a
        return True

    def edit(
        self,
        shown: Sequence[Alert],
        th: Thread,
        target: str,
        text: str,
        blocks: msg.Blocks | None,
        updated: Thread,
        message: Message | None,
        batch: Batch,
    ) -> bool:
        """chat.update of message `target` (the root, or a reply) to show the transitions
        `shown` too, with their ids in its metadata (so a crash mid-edit is found again, as
        a post is); False when Slack refuses the edit itself."""
        ids = [a.id for a in shown]
        carried = shown[0] if len(shown) == 1 else None
        before = self.store.shown_in(th.key, target) if message is None else []
        every = list(dict.fromkeys([*before, *ids])) if message is None else message.ids
        is_root = target == th.ts
        # an edit is looked for from the edited message's time on (its ts), not the edit's
        self.store.begin(ids, th.key, th.channel, thread_ts=None if is_root else th.ts,
                         since=_seconds(target), after=After("fold", updated, message))  # fmt: skip
        try:
            self.poster.update(th.channel, target, text, blocks,
                               metadata=metadata(every, th.key, carried))  # fmt: skip
        except SlackError as err:
            self.store.drop_pending(ids)
            if err.retryable or err.error in AUTH_ERRORS:
                raise
            log.warning("could not fold %s into its message (%s): a reply instead",
                        ", ".join(a.key for a in shown), err.error)  # fmt: skip
            return False
        self.store.sent_and_thread(ids, "fold", updated, ts=target, message=message)
        batch.set(updated)
        return True

    def flush_thread(self, key: str, batch: Batch) -> None:
        staged = batch.groups.pop(key, [])
        for chunk in chunks(staged):
            try:
                self.send(chunk, batch)
            except SlackError as err:
                if err.retryable or err.error in AUTH_ERRORS:
                    raise  # nothing of the chunk recorded: the caller gives the batch again
                rest = staged[staged.index(chunk[0]) :]
                log.error("%d transitions (%s) not sent to Slack: %s", len(rest), key, err.error)
                for s in rest:
                    a = s.alert
                    self.store.mark(a.id, a.key, a.state, Outcome.FAILED)
                    batch.outcomes[s.index] = Outcome.FAILED
                return
            batch.dirty[key] = chunk[-1].alert

    def send(self, chunk: list[Staged], batch: Batch) -> None:
        """One message for staged replies of one thread: folded into the thread's latest
        reply when the channel's post budget is spent (a burst), else posted."""
        th = chunk[-1].thread
        shown = [s.alert for s in chunk]
        ids = [a.id for a in shown]
        sections = tuple(s.section for s in chunk)
        now = self.clock()
        tail = self.store.last_message(th.key)
        if tail is not None and self.burst(tail, sections, th, now):
            folded = dataclasses.replace(tail, sections=tail.sections + sections)
            if self.edit(shown, th, tail.ts, folded.text, None, th, folded, batch):
                return
        message = Message(th.channel, "", th.key, "reply", now, sections)
        self.store.begin(ids, th.key, th.channel, thread_ts=th.ts,
                         after=After("reply", th, message))  # fmt: skip
        meta = metadata(ids, th.key, shown[0] if len(shown) == 1 else None)
        text = message.text
        resp = self.call(ids, lambda: self.poster.post(th.channel, text, thread_ts=th.ts,
                                                        metadata=meta))  # fmt: skip
        message = dataclasses.replace(message, ts=str(resp.get("ts")))
        self.store.sent_and_thread(ids, "reply", th, ts=message.ts, message=message)
        batch.set(th)

    def burst(self, tail: Message, sections: tuple[Section, ...], th: Thread, now: float) -> bool:
        """Whether replies are a burst to fold into the thread's latest reply `tail`: the
        channel's post budget is spent, the tail is a recent reply with room, and an edit
        would go out now."""
        if tail.kind != "reply" or tail.channel != th.channel or now - tail.posted > BURST_WINDOW:
            return False
        if len(tail.sections) + len(sections) > MAX_SECTIONS:
            return False
        if len(tail.text) + sum(len(s.text) + 2 for s in sections) > MAX_CHARS:
            return False
        return not self.poster.ready("chat.postMessage", th.channel) and self.poster.ready(
            "chat.update", th.channel)  # fmt: skip

    def call(self, ids: Sequence[str], send: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """A post begun for `ids`: what Slack answered; their pending rows dropped if it
        answered no (nothing was posted)."""
        try:
            return send()
        except SlackError:
            self.store.drop_pending(ids)
            raise


def _seconds(ts: str) -> float | None:
    try:
        return float(ts)
    except ValueError:
        return None
