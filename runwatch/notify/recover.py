"""What a crash left in flight, found: messages (and edits) begun in the ledger but not
recorded, looked for in Slack by the transition ids their metadata carries, and recorded as
their sending would have -- or left to be sent again when not found.

Every message of ours carries `metadata`: the ids of every transition it shows (`alert_ids`;
`alert_id`, the latest) and, when it shows one, that transition (brief). Slack's history holds
a channel's top-level messages (roots), a thread's replies come from conversations.replies;
an edit is looked for from the edited message's own time on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runwatch.exceptions import SlackError
from runwatch.notify.outcome import Outcome
from runwatch.notify.slack import SlackPoster
from runwatch.notify.store import NotifyStore
from runwatch.notify.threads import After, after, brief, new_thread
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert

log = logging.getLogger("runwatch.notify")

METADATA_TYPE = "runwatch_alert"


class Recovery:
    """`Notifier.recover`'s work: the ledger's pending rows checked against Slack."""

    def __init__(
        self,
        poster: SlackPoster,
        store: NotifyStore,
        clock: Callable[[], float],
        channel_id: Callable[[str], str | None],
    ) -> None:
        self.poster = poster
        self.store = store
        self.clock = clock
        self._channel_id = channel_id

    def recover(self) -> int:
        """After a crash: for messages begun but not recorded, ask Slack whether they arrived
        (by the alert ids in their metadata): a root in the channel's history, a reply in its
        thread's replies (Slack's history holds no replies). Found: recorded as sending would
        have, not sent again. Not found: left to be sent when the transition is seen again.
        Returns how many transitions were found."""
        found = 0
        looked: dict[tuple[str, str | None, float], list[dict[str, Any]] | None] = {}
        for p in self.store.pending():
            where = (p.channel, p.thread_ts, p.at)
            if where not in looked:  # one look per message begun (a fold shows several)
                looked[where] = self._look(p.channel, p.thread_ts, p.at)
            messages = looked[where]
            hit = next((m for m in messages or () if p.id in metadata_ids(m)), None)
            if hit is None:
                self.store.drop_pending(p.id)
                continue
            found += 1
            if p.after is not None:
                self._adopt_after(p.id, p.after, str(hit.get("ts")))
            else:
                self._adopt(p.id, p.key, self._channel_id(p.channel) or p.channel, hit)
        return found

    def _look(self, channel: str, thread_ts: str | None, at: float) -> list[dict[str, Any]] | None:
        try:
            ident = self._channel_id(channel)
            if ident is None:
                raise SlackError("conversations.list", f"no channel {channel} the bot can see "
                                 "(scope channels:read?)", retryable=False)  # fmt: skip
            if thread_ts:
                return self.poster.replies(ident, thread_ts, at - 5)
            return self.poster.history(ident, at - 5)
        except SlackError as err:
            log.warning("cannot check %s for an unrecorded message: %s (it may be posted "
                        "again)", channel, err.error)  # fmt: skip
            return None

    def _adopt_after(self, ident: str, effect: After, ts: str) -> None:
        """A message (or edit) that reached Slack before a crash: recorded as its sending
        would have recorded it."""
        message = effect.message
        if message is not None and not message.ts:
            message = dataclasses.replace(message, ts=ts)
        self.store.sent_and_thread(ident, effect.what, effect.thread, ts=ts, message=message)

    def _adopt(self, ident: str, key: str, channel: str, message: Mapping[str, Any]) -> None:
        """A message from before the ledger kept what sending makes of it: a root makes its
        thread; a reply or a fold updates its thread as its sending would have."""
        payload = (message.get("metadata") or {}).get("event_payload") or {}
        try:
            carried = Alert.from_dict(payload["alert"]) if "alert" in payload else None
        except InvalidAlert:
            carried = None  # not one of ours that can be rebuilt: recorded as sent only
        thread, ts = self.store.thread(key), str(message.get("ts"))
        if thread is None and not message.get("thread_ts") and carried:
            thread = new_thread(carried, key, channel, ts, self.clock())
            self.store.sent_and_thread(ident, "root", thread, ts=ts)
        elif thread is not None and carried is not None and carried.id == ident:
            self.store.sent_and_thread(ident, "recovered", after(thread, carried, self.clock()),
                                       ts=ts)  # fmt: skip
        else:
            self.store.mark(ident, key, "recovered", Outcome.SENT)


def metadata(ids: Sequence[str], key: str, alert: Alert | None = None) -> dict[str, Any]:
    """A message's metadata: every transition it shows (`alert_ids`; `alert_id`, the latest)
    and, when it shows one, that transition (brief), from which a restart rebuilds it."""
    payload: dict[str, Any] = {"alert_id": ids[-1], "alert_ids": list(ids), "key": key}
    if alert is not None:
        payload["alert"] = brief(alert).to_dict()
    return {"event_type": METADATA_TYPE, "event_payload": payload}


def metadata_ids(message: Mapping[str, Any]) -> set[str]:
    """The transitions a message of ours shows, by its metadata."""
    meta = message.get("metadata") or {}
    if meta.get("event_type") != METADATA_TYPE:
        return set()
    payload = meta.get("event_payload") or {}
    ids = {str(i) for i in payload.get("alert_ids") or () if i is not None}
    if payload.get("alert_id") is not None:
        ids.add(str(payload["alert_id"]))
    return ids
