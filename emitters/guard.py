"""The circuit breaker, trainer side: a run's own alerts reach its training loop.

`guard = em.guard(rules={"zero_reward", "non_finite_metric"})` starts one daemon thread that
reads the run's breaker view (`runwatch.stream.breaker`: the alerts firing now that no person
lifted, with their rule's configured `action`) from where the emitter sends its events --
`GET /v1/breaker/RUN` of `runwatch serve`, or the compacted `runwatch.breaker` topic on
Kafka -- every `poll_interval` seconds. The training loop asks, once a step:

    if em.should_pause():        # cheap: reads the last decision, never the network
        save_checkpoint()
        guard.wait()             # until a person runs `runwatch resume RUN` or it resolves

An alert pauses when its rule's policy in the service's config (or the run's
`run.started.config`) says `action = "pause"` or `"stop"`; when the config says nothing, the
trainer's own `rules` decide (a set: pause on those; a mapping: rule -> "pause" / "stop").
`"notify"` in the config means never. A lifted or resolved alert no longer pauses.

It fails open: a service or broker that cannot be reached, or answers nonsense, gives "run"
(counted in `failures`, said once per outage), so runwatch being down never stops training.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import quote

from runwatch.emitters.http import ServiceClient

log = logging.getLogger("runwatch.emitters")

#: what the guard tells the training loop (an alert's policy, `Action` on the alert, says
#: pause, stop or notify; the guard's verdict combines them with the trainer's own)
Verdict = Literal["run", "pause", "stop"]
_RANK = {"run": 0, "pause": 1, "stop": 2}


@dataclass(frozen=True)
class Decision:
    """What the training loop should do now, and why."""

    action: Verdict = "run"
    #: the alerts that make it (rule, severity, since, ... as in the view)
    alerts: tuple[dict[str, Any], ...] = ()
    #: False: the last look at the service failed, and the guard fails open
    reachable: bool = True
    #: the latest `run.resumed` the service saw (ts, by, rule), if any
    resumed: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def reason(self) -> str:
        """One line for a person: which alerts, since when."""
        if not self.alerts:
            return "no alert asks for it" if self.reachable else "runwatch cannot be reached"
        parts = []
        for a in self.alerts:
            since = time.strftime("%H:%M:%S", time.localtime(float(a.get("since", 0))))
            who = f" ({a['subject']})" if a.get("subject") else ""
            parts.append(f"{a.get('rule')}{who} firing since {since}")
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


def decide(view: Mapping[str, Any] | None, policy: Mapping[str, str]) -> Decision:
    """Pause / stop / run from one breaker view: the config's action when it set one, else
    the trainer's policy for the rule; stop outranks pause. None (no such run yet): run."""
    if view is None:
        return RUN
    alerts = view.get("alerts")
    if not isinstance(alerts, list):
        raise ValueError("the breaker view has no list of alerts")
    action: Verdict = "run"
    making: list[dict[str, Any]] = []
    for alert in alerts:
        if not isinstance(alert, dict):
            raise ValueError("an alert of the breaker view is not an object")
        wanted = alert.get("action") or policy.get(str(alert.get("rule")), "notify")
        if wanted == "pause" or wanted == "stop":
            making.append(alert)
            if _RANK[wanted] > _RANK[action]:
                action = "stop" if wanted == "stop" else "pause"
    resumed = view.get("resumed")
    return Decision(action, tuple(making), True, resumed if isinstance(resumed, dict) else None)


class ViewSource(Protocol):
    """Where a guard reads its run's breaker view."""

    name: str

    def fetch(self) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class HttpSource:
    """`GET /v1/breaker/RUN` of `runwatch serve` (standard library only)."""

    def __init__(self, url: str, run: str, token: str | None, timeout: float = 5.0) -> None:
        self.service = ServiceClient(url, token, timeout)
        self.name = f"runwatch at {url}"
        self._path = f"/v1/breaker/{quote(run, safe='/')}"

    def fetch(self) -> dict[str, Any] | None:
        status, body = self.service.request("GET", self._path)
        if status == 404:
            return None  # the service has not heard of the run (yet): nothing fires for it
        if status != 200:
            raise OSError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
        view = json.loads(body)
        if not isinstance(view, dict):
            raise ValueError("the breaker view is not a JSON object")
        return view

    def close(self) -> None:
        pass


class KafkaSource:
    """The run's record on the compacted breaker topic: its one partition (the producer's
    partitioner on the run id), read from the start once and then followed."""

    def __init__(
        self,
        bootstrap: str,
        run: str,
        topic: str,
        *,
        security: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.name = f"Kafka at {bootstrap}"
        self.bootstrap, self.topic, self.key = bootstrap, topic, run.encode()
        self._security, self._options = dict(security or {}), dict(options or {})
        self.timeout = timeout
        self._consumer: Any = None
        self._tp: Any = None
        self._view: dict[str, Any] | None = None

    def _connect(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.partitioner import murmur2

        from runwatch.emitters.producer import reachable

        if not reachable(self.bootstrap, self._options, min(self.timeout, 1.0)):
            raise OSError("no bootstrap server accepts connections")
        ms = int(self.timeout * 1000)
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap.split(","), group_id=None,
            enable_auto_commit=False, request_timeout_ms=max(ms, 1000) + 500,
            bootstrap_timeout_ms=ms, reconnect_backoff_max_ms=1000,
            **self._security,
            # the emitter's options are a producer's: pass on those a consumer has too
            **{k: v for k, v in self._options.items() if k in KafkaConsumer.DEFAULT_CONFIG},
        )  # fmt: skip
        try:
            partitions = consumer.partitions_for_topic(self.topic)
            if not partitions:
                raise OSError(f"no topic {self.topic} (has a worker run against this broker?)")
            ordered = sorted(partitions)  # the producers' default partitioner, as in Java
            tp = TopicPartition(
                self.topic, ordered[(murmur2(self.key) & 0x7FFFFFFF) % len(ordered)]
            )
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
        except BaseException:
            consumer.close()
            raise
        self._consumer, self._tp = consumer, tp

    def fetch(self) -> dict[str, Any] | None:
        if self._consumer is None:
            self._connect()
        consumer, tp = self._consumer, self._tp
        try:
            # asking for the end is also the probe that the broker is still there
            end = consumer.end_offsets([tp])[tp]
            deadline = time.monotonic() + self.timeout
            while consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise OSError(f"could not read {self.topic} up to its end in time")
                for records in consumer.poll(timeout_ms=200).values():
                    for record in records:
                        if record.key == self.key and record.value is not None:
                            self._view = json.loads(record.value)
        except Exception:
            self.close()  # start over next time: a new connection, read from the start
            raise
        return self._view

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


class Guard:
    """A background reader of one run's breaker view, and the decision it gives.

    `should_pause()` / `should_stop()` / `decision` never touch the network; `wait()` blocks
    while paused; `on_change(decision)` is called from the guard's thread when it changes.
    """

    def __init__(
        self,
        source: ViewSource | None,
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
        self.source = source
        self.poll_interval = float(poll_interval)
        self.on_change = on_change
        self.failures = 0  # looks at the service that failed (each one failed open)
        self.looks = 0  # looks that succeeded
        self._decision = RUN
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._down = False
        self._thread: threading.Thread | None = None
        if source is not None:
            self._thread = threading.Thread(
                target=self._follow, name=f"runwatch-guard-{run}", daemon=True
            )
            self._thread.start()

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
        return self._stop.is_set()

    def refresh(self) -> Decision:
        """Look at the service now (the thread does this every `poll_interval`)."""
        if self.source is None:
            return self._decision
        try:
            decision = decide(self.source.fetch(), self.policy)
        except Exception as err:  # fail open: whatever went wrong, training goes on
            self.failures += 1
            if not self._down:
                self._down = True
                log.warning("runwatch guard: cannot read run %s's alerts from %s (%s); "
                            "training goes on unguarded until it can", self.run,
                            self.source.name, _one_line(err))  # fmt: skip
            decision = Decision(reachable=False)
        else:
            self.looks += 1
            if self._down:
                self._down = False
                log.warning("runwatch guard: reading run %s's alerts again", self.run)
        self._set(decision)
        return decision

    def _set(self, decision: Decision) -> None:
        with self._changed:
            old, self._decision = self._decision, decision
            self._changed.notify_all()
        if decision != old and self.on_change is not None:
            try:
                self.on_change(decision)
            except Exception:
                log.exception("runwatch guard: on_change failed")

    def _follow(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.poll_interval)

    def wait(self, timeout: float | None = None) -> Decision:
        """Block while the decision is pause (not stop): until a person resumes the run, the
        alert resolves, the service cannot be reached (fail open), `timeout`, or `close()`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._decision.action == "pause" and not self._stop.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._changed.wait(left if left is not None else 1.0)
            return self._decision

    def close(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self.source is not None:
            self.source.close()


class StopTraining(SystemExit):
    """Raised in the training loop when an alert's policy says `stop`: a SystemExit, so the
    trainer's own `except Exception` does not swallow it, and the process ends with the
    reason as its last line."""


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:300] or type(err).__name__
