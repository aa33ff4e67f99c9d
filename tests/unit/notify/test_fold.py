"""A resolve that comes soon after its firing is folded into the firing's message: one
message, edited (chat.update) to show both, carrying the resolve's metadata as a post does
-- so a crash mid-fold is found again and nothing is lost or doubled. A resolve because the
run ended is never folded (contract §8: a crash reaches Slack as both messages)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import decoded
from msgspec.structs import replace

from harness.slack_server import FakeSlack
from runwatch.dev import envelope
from runwatch.stream.alerts import Alert
from runwatch.stream.engine import Engine

from . import test_slack_notifier as base

T0 = base.NOW
Rig = base.Rig
slack = base.slack  # the strict Slack, as the notifier's other tests have it


@pytest.fixture
def rig(slack: FakeSlack, tmp_path: Path) -> Iterator[Rig]:
    r = Rig(slack, tmp_path / "notify.sqlite", fold_within=30)
    try:
        yield r
    finally:
        r.notifier.close()


def event(kind: str, ts: float, component: str = "trainer", **fields: Any) -> dict[str, Any]:
    src = {"component": component, "host": "node-1", "pid": 7 if component == "trainer" else 8}
    return envelope.event(kind, ts, "grpo-7b", src, f"{kind}-{ts}-{component}", **fields)


def transitions(*events: dict[str, Any]) -> list[Alert]:
    engine = Engine()
    out: list[Alert] = []
    for e in events:
        out += engine.apply(decoded(e))
    return out


def quick_fire_and_resolve() -> list[Alert]:
    """A process fails and its run goes on: a step is done a tenth of a second later."""
    fired, resolved = transitions(
        event("run.started", T0),
        event("component.failed", T0 + 1, error="exited with status 1", how="exit", exit_code=1),
        event("step.done", T0 + 1.1, step=1),
    )
    assert (fired.state, resolved.state) == ("firing", "resolved")
    return [fired, resolved]


def metadata_id(message: Any) -> str:
    return str(message.metadata["event_payload"]["alert_id"])


def test_a_quick_fire_and_resolve_is_one_message_edited_to_the_resolved_state(
    rig: Rig, slack: FakeSlack
) -> None:
    fired, resolved = quick_fire_and_resolve()
    n = rig.notifier
    assert n.notify(fired) == "sent"
    assert n.notify(resolved) == "sent"
    (root,) = slack.roots()
    assert slack.replies(root) == []  # one message
    assert slack.count("chat.postMessage") == 1
    assert "[RESOLVED] component_failed" in root.text  # edited to show both
    assert "Resolved 0.1s after it fired" in root.text
    assert metadata_id(root) == resolved.id  # the edit carries the resolve's metadata
    assert n.store.outcome(fired.id) == n.store.outcome(resolved.id) == "sent"  # each once
    assert n.store.firing_threads() == []  # no reminder for what is over
    assert n.notify(resolved) == "duplicate"


def ended(status: str, **failure: Any) -> list[Alert]:
    """A process fails, and the run ends (`status`) a twentieth of a second later: the
    engine resolves the failure because the run ended (contract section 8)."""
    fired, resolved = transitions(
        event("run.started", T0),
        event("component.failed", T0 + 1, **failure),
        event("run.finished", T0 + 1.05, status=status),
    )
    assert (fired.state, resolved.state) == ("firing", "resolved")
    assert resolved.details["reason"] == "run_finished"
    return [fired, resolved]


@pytest.mark.parametrize("status", ["failed", "killed"])
def test_a_crash_that_ended_the_run_is_both_messages(
    rig: Rig, slack: FakeSlack, status: str
) -> None:
    fired, resolved = ended(status, error="exited with status 1", how="exit", exit_code=1)
    n = rig.notifier
    n.notify(fired)
    n.notify(resolved)
    (root,) = slack.roots()
    (reply,) = slack.replies(root)
    assert "component_failed" in root.text
    assert f"the run finished ({status})" in reply.text
    assert metadata_id(reply) == resolved.id


def test_a_failure_the_run_outlived_to_end_ok_is_one_message(rig: Rig, slack: FakeSlack) -> None:
    """The issue's own: the watched command printed an uncaught exception's traceback (a
    worker thread's, say) and then exited 0 -- a failure it survived, not a crash that ended
    the run: its quick resolve edits the firing's message, as any quick resolve does."""
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    fired, resolved = ended("ok", error=error, how="exception")
    n = rig.notifier
    assert n.notify(fired) == n.notify(resolved) == "sent"
    (root,) = slack.roots()
    assert slack.replies(root) == []  # one message
    assert "[RESOLVED] component_failed" in root.text
    assert "the run finished (ok)" in root.text
    assert metadata_id(root) == resolved.id


def test_a_resolve_later_than_fold_within_is_a_reply(rig: Rig, slack: FakeSlack) -> None:
    fired, resolved = quick_fire_and_resolve()
    late = replace(resolved, ts=fired.ts + 31)
    rig.notifier.notify(fired)
    rig.notifier.notify(late)
    (root,) = slack.roots()
    assert len(slack.replies(root)) == 1


def test_a_symptoms_quick_resolve_edits_its_reply(rig: Rig, slack: FakeSlack) -> None:
    """Two processes fail: the second's alert is a reply; its quick resolve edits that
    reply, and the root (the incident) is re-rendered, not replied to."""
    first, second = transitions(
        event("run.started", T0),
        event("component.failed", T0 + 1, error="boom", how="exception"),
        event("component.failed", T0 + 2, component="rollout", error="bang", how="exception"),
    )
    assert first.incident is not None
    # the second failure, a symptom in the first's incident
    second = replace(second, incident=replace(first.incident, role="symptom"))
    alerts = [first, second]
    n = rig.notifier
    for a in alerts:
        assert n.notify(a) == "sent"
    (root,) = slack.roots()
    (symptom,) = slack.replies(root)
    gone = replace(second, id=second.id + "-r", ts=second.ts + 0.2, state="resolved",
                               summary="rollout recovered")  # fmt: skip
    assert n.notify(gone) == "sent"
    assert slack.replies(root) == [symptom]  # no new message
    assert "Resolved 0.2s after it fired: rollout recovered" in symptom.text
    assert metadata_id(symptom) == gone.id
    assert root.updates  # the incident's root re-rendered


def test_a_crash_mid_fold_after_slack_took_it_is_found_and_not_repeated(
    rig: Rig, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired, resolved = quick_fire_and_resolve()
    n = rig.notifier
    n.notify(fired)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("killed between the edit and the record")

    monkeypatch.setattr(n.store, "sent_and_thread", crash)
    # the fold comes a minute after the post: looking for it from the fold's own time on
    # would miss the message it edited
    later = time.time() + 60
    monkeypatch.setattr("runwatch.notify.store.time.time", lambda: later)
    with pytest.raises(KeyboardInterrupt):
        n.notify(resolved)
    monkeypatch.undo()
    (root,) = slack.roots()
    assert metadata_id(root) == resolved.id  # Slack has the fold; the ledger does not
    n = rig.restart()
    assert n.recover() == 1  # found by its metadata on the edited message
    assert n.notify(resolved) == "duplicate"
    assert slack.count("chat.postMessage") == 1
    assert len(root.updates) == 1  # edited once
    assert n.store.firing_threads() == []  # and the thread knows it is over


def test_a_crash_mid_fold_before_slack_took_it_folds_it_after_the_restart(
    rig: Rig, slack: FakeSlack
) -> None:
    fired, resolved = quick_fire_and_resolve()
    n = rig.notifier
    n.notify(fired)
    slack.fail("chat.update", 500, times=4)  # every try of this call: Slack is down
    with pytest.raises(Exception, match="gave up"):
        n.notify(resolved)
    n = rig.restart()
    assert n.recover() == 0
    assert n.notify(resolved) == "sent"
    (root,) = slack.roots()
    assert slack.replies(root) == []
    assert metadata_id(root) == resolved.id


def test_a_fold_slack_refuses_becomes_a_reply(rig: Rig, slack: FakeSlack) -> None:
    fired, resolved = quick_fire_and_resolve()
    n = rig.notifier
    n.notify(fired)
    slack.fail("chat.update", 200, error="cant_update_message")
    assert n.notify(resolved) == "sent"
    (root,) = slack.roots()
    (reply,) = slack.replies(root)
    assert metadata_id(reply) == resolved.id


def test_fold_within_zero_never_folds(slack: FakeSlack, tmp_path: Path) -> None:
    rig = Rig(slack, tmp_path / "n.sqlite", fold_within=0)
    n = rig.notifier
    try:
        for a in quick_fire_and_resolve():
            n.notify(a)
        (root,) = slack.roots()
        assert len(slack.replies(root)) == 1
    finally:
        n.close()
