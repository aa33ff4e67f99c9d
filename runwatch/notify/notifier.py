"""The Slack notifier: alert transitions in, one Slack thread per incident out.

Stages, Alertmanager-style: dedup (by transition id, in the store) → silence → route (by
run labels) → send (root message, or a reply in the incident's thread; chat.update of the
root, which names the root cause and the chain, as alerts come and go) → record. Reminders
go to the thread every `repeat_interval` while the incident is open. A transition without
an incident (from an older producer) gets a thread of its own alert key, as before.

The embedded service calls `Notifier.notify(alert)` per transition; `runwatch notify` feeds
it from the runwatch.alerts topic. Labels for routing come from the alert (`labels`: the run's
run.started labels), else from those given with it, else from what `learn_labels` recorded.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from runwatch.exceptions import SlackError
from runwatch.notify import messages as msg
from runwatch.notify.config import NotifyConfig
from runwatch.notify.slack import AUTH_ERRORS, SlackPoster, is_channel_id, load_token
from runwatch.notify.store import NotifyStore, Thread, default_path
from runwatch.stream.alerts import Alert
from runwatch.stream.exceptions import InvalidAlert
from runwatch.stream.incidents import IncidentRef
from runwatch.stream.rules.base import fmt_duration

log = logging.getLogger("runwatch.notify")

METADATA_TYPE = "runwatch_alert"


class Outcome(StrEnum):
    """What the notifier did with one transition (counted per outcome on /metrics)."""

    SENT = "sent"
    DUPLICATE = "duplicate"  # its id was handled before (a restart, a re-read)
    DISABLED = "disabled"  # Slack refused the token: nothing goes out until it is fixed
    STALE = "stale"  # older than `max_age`
    SKIPPED = "skipped"  # a severity not routed, or a resolve whose firing was never shown
    SILENCED = "silenced"
    FAILED = "failed"  # Slack refused the message itself (channel_not_found, ...)


class Notifier:
    """Turns alert transitions into Slack messages, exactly once per transition."""

    def __init__(
        self,
        config: NotifyConfig,
        poster: SlackPoster,
        store: NotifyStore,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.poster = poster
        self.store = store
        self.clock = clock
        #: set after Slack refused the token: nothing is sent (or retried) any more
        self.disabled: str | None = None
        self.sent = 0

    @classmethod
    def from_config(cls, config: NotifyConfig, **kw: Any) -> Notifier:
        """Token from config.token_file / $SLACK_BOT_TOKEN_FILE / $SLACK_BOT_TOKEN."""
        poster = SlackPoster(load_token(config.token_file), base_url=config.base_url)
        store = NotifyStore(config.state or default_path())
        return cls(config, poster, store, **kw)

    def close(self) -> None:
        self.store.close()

    # -- input -----------------------------------------------------------------------------

    def learn_labels(self, run: str, labels: Mapping[str, str]) -> None:
        if labels and self.store.labels(run) != dict(labels):
            self.store.set_labels(run, labels)

    def notify(self, alert: Alert, labels: Mapping[str, str] | None = None) -> Outcome:
        """Handle one transition; returns what happened.

        Raises SlackError (retryable) when Slack stayed unreachable through every retry:
        the caller keeps the transition and tries again later (nothing was recorded)."""
        a = alert
        ident, key = a.id, a.key
        if self.store.was_sent(ident):
            return Outcome.DUPLICATE
        if self.disabled is not None:
            return Outcome.DISABLED
        now = self.clock()
        run, rule, sev, state = a.run, a.rule, a.severity, a.state
        incident = a.incident
        # one thread per incident (its alerts are replies), else one per alert key
        thread_key = incident.id if incident is not None else key
        thread = self.store.thread(thread_key)
        if now - a.ts > self.config.max_age:
            return self._record(ident, key, state, Outcome.STALE)
        if sev not in self.config.severities:
            return self._record(ident, key, state, Outcome.SKIPPED)
        if state == "firing" and (
            self._silenced(run, rule, now)
            or (incident is not None and self._silenced(run, incident.root_rule, now))
        ):
            # a silenced firing is not shown; a resolve of a shown alert still is
            return self._record(ident, key, state, Outcome.SILENCED)
        if state == "resolved" and (thread is None or (incident and key not in thread.members)):
            if thread is not None and incident is not None and not incident.open:
                self._close(thread, a, incident, now)  # the incident's last alert: its root says so
            return self._record(ident, key, state, Outcome.SKIPPED)  # its firing was never shown
        labels = self._labels(a, labels)
        channel = (
            thread.channel if thread is not None else self.config.channel_for(labels, rule, sev)
        )
        try:
            if thread is None:
                self._send_root(a, thread_key, channel, now)
            else:
                self._send_reply(a, thread, now)
        except SlackError as err:
            return self._failed(err, ident, key, state)
        self.sent += 1
        return Outcome.SENT

    def remind(self, now: float | None = None) -> int:
        """Post a reminder in every firing thread due one; returns how many went out."""
        if self.disabled is not None or self.config.repeat_interval <= 0:
            return 0
        t = self.clock() if now is None else now
        count = 0
        for th in self.store.firing_threads():
            if t - th.last_notified < self.config.repeat_interval:
                continue
            if self._silenced(th.run, th.rule, t):
                continue
            ident = f"remind:{th.key}:{th.reminders + 1}"
            if self.store.was_sent(ident):
                continue
            text = msg.reminder(th.alert, fmt_duration(t - th.since))
            try:
                self.store.begin(ident, th.key, th.channel, thread_ts=th.ts)
                self.poster.post(
                    th.channel, text, thread_ts=th.ts, metadata=_metadata(ident, th.key)
                )
            except SlackError as err:
                if self._failed(err, ident, th.key, "reminder") is Outcome.FAILED:
                    continue
                raise
            self.store.sent_and_thread(
                ident, "reminder", _replace(th, last_notified=t, reminders=th.reminders + 1)
            )
            count += 1
        return count

    def recover(self) -> int:
        """After a crash: for messages begun but not recorded, ask Slack whether they arrived
        (by the alert id in their metadata): a root in the channel's history, a reply in its
        thread's replies (Slack's history holds no replies). Found: recorded, not sent again.
        Not found: left to be sent when the transition is seen again. Returns how many were
        found."""
        found = 0
        for p in self.store.pending():
            try:
                channel = self._channel_id(p.channel)
                if channel is None:
                    raise SlackError("conversations.list", f"no channel {p.channel} the bot "
                                     "can see (scope channels:read?)", retryable=False)  # fmt: skip
                if p.thread_ts:
                    messages = self.poster.replies(channel, p.thread_ts, p.at - 5)
                else:
                    messages = self.poster.history(channel, p.at - 5)
            except SlackError as err:
                log.warning("cannot check %s for an unrecorded message: %s (it may be posted "
                            "again)", p.channel, err.error)  # fmt: skip
                self.store.drop_pending(p.id)
                continue
            hit = next((m for m in messages if _metadata_id(m) == p.id), None)
            if hit is None:
                self.store.drop_pending(p.id)
                continue
            found += 1
            self._adopt(p.id, p.key, channel, hit)
        return found

    def _channel_id(self, channel: str) -> str | None:
        """The ID of a channel named in the config (`#rl-alerts`), looked up once
        (conversations.list) and kept in the ledger; an ID as it is."""
        if is_channel_id(channel):
            return channel
        known = self.store.channel_id(channel)
        if known is None:
            known = self.poster.channel_id(channel)
            if known is not None:
                self.store.set_channel_id(channel, known)
        return known

    def _target(self, channel: str) -> str:
        """Where to post: the channel's ID when known (chat.postMessage also takes a name,
        and its answer then tells the ID, which is kept)."""
        if is_channel_id(channel):
            return channel
        return self.store.channel_id(channel) or channel

    # -- stages ----------------------------------------------------------------------------

    def _silenced(self, run: str, rule: str, now: float) -> bool:
        return any(s.matches(run, rule, now) for s in self.store.silences(now))

    def _labels(self, a: Alert, given: Mapping[str, str] | None) -> dict[str, str]:
        if a.labels:  # the run's labels, carried on the alert
            return dict(a.labels)
        from_alert = a.details.get("labels")
        if isinstance(from_alert, Mapping):
            return {str(k): str(v) for k, v in from_alert.items()}
        if given is not None:
            return dict(given)
        return self.store.labels(a.run)

    def _send_root(self, a: Alert, thread_key: str, channel: str, now: float) -> None:
        ident = a.id
        link = self.config.drilldown(a.run, a.since)
        thread = _new_thread(a, thread_key, "", "", now)
        if a.incident is not None:
            text, blocks = msg.incident_root(a, thread.members, a.incident, link)
        else:
            text, blocks = msg.root(a, link)
        target = self._target(channel)
        self.store.begin(ident, thread_key, target)
        meta = _metadata(ident, thread_key, _brief(a))
        resp = self.poster.post(target, text, blocks, metadata=meta)
        ts = str(resp.get("ts"))
        channel_id = str(resp.get("channel") or target)
        if channel_id != target and is_channel_id(channel_id):
            self.store.set_channel_id(channel, channel_id)  # the name's ID, for good
        thread = _replace(thread, channel=channel_id, ts=ts)
        self.store.sent_and_thread(ident, "root", thread, ts=ts)

    def _send_reply(self, a: Alert, th: Thread, now: float) -> None:
        if self._foldable(a, th) and self._fold(a, th, now):
            return
        ident, incident = a.id, a.incident
        text = msg.incident_reply(a, incident.role) if incident else msg.reply(a)
        self.store.begin(ident, th.key, th.channel, thread_ts=th.ts)
        resp = self.poster.post(th.channel, text, thread_ts=th.ts,
                                metadata=_metadata(ident, th.key, _brief(a)))  # fmt: skip
        updated = _after(th, a, now)
        self.store.sent_and_thread(ident, "reply", updated, ts=str(resp.get("ts")))
        self._edit_root(updated, a)

    # -- a quick resolve, folded into its firing's message ---------------------------------

    def _foldable(self, a: Alert, th: Thread) -> bool:
        """A resolve within `fold_within` of its firing, whose message is known -- unless
        the run's end resolved it (contract §8: a crash always reaches Slack as both)."""
        if a.firing or self.config.fold_within <= 0:
            return False
        if a.details.get("reason") == "run_finished":
            return False
        firing = _firing_of(a, th)
        if firing is None or a.ts - firing.ts > self.config.fold_within:
            return False
        return self.store.message_ts(firing.id) is not None

    def _fold(self, a: Alert, th: Thread, now: float) -> bool:
        """Edit the firing's message (the thread's root, or its reply) to show the resolve
        too, with the resolve's metadata (so a crash mid-fold is found again, as a post is);
        False when Slack will not take the edit (the message deleted, say): then a reply."""
        firing = _firing_of(a, th)
        target = self.store.message_ts(firing.id) if firing is not None else None
        if firing is None or target is None:
            return False
        updated = _after(th, a, now)
        is_root = target == th.ts
        if is_root:
            text, blocks = msg.with_fold(*self._root_view(updated, a), firing, a)
        else:
            role = a.incident.role if a.incident is not None else "root"
            text, blocks = msg.folded_reply(firing, a, role), None
        # an edit is looked for from the edited message's time on (its ts), not the edit's
        self.store.begin(a.id, th.key, th.channel, thread_ts=None if is_root else th.ts,
                         since=_seconds(target))  # fmt: skip
        try:
            self.poster.update(th.channel, target, text, blocks,
                               metadata=_metadata(a.id, th.key, _brief(a)))  # fmt: skip
        except SlackError as err:
            if err.retryable or err.error in AUTH_ERRORS:
                raise
            log.warning("could not fold the resolve of %s into its message (%s): a reply "
                        "instead", a.key, err.error)  # fmt: skip
            self.store.drop_pending(a.id)
            return False
        self.store.sent_and_thread(a.id, "fold", updated, ts=target)
        if not is_root:
            self._edit_root(updated, a)
        return True

    # -- the root message, re-rendered -----------------------------------------------------

    def _root_view(self, th: Thread, last: Alert) -> tuple[str, msg.Blocks]:
        """What the thread's root message shows after transition `last`."""
        link = self.config.drilldown(th.run, th.since)
        incident = last.incident
        if incident is not None:
            if th.state == "firing":
                return msg.incident_root(th.alert, th.members, incident, link)
            return msg.incident_resolved(last, th.alert, th.members, link)
        if not last.firing:
            return msg.resolved_root(last, th.alert, link)
        return msg.root(last, link)

    def _edit_root(self, th: Thread, last: Alert) -> None:
        """Re-render the root message (cosmetic: the replies carry the news)."""
        text, blocks = self._root_view(th, last)
        try:
            self.poster.update(th.channel, th.ts, text, blocks)
        except SlackError as err:
            log.warning("could not edit the root message of %s: %s", th.key, err.error)

    def _close(self, th: Thread, last: Alert, incident: IncidentRef, now: float) -> None:
        """An incident closed on a transition not shown (its firing was silenced)."""
        closed = _replace(th, state="resolved", last_notified=now)
        self.store.resolve_thread(th.key)  # just the thread's state: no message of its own
        self._edit_root(closed, last)

    def _record(self, ident: str, key: str, what: str, outcome: Outcome) -> Outcome:
        self.store.mark(ident, key, what, outcome)
        return outcome

    def _failed(self, err: SlackError, ident: str, key: str, what: str) -> Outcome:
        if err.error in AUTH_ERRORS:
            # nothing can be sent with this token; keep the transition for after the fix
            self.store.drop_pending(ident)
            self.disabled = err.error
            log.error(
                "Slack refused the bot token (%s): notifications are off until the "
                "token is fixed and the notifier restarted",
                err.error,
            )
            raise err
        if err.retryable:
            self.store.drop_pending(ident)
            raise err
        log.error("alert %s (%s) not sent to Slack: %s", ident, key, err.error)
        return self._record(ident, key, what, Outcome.FAILED)

    def _adopt(self, ident: str, key: str, channel: str, message: Mapping[str, Any]) -> None:
        """A message that reached Slack before a crash: record it as if just sent -- a root
        makes its thread; a reply or a fold updates its thread as its sending would have."""
        payload = (message.get("metadata") or {}).get("event_payload") or {}
        try:
            carried = Alert.from_dict(payload["alert"]) if "alert" in payload else None
        except InvalidAlert:
            carried = None  # not one of ours that can be rebuilt: recorded as sent only
        thread, ts = self.store.thread(key), str(message.get("ts"))
        if thread is None and not message.get("thread_ts") and carried:
            thread = _new_thread(carried, key, channel, ts, self.clock())
            self.store.sent_and_thread(ident, "root", thread, ts=ts)
        elif thread is not None and carried is not None and carried.id == ident:
            self.store.sent_and_thread(ident, "recovered", _after(thread, carried, self.clock()),
                                       ts=ts)  # fmt: skip
        else:
            self.store.mark(ident, key, "recovered", Outcome.SENT)


def _metadata(ident: str, key: str, alert: Alert | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"alert_id": ident, "key": key}
    if alert is not None:
        payload["alert"] = alert.to_dict()
    return {"event_type": METADATA_TYPE, "event_payload": payload}


def _metadata_id(message: Mapping[str, Any]) -> str | None:
    meta = message.get("metadata") or {}
    if meta.get("event_type") != METADATA_TYPE:
        return None
    ident = (meta.get("event_payload") or {}).get("alert_id")
    return str(ident) if ident is not None else None


def _firing_of(a: Alert, th: Thread) -> Alert | None:
    """The firing of `a`'s alert as its thread shows it, if it is firing there."""
    firing = th.members.get(a.key) if a.incident is not None else th.alert
    return firing if firing is not None and firing.firing and firing.key == a.key else None


def _seconds(ts: str) -> float | None:
    try:
        return float(ts)
    except ValueError:
        return None


def _after(th: Thread, a: Alert, now: float) -> Thread:
    """A thread after transition `a` was shown in it."""
    if a.incident is not None:
        return _in_incident(th, a, a.incident, now)
    if not a.firing:
        return _replace(th, state="resolved", last_notified=now)
    return _replace(th, state="firing", since=a.since, summary=a.summary, alert=a,
                    last_notified=now, reminders=0)  # fmt: skip


def _brief(a: Alert) -> Alert:
    """What a thread keeps of a transition (and a root message's metadata carries): the
    alert less its details, labels and breaker policy."""
    return dataclasses.replace(a, details={}, labels={}, action=None)


def _in_incident(th: Thread, a: Alert, incident: IncidentRef, now: float) -> Thread:
    """An incident's thread after transition `a`: its alerts, its root, open or closed."""
    members = dict(th.members)
    if a.firing:
        members[a.key] = _brief(a)
    elif a.key in members:  # keeps the firing's summary, marked resolved
        members[a.key] = dataclasses.replace(members[a.key], state="resolved")
    if incident.root == a.key and a.firing:
        root = a
    elif incident.root == th.alert.key:
        root = th.alert
    else:
        root = members.get(incident.root, th.alert)
    return _replace(
        th,
        state="firing" if incident.open else "resolved",
        rule=root.rule,
        since=root.since,
        summary=root.summary,
        alert=root,
        members=members,
        last_notified=now,
        reminders=0 if a.firing else th.reminders,
    )


def _new_thread(a: Alert, key: str, channel: str, ts: str, now: float) -> Thread:
    return Thread(
        key=key,
        channel=channel,
        ts=ts,
        run=a.run,
        rule=a.rule,
        severity=a.severity,
        state=a.state,
        since=a.since,
        summary=a.summary,
        alert=a,
        last_notified=now,
        reminders=0,
        members={a.key: _brief(a)} if a.incident is not None else {},
    )


def _replace(th: Thread, **changes: Any) -> Thread:
    return dataclasses.replace(th, **changes)
