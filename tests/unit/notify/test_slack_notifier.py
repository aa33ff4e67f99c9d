"""The Slack notifier against a local server that answers like the Slack Web API."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import decoded

from harness.slack_server import FakeSlack, VirtualClock
from runwatch.dev import scenarios
from runwatch.exceptions import SlackError, TokenMissing
from runwatch.notify.config import NotifyConfig, Route
from runwatch.notify.notifier import Notifier
from runwatch.notify.slack import SlackPoster, load_token
from runwatch.notify.store import NotifyStore
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine

TOKEN = "xoxb-9999-SECRET-token-value"
NOW = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = NOW

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """The strict Slack, its rate limits on a clock that moves when the notifier sleeps."""
    fake = FakeSlack(token=TOKEN, channels=("C-ALERTS", "C-MATH"), clock=VirtualClock())
    fake.add_channel("#rl-alerts", "C-ALERTS")
    fake.add_channel("#math-rl", "C-MATH")
    try:
        yield fake
    finally:
        fake.close()


class Rig:
    def __init__(self, slack: FakeSlack, db: Path, **config: Any) -> None:
        self.slack = slack
        self.db = db
        self.clock = Clock()
        self.slept: list[float] = []
        self.config = NotifyConfig(channel="#rl-alerts", base_url=slack.url, **config)
        self.notifier = self.open()

    def open(self, token: str = TOKEN) -> Notifier:
        poster = SlackPoster(token, base_url=self.slack.url, sleep=self.sleep, max_attempts=4,
                             backoff=0.5, clock=self.slack.clock)  # fmt: skip
        return Notifier(self.config, poster, NotifyStore(self.db), clock=self.clock)

    def sleep(self, seconds: float) -> None:
        """The poster's waits: recorded, and the Slack's clock moved past them."""
        self.slept.append(seconds)
        sleep = getattr(self.slack.clock, "sleep", None)
        if sleep is not None:
            sleep(seconds)

    def restart(self) -> Notifier:
        self.notifier.close()
        self.notifier = self.open()
        return self.notifier


@pytest.fixture
def rig(slack: FakeSlack, tmp_path: Path) -> Iterator[Rig]:
    r = Rig(
        slack,
        tmp_path / "notify.sqlite",
        grafana_url="https://grafana.example.com",
        routes=[Route(match={"team": "math"}, channel="#math-rl")],
        repeat_interval=3600,
        fold_within=0,  # every transition its own message here; folds: test_fold.py
    )
    try:
        yield r
    finally:
        r.notifier.close()


def alert(
    n: int,
    state: str = "firing",
    run: str = "run-a",
    rule: str = "zero_reward",
    ts: float = NOW,
    **extra: Any,
) -> Alert:
    key = f"{rule}|{run}"
    return Alert.from_dict(
        {
            "v": 1,
            "id": f"{key}#{n}",
            "ts": ts,
            "rule": rule,
            "run": run,
            "state": state,
            "severity": "critical",
            "key": key,
            "since": ts - 600,
            "summary": f"reward 0 for 5 steps ({state})",
            "details": {"first_zero_step": 188, "count": 5},
            **extra,
        }
    )


def test_one_thread_per_alert_key(rig: Rig, slack: FakeSlack) -> None:
    n = rig.notifier
    assert n.notify(alert(1)) == "sent"
    (root,) = slack.roots()
    assert root.channel == "C-ALERTS"
    text = str(root.blocks)
    for want in (
        "CRITICAL",
        "zero_reward",
        "run-a",
        "reward 0 for 5 steps",
        "first_zero_step",
        "https://grafana.example.com/d/runwatch-run/?var-run=run-a",
    ):
        assert want in text
    assert n.notify(alert(2, "resolved")) == "sent"
    assert n.notify(alert(3)) == "sent"
    assert len(slack.roots()) == 1
    replies = slack.replies(root)
    assert [r.text.split(":")[1] for r in replies] == ["white_check_mark", "red_circle"]
    assert "Resolved" in replies[0].text
    assert "firing again" in replies[1].text
    assert any("[RESOLVED]" in u for u in root.updates)  # the root, edited on resolve
    assert n.notify(alert(1, run="run-b")) == "sent"
    assert len(slack.roots()) == 2


def test_resolve_of_an_alert_never_shown_is_not_sent(rig: Rig, slack: FakeSlack) -> None:
    assert rig.notifier.notify(alert(2, "resolved")) == "skipped"
    assert slack.messages == []


def test_reminders_while_firing(rig: Rig, slack: FakeSlack) -> None:
    n = rig.notifier
    n.notify(alert(1))
    rig.clock.t += 1800
    assert n.remind() == 0
    rig.clock.t += 1801
    assert n.remind() == 1
    assert n.remind() == 0  # not twice for one interval
    (root,) = slack.roots()
    assert "Still firing after" in slack.replies(root)[-1].text
    rig.clock.t += 3601
    n.notify(alert(2, "resolved", ts=rig.clock.t))
    rig.clock.t += 7200
    assert n.remind() == 0
    assert len(slack.replies(root)) == 2


def test_routing_by_run_label(rig: Rig, slack: FakeSlack) -> None:
    n = rig.notifier
    n.learn_labels("math-run", {"team": "math"})
    n.notify(alert(1, run="math-run"))
    n.notify(alert(1, run="labelled", details={"labels": {"team": "math"}}))
    n.notify(alert(1, run="other-run"), labels={"team": "reasoning"})
    assert [m.channel for m in slack.roots()] == ["C-MATH", "C-MATH", "C-ALERTS"]


def test_route_by_rule_and_severity() -> None:
    cfg = NotifyConfig(
        channel="#all",
        routes=[
            Route(match={"team": "m*"}, rules=["zero_reward"], channel="#a"),
            Route(severities=["warning"], channel="#warn"),
        ],
    )
    assert cfg.channel_for({"team": "math"}, "zero_reward", "critical") == "#a"
    assert cfg.channel_for({"team": "math"}, "heartbeat_lost", "critical") == "#all"
    assert cfg.channel_for({}, "stuck_progress", "warning") == "#warn"


def test_silences(rig: Rig, slack: FakeSlack) -> None:
    n, store = rig.notifier, rig.notifier.store
    sid = store.add_silence("run-a", "zero_reward", NOW + 7200)
    store.add_silence("run-b", None, NOW + 60)
    assert n.notify(alert(1)) == "silenced"
    assert n.notify(alert(1, rule="heartbeat_lost")) == "sent"  # another rule of run-a
    assert n.notify(alert(1, run="run-b", rule="anything")) == "silenced"
    rig.clock.t += 120  # run-b's silence expired
    assert n.notify(alert(3, run="run-b", rule="anything")) == "sent"
    assert store.remove_silence(sid)
    assert n.notify(alert(3)) == "sent"
    assert [s.run for s in store.silences(rig.clock.t)] == []
    assert len(slack.roots()) == 3


def test_429_retry_after_is_honoured(rig: Rig, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 429, retry_after=3)
    assert rig.notifier.notify(alert(1)) == "sent"
    assert rig.slept == [3.0]
    assert len(slack.roots()) == 1


def test_a_retry_after_of_a_day_is_capped_and_said(
    rig: Rig, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    from runwatch.notify.slack import MAX_RETRY_AFTER

    slack.fail("chat.postMessage", 429, retry_after=86_400)
    with caplog.at_level("WARNING", logger="runwatch.notify"):
        assert rig.notifier.notify(alert(1)) == "sent"
    assert rig.slept == [MAX_RETRY_AFTER]
    assert any("86400s" in r.getMessage() for r in caplog.records)


def test_an_answer_that_is_not_json_is_tried_again(rig: Rig, slack: FakeSlack) -> None:
    """A proxy's HTML page with status 200 is not Slack saying no: the message is sent on
    the next try, not recorded as failed."""
    slack.fail("chat.postMessage", 200, body=b"<html><body>gateway says hi</body></html>")
    assert rig.notifier.notify(alert(1)) == "sent"
    assert len(rig.slept) == 1
    assert len(slack.roots()) == 1


def test_5xx_is_retried_with_backoff(rig: Rig, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 500, times=2)
    assert rig.notifier.notify(alert(1)) == "sent"
    assert len(rig.slept) == 2
    assert rig.slept[1] > rig.slept[0]
    assert len(slack.roots()) == 1


def test_slack_down_for_good_raises_and_records_nothing(rig: Rig, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 503, times=4)
    with pytest.raises(SlackError) as err:
        rig.notifier.notify(alert(1))
    assert err.value.retryable
    assert not rig.notifier.store.was_sent(alert(1).id)
    assert rig.notifier.notify(alert(1)) == "sent"  # the caller retries later: not lost


def test_network_errors_are_retried(tmp_path: Path) -> None:
    slept: list[float] = []
    poster = SlackPoster(
        TOKEN, base_url="http://127.0.0.1:9/api/", sleep=slept.append, max_attempts=3, timeout=2
    )
    with pytest.raises(SlackError) as err:
        poster.post("#x", "hello")
    assert err.value.retryable
    assert len(slept) == 2


def test_invalid_auth_fails_once_with_a_clear_line(
    rig: Rig, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    rig.notifier.close()
    rig.notifier = rig.open(token="xoxb-wrong")
    with caplog.at_level(logging.ERROR, logger="runwatch.notify"), pytest.raises(SlackError):
        rig.notifier.notify(alert(1))
    assert slack.count("chat.postMessage") == 1  # not retried
    assert "Slack refused the bot token (invalid_auth)" in caplog.text
    assert rig.notifier.notify(alert(1, run="run-b")) == "disabled"
    assert slack.count("chat.postMessage") == 1
    rig.notifier.close()
    rig.notifier = rig.open()  # token fixed, restarted: the transition was kept
    assert rig.notifier.notify(alert(1)) == "sent"


def test_channel_not_found_fails_once_and_moves_on(rig: Rig, slack: FakeSlack) -> None:
    rig.notifier.learn_labels("lost", {"team": "math"})
    slack.remove_channel("#math-rl")
    assert rig.notifier.notify(alert(1, run="lost")) == "failed"
    assert slack.count("chat.postMessage") == 1
    assert rig.notifier.notify(alert(1, run="lost")) == "duplicate"
    assert rig.notifier.notify(alert(1)) == "sent"


def test_no_duplicate_after_restart(rig: Rig, slack: FakeSlack) -> None:
    rig.notifier.notify(alert(1))
    rig.notifier.notify(alert(2, "resolved"))
    n = rig.restart()
    assert n.notify(alert(1)) == "duplicate"
    assert n.notify(alert(2, "resolved")) == "duplicate"
    assert n.notify(alert(3)) == "sent"  # and the thread continues after the restart
    (root,) = slack.roots()
    assert len(slack.replies(root)) == 2


def test_crash_after_slack_got_it_neither_repeats_nor_loses(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = rig.notifier.store

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed between the post and the record")

    monkeypatch.setattr(store, "sent_and_thread", crash)
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify(alert(1))
    monkeypatch.undo()
    assert len(slack.roots()) == 1
    n = rig.restart()
    assert n.recover() == 1
    assert n.notify(alert(1)) == "duplicate"
    assert n.notify(alert(2, "resolved")) == "sent"  # into the recovered thread
    (root,) = slack.roots()
    assert len(slack.replies(root)) == 1


def test_crash_before_slack_got_it_is_sent_after_restart(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = rig.notifier.store
    store.begin(alert(1).id, alert(1).key, "#rl-alerts")  # began, never posted
    n = rig.restart()
    assert n.recover() == 0
    assert n.notify(alert(1)) == "sent"
    assert len(slack.roots()) == 1


def shown(slack: FakeSlack) -> list[str]:
    """The transitions Slack's messages show, by their metadata (one id once per message)."""
    out: list[str] = []
    for m in slack.messages:
        payload = (m.metadata or {}).get("event_payload") or {}
        out += payload.get("alert_ids") or [payload.get("alert_id")]
    return out


def engine_alerts(events: Any) -> list[Alert]:
    engine = Engine()
    out: list[Alert] = []
    for e in events:
        out += engine.apply(decoded(e))
    return out


def test_an_incident_end_to_end(rig: Rig, slack: FakeSlack) -> None:
    """The sandbox hang through the engine: one thread per incident (four stragglers, and
    the growing idle gap before the last), every transition of its alerts a reply, the root
    message naming the root cause."""
    alerts = engine_alerts(scenarios.sandbox_hang())
    rig.clock.t = alerts[-1].ts
    for a in alerts:
        assert rig.notifier.notify(a, labels={"team": "reasoning"}) == "sent"
    rig.notifier.tidy(wait=True)  # an idle turn: the roots' edits a burst put off
    ids = list(dict.fromkeys(a.incident.id for a in alerts if a.incident is not None))
    roots = slack.roots()
    assert len(roots) == len(ids) == 5
    # each transition once: in a root or a reply (replayed at full speed, a burst of them
    # is folded into fewer messages, under Slack's one post per second per channel)
    assert sorted(shown(slack)) == sorted(a.id for a in alerts)
    assert slack.limited == []  # and Slack never had to say so
    gap, last = roots[-2:]  # nothing that explains the growing gap fired with it: its own
    assert "idle_gap_growing" in gap.text
    assert "inference_idle_with_pending" in last.text
    assert "Symptom" in slack.replies(last)[0].text
    for root in roots:  # closed: every alert resolved, the gap's when the run was killed
        assert "[RESOLVED]" in root.updates[-1]
    (ended,) = slack.replies(gap)
    assert "the run finished (killed)" in ended.text


def test_a_ledger_from_before_typed_alerts_is_read_and_its_incident_goes_on(
    rig: Rig, slack: FakeSlack
) -> None:
    """Ledgers written before the notifier kept `Alert`s hold briefs: no `v`, no details.
    A notifier upgraded mid-incident reads them and goes on in the same thread."""
    import json
    import sqlite3

    alerts = engine_alerts(orchestrator_failure(late=30))  # before the stall: one incident
    rig.clock.t = alerts[-1].ts
    half = len(alerts) // 2
    for a in alerts[:half]:
        rig.notifier.notify(a)
    rig.notifier.close()
    brief = ("id", "key", "run", "rule", "severity", "state", "since", "summary", "ts",
             "subject", "incident")  # fmt: skip
    db = sqlite3.connect(rig.db)
    with db:
        for key, alert_json, members_json in db.execute(
            "SELECT key, alert, members FROM threads"
        ).fetchall():
            old = {k: v for k, v in json.loads(alert_json).items() if k != "v"}
            members = {k: {f: m[f] for f in brief if f in m}
                       for k, m in json.loads(members_json).items()}  # fmt: skip
            db.execute("UPDATE threads SET alert = ?, members = ? WHERE key = ?",
                       (json.dumps(old), json.dumps(members), key))  # fmt: skip
    db.close()
    n = rig.open()
    rig.notifier = n
    for a in alerts[half:]:
        n.notify(a)
    (root,) = slack.roots()
    assert len(slack.messages) == len(alerts)
    assert "KeyError" in root.updates[-1]


def orchestrator_failure(late: float = 3000) -> list[dict[str, Any]]:
    """orchestrator_dies, and its failure read from its console `late` seconds after it went
    silent: by default minutes after the stall was reported."""
    from helpers import make_event

    events = scenarios.orchestrator_dies()
    src = next(e["src"] for e in events if e["src"]["component"] == "orchestrator")
    silent = max(e["ts"] for e in events if e["src"]["component"] == "orchestrator")
    late = make_event("component.failed", silent + late, run=events[0]["run"], src=src,
                      how="exception", error="KeyError: 'teacher_logprobs'")  # fmt: skip
    return sorted([*events, late], key=lambda e: e["ts"])


def test_a_root_found_late_opens_its_own_thread_and_the_stall_s_keeps_its_root(
    rig: Rig, slack: FakeSlack
) -> None:
    """An incident never changes its root (contract section 8): the failure read after the
    stall was reported as a root is a root of its own, in a thread of its own."""
    alerts = engine_alerts(orchestrator_failure())
    rig.clock.t = alerts[-1].ts
    for a in alerts:
        rig.notifier.notify(a)
    stall, failure = slack.roots()
    assert "heartbeat_lost" in stall.text
    assert all("component_failed" not in u for u in stall.updates)
    said = [r.text.split(" — ")[2].split(":")[0] for r in slack.replies(stall)]
    assert "Root cause" not in said, said
    assert "KeyError" in failure.text


def test_a_silence_of_the_run_silences_its_incident_whole(rig: Rig, slack: FakeSlack) -> None:
    alerts = engine_alerts(orchestrator_failure())
    rig.clock.t = alerts[-1].ts
    rig.notifier.store.add_silence(alerts[0].run, None, rig.clock.t + 3600)
    assert {rig.notifier.notify(a) for a in alerts} == {"silenced"}
    assert slack.messages == []


def test_a_silence_of_the_root_s_rule_silences_its_symptoms(rig: Rig, slack: FakeSlack) -> None:
    """heartbeat_lost silenced: the stall it explains is not shown either; the failure
    found later, a root of its own rule, is."""
    alerts = engine_alerts(orchestrator_failure())
    rig.clock.t = alerts[-1].ts
    rig.notifier.store.add_silence(alerts[0].run, "heartbeat_lost", rig.clock.t + 3600)
    outcomes = {(a.rule, a.state): rig.notifier.notify(a) for a in alerts}
    assert outcomes[("heartbeat_lost", "firing")] == "silenced"
    assert outcomes[("stuck_progress", "firing")] == "silenced"
    assert outcomes[("component_failed", "firing")] == "sent"


def test_an_incident_reply_slack_got_before_a_crash_is_not_posted_again(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    alerts = engine_alerts(orchestrator_failure(late=30))  # before the stall: one incident
    rig.clock.t = alerts[-1].ts
    assert rig.notifier.notify(alerts[0]) == "sent"
    store = rig.notifier.store

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed between the post and the record")

    monkeypatch.setattr(store, "sent_and_thread", crash)
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify(alerts[1])
    monkeypatch.undo()
    n = rig.restart()
    assert n.recover() == 1
    outcomes = [n.notify(a) for a in alerts]
    assert outcomes == ["duplicate", "duplicate", *["sent"] * (len(alerts) - 2)]
    (root,) = slack.roots()
    assert len(slack.replies(root)) == len(alerts) - 1


def test_token_never_in_logs_or_errors(
    slack: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rig = Rig(slack, tmp_path / "n.sqlite")
    errors: list[str] = []
    try:
        slack.fail("chat.postMessage", 429, retry_after=0)
        slack.fail("chat.postMessage", 500)
        rig.notifier.notify(alert(1))
        slack.fail("chat.postMessage", 200, error="channel_not_found")
        rig.notifier.notify(alert(1, run="x"))
        bad = rig.open(token=TOKEN + "-revoked")
        try:
            bad.notify(alert(1, run="y"))
        except SlackError as err:
            errors += [str(err), repr(err)]
        bad.close()
        errors.append(repr(rig.notifier.poster))
    finally:
        rig.notifier.close()
    captured = caplog.text + "\n".join(errors) + "\n".join(str(r.__dict__) for r in caplog.records)
    assert "invalid_auth" in captured
    assert TOKEN not in captured
    assert "SECRET" not in captured


def test_token_from_env_or_secret_file(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    assert load_token(str(secret), env={}) == TOKEN
    assert load_token(None, env={"SLACK_BOT_TOKEN_FILE": str(secret)}) == TOKEN
    assert load_token(None, env={"SLACK_BOT_TOKEN": TOKEN}) == TOKEN
    with pytest.raises(TokenMissing, match="SLACK_BOT_TOKEN"):
        load_token(None, env={})


def test_background_notifier_keeps_order_through_an_outage(rig: Rig, slack: FakeSlack) -> None:
    """The embedded service's path: submit returns at once; a Slack outage delays, in order."""
    from runwatch.notify.background import BackgroundNotifier

    slack.fail("chat.postMessage", 503, times=4)  # the first try of alert 1 runs out
    bg = BackgroundNotifier(rig.notifier, remind_every=3600)
    rig.notifier = rig.open()  # the rig's close() must not close the background one's store
    try:
        t = time.monotonic()
        bg.submit(alert(1))
        bg.submit(alert(2, "resolved"))
        assert time.monotonic() - t < 0.1
    finally:
        bg.close(timeout=20)
    (root,) = slack.roots()
    assert [m.text.split(":")[1] for m in slack.replies(root)] == ["white_check_mark"]


# --- Slack's real semantics: channel IDs, replies outside the history ------------------------


def test_the_fake_is_as_strict_as_slack(slack: FakeSlack) -> None:
    poster = SlackPoster(TOKEN, base_url=slack.url, max_attempts=1)
    root = poster.post("#rl-alerts", "hello")  # a name is fine to post to...
    assert root["channel"] == "C-ALERTS"  # ...and the answer says the ID
    reply = poster.post("C-ALERTS", "in the thread", thread_ts=root["ts"], metadata=_meta("r"))
    for method, args in [("chat.update", {"ts": root["ts"], "text": "x"}),
                         ("conversations.history", {}),
                         ("conversations.replies", {"ts": root["ts"]})]:  # fmt: skip
        with pytest.raises(SlackError, match="channel_not_found"):
            poster.call(method, {"channel": "#rl-alerts", **args})
    history = poster.history("C-ALERTS", 0)
    assert [m["ts"] for m in history] == [root["ts"]]  # no reply in a channel's history
    replies = poster.replies("C-ALERTS", root["ts"], 0)
    assert [m["ts"] for m in replies] == [root["ts"], reply["ts"]]
    assert replies[1]["metadata"]["event_payload"]["alert_id"] == "r"
    bare = poster.call("conversations.replies", {"channel": "C-ALERTS", "ts": root["ts"]})
    assert "metadata" not in bare["messages"][1]  # only with include_all_metadata
    assert poster.channel_id("#math-rl") == "C-MATH"


def _meta(ident: str) -> dict[str, Any]:
    return {"event_type": "runwatch_alert", "event_payload": {"alert_id": ident, "key": "k"}}


def test_a_reply_slack_got_before_a_crash_is_found_in_its_thread(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert rig.notifier.notify(alert(1)) == "sent"
    store = rig.notifier.store

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed between the post and the record")

    monkeypatch.setattr(store, "sent_and_thread", crash)
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify(alert(2, "resolved"))
    monkeypatch.undo()
    n = rig.restart()
    assert n.recover() == 1  # looked up in the thread, not in the channel's history
    assert n.notify(alert(2, "resolved")) == "duplicate"
    (root,) = slack.roots()
    assert len(slack.replies(root)) == 1


def test_a_root_whose_answer_was_lost_is_found_by_the_channel_s_id(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first post to `#rl-alerts` reaches Slack and the notifier dies before the answer
    (so before it learned the channel's ID): recovery looks the ID up by name, then the
    message in that channel's history."""
    poster = rig.notifier.poster
    real = poster.post

    def lost(*args: Any, **kw: Any) -> dict[str, Any]:
        real(*args, **kw)
        raise KeyboardInterrupt("killed while Slack answered")

    monkeypatch.setattr(poster, "post", lost)
    with pytest.raises(KeyboardInterrupt):
        rig.notifier.notify(alert(1))
    monkeypatch.undo()
    n = rig.restart()
    assert n.recover() == 1
    assert n.notify(alert(1)) == "duplicate"
    assert n.notify(alert(2, "resolved")) == "sent"
    (root,) = slack.roots()
    assert root.channel == "C-ALERTS"
    assert len(slack.replies(root)) == 1
    assert slack.count("conversations.list") == 1  # looked up once, then kept
