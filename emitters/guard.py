"""The circuit breaker, trainer side: a run's own alerts reach its training loop.

`guard = em.guard(rules={"zero_reward", "non_finite_metric"})` reads the run's view
(`runwatch.emitters.runview`: the alerts firing now that no person lifted, with their rule's
configured `action`) through the emitter's one follower of it -- from where the emitter sends
its events, `GET /v1/breaker/RUN` of `runwatch serve` or the compacted `runwatch.breaker`
topic on Kafka -- every `poll_interval` seconds. The training loop asks, once a step:

    if em.should_pause():        # cheap: reads the last decision, never the network
        save_checkpoint()
        guard.wait()             # until a person runs `runwatch resume RUN` or it resolves

An alert pauses when its rule's policy in the service's config (or the run's
`run.started.config`) says `action = "pause"` or `"stop"`; when the config says nothing, the
trainer's own `rules` decide (a set: pause on those; a mapping: rule -> "pause" / "stop").
`"notify"` in the config means never. A lifted or resolved alert no longer pauses.

It fails open: a service or broker that cannot be reached, or answers something that is not
a run view, gives "run" (counted in `failures`, said once per outage), so runwatch being down
never stops training.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from runwatch.emitters.follower import RunViewFollower
from runwatch.emitters.runview import Resumed, RunView, ViewAlert

log = logging.getLogger("runwatch.emitters")

#: what the guard tells the training loop (an alert's policy, `Action` on the alert, says
#: pause, stop or notify; the guard's verdict combines them with the trainer's own)
Verdict = Literal["run", "pause", "stop"]
_RANK = {"run": 0, "pause": 1, "stop": 2}


@dataclass(frozen=True)
class Decision:
    """What the training loop should do now, and why."""

    action: Verdict = "run"
    #: the alerts of the run view that make it
    alerts: tuple[ViewAlert, ...] = ()
    #: False: the last look at the service failed, and the guard fails open
    reachable: bool = True
    #: the latest `run.resumed` the service saw, if any
    resumed: Resumed | None = field(default=None, compare=False)

    @property
    def reason(self) -> str:
        """One line for a person: which alerts, since when."""
        if not self.alerts:
            return "no alert asks for it" if self.reachable else "runwatch cannot be reached"
        parts = []
        for a in self.alerts:
            since = time.strftime("%H:%M:%S", time.localtime(a.since))
            who = f" ({a.subject})" if a.subject else ""
            parts.append(f"{a.rule}{who} firing since {since}")
        return "; ".join(parts)


RUN = Decision()


def policy_of(rules: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """The trainer's rule list as rule -> action; raises ValueError for a bad action."""
    if rules is None:
        return {}
    if isinstance(rules, str):
        raise ValueError("rules must be a collection of rule ids, not one string")
    if isinstance(rules, Mapping):
        out = {str(rule): str(action) for rule, action in rules.items()}
    else:
        out = {str(rule): "pause" for rule in rules}
    for rule, action in out.items():
        if action not in ("pause", "stop", "notify"):
            raise ValueError(f"rules[{rule!r}]: action must be pause, stop or notify")
    return out


#: How a trainer asks for a guard by configuration alone (the verl backend, TrainerLogger):
#: `RUNWATCH_GUARD=zero_reward,non_finite_metric:stop` (rules to obey, `:stop` to stop on
#: one), or `RUNWATCH_GUARD=on` (only what the service's config says).


def rules_from_env(text: str | None) -> dict[str, str] | None:
    """`RUNWATCH_GUARD`'s value as a rule -> action policy; None when unset, empty or off.
    Raises ValueError for a bad action."""
    text = (text or "").strip()
    if text.lower() in ("", "0", "off", "no", "false"):
        return None
    if text.lower() in ("1", "on", "yes", "true"):
        return {}
    rules: dict[str, str] = {}
    for item in text.split(","):
        rule, _, action = item.strip().partition(":")
        if rule:
            rules[rule.strip()] = action.strip() or "pause"
    return policy_of(rules)


def decide(view: RunView | None, policy: Mapping[str, str]) -> Decision:
    """Pause / stop / run from one run view: the config's action when it set one, else the
    trainer's policy for the rule; stop outranks pause. None (no such run yet): run."""
    if view is None:
        return RUN
    action: Verdict = "run"
    making: list[ViewAlert] = []
    for alert in view.alerts:
        wanted = alert.action or policy.get(alert.rule, "notify")
        if wanted == "pause" or wanted == "stop":
            making.append(alert)
            if _RANK[wanted] > _RANK[action]:
                action = "stop" if wanted == "stop" else "pause"
    return Decision(action, tuple(making), True, view.resumed)


class Guard:
    """The decision one run's view gives, kept current by a `RunViewFollower`.

    `should_pause()` / `should_stop()` / `decision` never touch the network; `wait()` blocks
    while paused; `on_change(decision)` is called from the follower's thread when it changes.
    Without a follower (events go to a directory) it always says run.
    """

    def __init__(
        self,
        follower: RunViewFollower | None,
        run: str,
        rules: Iterable[str] | Mapping[str, str] | None = None,
        *,
        poll_interval: float = 5.0,
        on_change: Callable[[Decision], None] | None = None,
    ) -> None:
        if not poll_interval > 0:
            raise ValueError("poll_interval must be a positive number of seconds")
        self.run = run
        self.policy = policy_of(rules)
        self.follower = follower
        self.poll_interval = float(poll_interval)
        self.on_change = on_change
        self.failures = 0  # looks at the service that failed (each one failed open)
        self.looks = 0  # looks that succeeded
        self._decision = RUN
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self._down = False
        if follower is not None:
            follower.follow(self, self.poll_interval)

    @property
    def decision(self) -> Decision:
        return self._decision

    def should_pause(self) -> bool:
        """True while an alert asks the run to pause (or to stop)."""
        return self._decision.action != "run"

    def should_stop(self) -> bool:
        return self._decision.action == "stop"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def refresh(self) -> Decision:
        """Look at the service now (the follower does this every `poll_interval`)."""
        if self.follower is not None:
            self.follower.look()  # a failure is `missed`: the decision says it
        return self._decision

    def see(self, view: RunView | None) -> None:
        """A view the follower read."""
        self.looks += 1
        if self._down:
            self._down = False
            log.warning("runwatch guard: reading run %s's alerts again", self.run)
        self._set(decide(view, self.policy))

    def missed(self, err: Exception) -> None:
        """A look that failed: fail open, whatever went wrong, and say so once per outage."""
        self.failures += 1
        if not self._down:
            self._down = True
            where = self.follower.source.name if self.follower is not None else "runwatch"
            log.warning("runwatch guard: cannot read run %s's alerts from %s (%s); "
                        "training goes on unguarded until it can", self.run, where,
                        _one_line(err))  # fmt: skip
        self._set(Decision(reachable=False))

    def _set(self, decision: Decision) -> None:
        with self._changed:
            old, self._decision = self._decision, decision
            self._changed.notify_all()
        if decision != old and self.on_change is not None:
            try:
                self.on_change(decision)
            except Exception:
                log.exception("runwatch guard: on_change failed")

    def wait(self, timeout: float | None = None) -> Decision:
        """Block while the decision is pause (not stop): until a person resumes the run, the
        alert resolves, the service cannot be reached (fail open), `timeout`, or `close()`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._decision.action == "pause" and not self._closed.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._changed.wait(left if left is not None else 1.0)
            return self._decision

    def close(self) -> None:
        """No more decisions from the view (the follower is its emitter's to close)."""
        self._closed.set()
        if self.follower is not None:
            self.follower.drop(self)
        with self._changed:
            self._changed.notify_all()


class StopTraining(SystemExit):
    """Raised in the training loop when an alert's policy says `stop`: a SystemExit, so the
    trainer's own `except Exception` does not swallow it, and the process ends with the
    reason as its last line."""


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:300] or type(err).__name__
