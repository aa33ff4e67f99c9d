"""The Slack notifier: alert transitions in, one Slack thread per incident out.

Stages, Alertmanager-style: dedup (by transition id, in the store) → silence → route (by
run labels) → send (root message, or a reply in the incident's thread; chat.update of the
root, which names the root cause and the chain, as alerts come and go) → record. Reminders
go to the thread every `repeat_interval` while the incident is open. A transition without
an incident (from an older producer) gets a thread of its own alert key, as before.

Fleet incidents (contract section 8) get one thread: the fleet alert's root names the shared
cause and counts the runs, edited as they join and heal, and a member run's transitions are
replies there (`member_threads = "fleet"`) or in its own thread, whose root links to the
fleet thread (`"own"`). A member's transition that arrives before the fleet alert opens the
fleet thread with a stand-in root, which the fleet alert then edits (`threads.placeholder`).

Transitions come in batches (`notify_many`: a Kafka poll, what the service queued): the
replies of one thread in a batch go out as one message (sections), and a reply that finds
its channel's post budget spent (Slack's one message per second per channel,
`runwatch.notify.pace`) is folded into the thread's latest reply instead -- the same fold,
by chat.update carrying the shown transitions' ids in its metadata, that shows a quick
resolve in its firing's message. Every transition is shown once, in one message; the
ledger records it once, and a crash mid-post or mid-edit is found again (`recover`).

The embedded service calls `notify` / `notify_many`; `runwatch notify` feeds it from the
runwatch.alerts topic. Labels for routing come from the alert (`labels`: the run's
run.started labels), else from those given with it, else from what `learn_labels` recorded.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runwatch.emitters.events import FLEET_RUN
from runwatch.exceptions import SlackError
from runwatch.notify import messages as msg
from runwatch.notify.batch import Batch, Route
from runwatch.notify.config import NotifyConfig
from runwatch.notify.outcome import Outcome
from runwatch.notify.recover import METADATA_TYPE, Recovery, metadata
from runwatch.notify.replies import Replies
from runwatch.notify.slack import AUTH_ERRORS, SlackPoster, is_channel_id, load_token
from runwatch.notify.store import NotifyStore, default_path
from runwatch.notify.threads import (
    Message,
    Section,
    Thread,
    after,
    in_fleet,
    is_placeholder,
    new_thread,
    placeholder,
    runs_of,
)
from runwatch.stream.alerts import Alert
from runwatch.stream.rules.base import fmt_duration

log = logging.getLogger("runwatch.notify")

#: A root waiting for its edit gets chat.update's next slot, spare or not, after this (s).
ROOT_EVERY = 10.0

__all__ = ["METADATA_TYPE", "Notifier", "Outcome"]


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
        #: roots to re-render (thread key -> the transition shown last, and since when on
        #: the poster's clock), when chat.update's budget allows (`tidy`): cosmetic, so they
        #: wait rather than make the news wait -- but not for ever
        self._stale: dict[str, tuple[Alert, float]] = {}
        self.replies = Replies(config, poster, store, clock, self._root_view)

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
        """Handle one transition; returns what happened (`notify_many` of one)."""
        (outcome,) = self.notify_many([alert], labels)
        return outcome

    def notify_many(
        self, alerts: Sequence[Alert], labels: Mapping[str, str] | None = None
    ) -> list[Outcome]:
        """Handle transitions in order; what happened to each. The replies of one thread go
        out together at the end, as few messages as Slack's limits allow.

        Raises SlackError (retryable) when Slack stayed unreachable through every retry: the
        caller keeps the batch and gives it again later -- what was recorded before is a
        duplicate then, the rest goes out."""
        batch = Batch(self.store, len(alerts))
        for i, a in enumerate(alerts):
            batch.outcomes[i] = self._one(i, a, labels, batch)
        try:
            self._flush(batch)
        except SlackError as err:  # retryable, or the token refused (`_failed` says so)
            if err.error in AUTH_ERRORS:
                self._failed(err, "", "", "reply")
            raise
        outcomes = [o if o is not None else Outcome.SENT for o in batch.outcomes]
        self.sent += outcomes.count(Outcome.SENT)
        return outcomes

    def _one(
        self, index: int, a: Alert, labels: Mapping[str, str] | None, batch: Batch
    ) -> Outcome | None:
        """One transition through the stages: its outcome, or None when staged as a reply."""
        ident, key, state = a.id, a.key, a.state
        if ident in batch.ids or self.store.was_sent(ident):
            return Outcome.DUPLICATE
        if self.disabled is not None:
            return Outcome.DISABLED
        now = self.clock()
        if now - a.ts > self.config.max_age:
            return self._record(ident, key, state, Outcome.STALE)
        if a.severity not in self.config.severities:
            return self._record(ident, key, state, Outcome.SKIPPED)
        incident = a.incident
        if a.firing and (
            self._silenced(a.run, a.rule, now)
            or (incident is not None and self._silenced(a.run, incident.root_rule, now))
        ):
            # a silenced firing is not shown; a resolve of a shown alert still is
            return self._record(ident, key, state, Outcome.SILENCED)
        route = self._route(a, batch)
        thread, own = batch.thread(route.key), batch.thread(route.own)
        shown = (thread is not None and (incident is None or key in thread.members)) or (
            own is not None and key in own.members)  # fmt: skip
        try:
            if not a.firing and not shown:
                if thread is not None and incident is not None and not incident.open and (
                        route.key != route.fleet):  # fmt: skip
                    # the incident's last alert: its root says so
                    self.replies.flush_thread(thread.key, batch)
                    self._close(batch.thread(thread.key) or thread, a, batch)
                return self._record(ident, key, state, Outcome.SKIPPED)  # never shown
            batch.ids.add(ident)
            staged = self._show(index, a, route, labels, batch, now)
        except SlackError as err:
            return self._failed(err, ident, key, state)
        return None if staged else Outcome.SENT

    def _route(self, a: Alert, batch: Batch) -> Route:
        incident = a.incident
        if incident is None:
            return Route(a.key)
        if a.run == FLEET_RUN:
            return Route(incident.id, incident.id)
        own = batch.thread(incident.id)
        fleet = incident.fleet or (own.fleet if own is not None else None)
        if fleet is None:
            return Route(incident.id)
        if self.config.member_threads == "fleet":
            return Route(fleet, fleet, incident.id)
        return Route(incident.id, fleet)

    def _show(
        self,
        index: int,
        a: Alert,
        route: Route,
        labels: Mapping[str, str] | None,
        batch: Batch,
        now: float,
    ) -> bool:
        """Show a transition where `route` says; whether it was staged (else sent now)."""
        if a.run == FLEET_RUN:
            th = batch.thread(route.key)
            if th is None:
                self._send_root(a, route.key, self._fleet_channel(a.severity), now, batch)
                return False
            if is_placeholder(th) and a.firing:  # the fleet alert names the cause at last
                self.replies.flush_thread(th.key, batch)
                th = batch.thread(th.key) or th
                updated = after(th, a, now)
                text, blocks = self._root_view(updated, a, batch)
                if self.replies.edit([a], th, th.ts, text, blocks, updated, None, batch):
                    return False
            return self.replies.stage(index, a, th, batch, now)
        if route.fleet is not None:
            fleet = self._fleet_thread(route.fleet, a, batch, now)
            if route.own is not None:  # member_threads = "fleet": the fleet thread is its own
                own = batch.thread(route.own)
                if own is not None and own.fleet is None:
                    fleet = self._move(own, fleet, batch)
                return self.replies.stage(index, a, fleet, batch, now)
            self._track(fleet, a, batch, now)
        th = batch.thread(route.key)
        if th is None:
            channel = self.config.channel_for(self._labels(a, labels), a.rule, a.severity)
            self._send_root(a, route.key, channel, now, batch)
            return False
        if route.fleet is not None and th.fleet is None:  # linked to the fleet thread from now
            th = dataclasses.replace(th, fleet=route.fleet)
            self.store.put_thread(th)
            batch.set(th)
            batch.dirty.setdefault(th.key, th.alert)
        return self.replies.stage(index, a, th, batch, now)

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
                resp = self.poster.post(th.channel, text, thread_ts=th.ts,
                                        metadata=metadata([ident], th.key))  # fmt: skip
            except SlackError as err:
                if self._failed(err, ident, th.key, "reminder") is Outcome.FAILED:
                    continue
                raise
            reminded = dataclasses.replace(th, last_notified=t, reminders=th.reminders + 1)
            note = Message(th.channel, str(resp.get("ts")), th.key, "reminder", self.clock(),
                           (Section((ident,), text),))  # fmt: skip
            self.store.sent_and_thread(ident, "reminder", reminded, message=note)
            count += 1
        return count

    def recover(self) -> int:
        """After a crash: the messages begun but not recorded, looked for in Slack and
        recorded as sent when found (`runwatch.notify.recover`); how many were found."""
        return Recovery(self.poster, self.store, self.clock, self._channel_id).recover()

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

    def _fleet_channel(self, severity: str) -> str:
        """Where fleet threads go: routed as the fleet alert is (its run has no labels)."""
        return self.config.channel_for({}, "shared_cause", severity)

    def _send_root(self, a: Alert, key: str, channel: str, now: float, batch: Batch) -> None:
        thread = new_thread(a, key, "", "", now)
        text, blocks = self._root_view(thread, a, batch)
        target = self._target(channel)
        self.store.begin(a.id, key, target)
        meta = metadata([a.id], key, a)
        resp = self.replies.call(
            [a.id], lambda: self.poster.post(target, text, blocks, metadata=meta)
        )
        ts = str(resp.get("ts"))
        channel_id = str(resp.get("channel") or target)
        if channel_id != target and is_channel_id(channel_id):
            self.store.set_channel_id(channel, channel_id)  # the name's ID, for good
        thread = dataclasses.replace(thread, channel=channel_id, ts=ts)
        self.store.sent_and_thread(a.id, "root", thread, ts=ts)
        batch.set(thread)

    # -- a fleet incident's thread ---------------------------------------------------------

    def _fleet_thread(self, fleet: str, member: Alert, batch: Batch, now: float) -> Thread:
        """The fleet thread; opened with a stand-in root when a member's transition comes
        before the fleet alert does."""
        th = batch.thread(fleet)
        if th is None:
            stand_in = placeholder(fleet, member)
            self._send_root(stand_in, fleet, self._fleet_channel(member.severity), now, batch)
            th = batch.thread(fleet)
        assert th is not None
        return th

    def _move(self, own: Thread, fleet: Thread, batch: Batch) -> Thread:
        """A run's incident whose thread opened before it was known to be part of a fleet
        incident: from now on its transitions are the fleet thread's (which takes its
        alerts, so their resolves are shown), and its own root says where it went."""
        self.replies.flush_thread(fleet.key, batch)
        fleet = batch.thread(fleet.key) or fleet
        merged = dataclasses.replace(fleet, members={**own.members, **fleet.members})
        moved = dataclasses.replace(own, fleet=fleet.key, state="moved")
        self.store.sent_and_thread([], "moved", merged, also=[moved])
        batch.set(merged)
        batch.set(moved)
        batch.dirty.setdefault(merged.key, merged.alert)
        batch.dirty[moved.key] = moved.alert
        return merged

    def _track(self, fleet: Thread, a: Alert, batch: Batch, now: float) -> None:
        """member_threads = "own": the fleet thread counts the run, and shows nothing."""
        batch.set(in_fleet(fleet, a, now))
        batch.tracked.add(fleet.key)
        batch.dirty[fleet.key] = a

    def _link(self, fleet: Thread, batch: Batch) -> str | None:
        """The fleet thread's permalink (chat.getPermalink), asked once and kept."""
        if fleet.link is None and fleet.ts:
            try:
                link = self.poster.permalink(fleet.channel, fleet.ts)
            except SlackError as err:
                log.warning("no permalink for the fleet thread %s: %s", fleet.key, err.error)
                return None
            if link is not None:
                fleet = dataclasses.replace(fleet, link=link)
                self.store.put_thread(fleet)
                batch.set(fleet)
        return fleet.link

    # -- a quick resolve, folded into its firing's message ---------------------------------

    # -- the staged replies, sent --------------------------------------------------------

    def _flush(self, batch: Batch) -> None:
        """The batch's end: its staged replies out, the roots re-rendered once each."""
        for key in list(batch.groups):
            self.replies.flush_thread(key, batch)
        for key in batch.tracked:
            th = batch.thread(key)
            if th is not None:
                self.store.put_thread(th)
        now = self.poster.clock()
        for key, last in batch.dirty.items():
            self._stale[key] = (last, self._stale.get(key, (last, now))[1])
        self.tidy()

    def tidy(self, wait: bool = False) -> int:
        """Re-render the roots whose threads changed, one edit each however many
        transitions changed them: as many as chat.update's budget allows now with a slot to
        spare for a fold (news first; a root waiting ROOT_EVERY takes any slot), or (`wait`)
        all, waiting for it. The end of a batch and the callers' idle turns call it; returns
        how many were edited."""
        batch = Batch(self.store, 0)
        done = 0
        for key, (last, since) in list(self._stale.items()):
            th = batch.thread(key)
            if th is not None and th.ts and not wait:
                overdue = self.poster.clock() - since >= ROOT_EVERY
                if not self.poster.ready("chat.update", th.channel, spare=0 if overdue else 1):
                    continue
            if th is not None and th.ts:
                self._edit_root(th, last, batch)
                done += 1
            del self._stale[key]
        return done

    # -- the root message, re-rendered -----------------------------------------------------

    def _root_view(self, th: Thread, last: Alert, batch: Batch) -> tuple[str, msg.Blocks]:
        """What the thread's root message shows after transition `last`."""
        if th.run == FLEET_RUN:
            return msg.fleet_root(th.alert, th.members, runs_of(th), named=not is_placeholder(th),
                                  resolved=th.state != "firing")  # fmt: skip
        fleet = batch.thread(th.fleet)
        if fleet is not None and th.state == "moved":  # it went on in the fleet thread
            return msg.moved_root(th.alert, fleet.alert, len(runs_of(fleet)),
                                  self._link(fleet, batch), th.key)  # fmt: skip
        link = self.config.drilldown(th.run, th.since)
        incident = last.incident
        if incident is not None:
            if th.state == "firing":
                text, blocks = msg.incident_root(th.alert, th.members, incident, link)
            else:
                text, blocks = msg.incident_resolved(last, th.alert, th.members, link)
        elif not last.firing:
            text, blocks = msg.resolved_root(last, th.alert, link)
        else:
            text, blocks = msg.root(last, link)
        if fleet is not None:  # member_threads = "own": where its fleet thread is
            blocks[-1:-1] = msg.fleet_link(fleet.alert, len(runs_of(fleet)),
                                           self._link(fleet, batch))  # fmt: skip
        return text, blocks

    def _edit_root(self, th: Thread, last: Alert, batch: Batch) -> None:
        """Re-render the root message (cosmetic: the replies carry the news). Through
        `tidy`, so that a storm's transitions cost one edit of a root, not one each."""
        text, blocks = self._root_view(th, last, batch)
        try:
            self.poster.update(th.channel, th.ts, text, blocks)
        except SlackError as err:
            log.warning("could not edit the root message of %s: %s", th.key, err.error)

    def _close(self, th: Thread, last: Alert, batch: Batch) -> None:
        """An incident closed on a transition not shown (its firing was silenced)."""
        closed = dataclasses.replace(th, state="resolved", last_notified=self.clock())
        self.store.resolve_thread(th.key)  # just the thread's state: no message of its own
        batch.set(closed)
        batch.dirty[th.key] = last

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

    # -- what a crash left in flight, found ------------------------------------------------
