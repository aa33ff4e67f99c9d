"""Training steps of a run: timings, rewards, the metrics rules watch, and GPU-idle gaps."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from runwatch.stream.state.compact import Compact


class Metrics(tuple[str | float | None, ...]):
    """A step's watched metrics, or its phase timings, flat: (key, value, key, value, ...).
    A step keeps the one or few keys some rule watches, and a run's latest steps keep their
    timings; a dict of two keys costs 184 bytes, this 72 (of twelve, verl's phases: 464 and
    232), and a run keeps 53 steps (bench/memory.py). Read with `get`, as a dict."""

    __slots__ = ()

    @classmethod
    def of(cls, values: Mapping[str, float | None]) -> Metrics:
        return cls(x for pair in values.items() for x in pair)

    def get(self, key: str) -> float | None:
        # values are numbers or None, never equal to a key: the first match is a key's slot,
        # found by the tuple's own C search, not a Python loop over the pairs
        if key in self:
            return self[self.index(key) + 1]  # type: ignore[return-value]
        return None

    def items(self) -> list[tuple[str, float | None]]:
        return list(zip(self[::2], self[1::2], strict=True))  # type: ignore[arg-type]

    def updated(self, values: Mapping[str, float | None]) -> Metrics:
        """These metrics with `values` set (a later `step.metrics` of the step)."""
        merged = dict(self.items())
        merged.update(values)
        return Metrics.of(merged)


#: what a step has before any watched metric (shared by every such step)
NO_METRICS = Metrics()


class _Reads:
    """What the rules ask of a step, whole (`Step`) or past (`PastStep`)."""

    __slots__ = ()
    number: int
    metrics: Metrics
    reward_mean: float | None
    groups: dict[str, list[float]] | None

    def degenerate(self, epsilon: float) -> tuple[int, int]:
        """(groups whose rewards are all equal, groups of two or more trajectories)."""
        groups = [g for g in (self.groups or {}).values() if g[0] >= 2]
        return sum(1 for g in groups if g[2] - g[1] <= epsilon), len(groups)

    def reward(self, reward_keys: Iterable[str]) -> float | None:
        """The step reward: the `reward` event's mean, else the first reward key logged."""
        if self.reward_mean is not None:
            return self.reward_mean
        for key in reward_keys:
            value = self.metrics.get(key)
            if value is not None:
                return value
        return None


class Step(_Reads, Compact):
    """What runwatch keeps about one training step."""

    __slots__ = (
        "done",
        "duration",
        "gap",
        "groups",
        "metrics",
        "metrics_ts",
        "nonfinite",
        "nonfinite_ts",
        "number",
        "reward_mean",
        "reward_ts",
        "started",
        "timing",
    )

    def __init__(self, number: int) -> None:
        self.number = number
        self.started: float | None = None
        self.done: float | None = None
        self.duration: float | None = None
        #: seconds of this step during which inference was idle while trajectories waited
        self.gap = 0.0
        self.reward_mean: float | None = None  # from the step's `reward` event
        self.reward_ts: float | None = None
        self.metrics = NO_METRICS  # only the keys some rule watches
        self.metrics_ts: float | None = None
        self.nonfinite: list[str] | None = None  # metric keys that were NaN/inf
        self.nonfinite_ts: float | None = None  # when the first of them was reported
        self.timing: Metrics | None = None  # seconds per phase (step.done.timing)
        #: prompt group -> [trajectories, lowest reward, highest reward] (GRPO groups)
        self.groups: dict[str, list[float]] | None = None


class PastStep(_Reads, Compact):
    """A step older than the latest `Steps.keep`, kept only for what a rule reads that far
    back (`StateConfig.metric_steps`: a spike rule's baseline): its number, its watched
    metrics and when they came. Its other fields read as those of a step that never had
    them, so a rule that meets one (a run's config that widened `keep`) reads no data, not
    an error. A late event of it makes it whole again (`Steps.get`)."""

    __slots__ = ("metrics", "metrics_ts", "number")

    started = done = duration = reward_mean = reward_ts = None
    nonfinite = nonfinite_ts = timing = groups = None
    gap = 0.0

    def __init__(self, step: Step) -> None:
        self.number = step.number
        self.metrics = step.metrics
        self.metrics_ts = step.metrics_ts


class Steps:
    """The last `keep` steps by number, whole, and before them up to `depth` steps in all
    as `PastStep`s; plus the GPU-idle accounting of open steps."""

    __slots__ = ("by_number", "depth", "early", "early_keys", "early_n", "grouped", "keep",
                 "last_done", "latest", "logged", "memo", "settled", "timing_steps",
                 "watched")  # fmt: skip

    def __init__(
        self, keep: int, watched: frozenset[str], timing_steps: int = 0, depth: int = 0
    ) -> None:
        #: in step order (`get` keeps it so), so that the latest steps are its last values
        self.by_number: dict[int, Step | PastStep] = {}
        self.keep = keep
        #: steps kept in all, the oldest past the latest `keep` as `PastStep`s
        self.depth = max(keep, depth)
        self.watched = watched  # metric keys kept per step
        #: a done step's `timing` is kept while it is one of the latest `timing_steps`
        self.timing_steps = timing_steps
        self.latest: int | None = None  # highest step number seen
        self.last_done: Step | None = None
        #: the first `early_n` finite values of each of `early_keys`, in the order they came
        self.early: dict[str, list[float]] = {}
        self.early_keys: frozenset[str] = frozenset()
        self.early_n = 0
        #: counts changes to what the done steps say about their groups (a step done, a
        #: late trajectory of a done step, a step let go): a rule over them re-reads only
        #: when it moved
        self.settled = 0
        #: what such a rule read last, by rule id: (settled, parameters' hash, result)
        self.memo: dict[str, tuple[int, int, tuple[float, float] | None]] = {}
        #: a trajectory of the run said its prompt group (most runs' never do)
        self.grouped = False
        #: the watched metric keys some step logged (of those kept, or let go since): a rule
        #: looking for the first of its keys the run logs passes over the others unread.
        #: Shared between runs that logged the same keys
        self.logged: frozenset[str] = frozenset()

    def keep_early(self, keys: frozenset[str], n: int) -> None:
        self.early_keys, self.early_n = keys, n

    def get(self, number: int) -> Step:
        """Step `number`, whole: made (a new step), or made whole again (a late event of a
        past step)."""
        by_number = self.by_number
        step = by_number.get(number)
        if type(step) is Step:
            return step
        late = step is None and bool(by_number) and number < next(reversed(by_number))
        whole = by_number[number] = Step(number)
        if step is not None:  # a past step: what it kept comes back
            whole.metrics, whole.metrics_ts = step.metrics, step.metrics_ts
            return whole
        if late:  # a step older than one kept (a late event): back into step order
            self.by_number = by_number = dict(sorted(by_number.items()))
        if self.latest is None or number > self.latest:
            self.latest = number
        if len(by_number) > self.keep:
            self._past()
        return whole

    def _past(self) -> None:
        """Past the latest `keep`: steps made `PastStep`s, and past `depth` let go. The dict
        is made anew: one that steps pass through grows to twice the entries it holds."""
        steps = list(self.by_number.items())
        if len(steps) > self.depth:
            steps = steps[len(steps) - self.depth :]
        self.settled += 1  # a step left the latest `keep`, which the rules over groups read
        last = self.last_done
        for i in range(len(steps) - self.keep):
            number, step = steps[i]
            if type(step) is Step and step is not last:
                steps[i] = number, PastStep(step)
        self.by_number = dict(steps)

    def recent(self, count: int) -> list[Step]:
        """Up to `count` most recent steps, oldest first: whole within the latest `keep`
        (what every rule but those of `StateConfig.metric_steps` reads), past before them."""
        return list(self.by_number.values())[-count:]  # type: ignore[return-value]

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        for name, value in state[1].items():
            setattr(self, name, value)
        self.by_number = dict(sorted(self.by_number.items()))  # step order, whoever wrote it

    def started(self, number: int, ts: float) -> None:
        step = self.get(number)
        if step.started is None or ts < step.started:
            step.started = ts

    def done(
        self,
        number: int,
        ts: float,
        duration: float | None,
        idle_since: float | None,
        timing: dict[str, float] | None = None,
    ) -> Step:
        step = self.get(number)
        if step.done is None:
            self.settled += 1
            step.done = ts
            step.duration = duration
            if timing and self.timing_steps:
                step.timing = Metrics.of(timing)
                older = self.by_number.get(number - self.timing_steps)
                if older is not None and older.timing is not None:  # (a past step has none)
                    older.timing = None
            if duration is None and step.started is not None:
                step.duration = ts - step.started
            if idle_since is not None:
                self._add_gap(step, idle_since, ts)
            if self.last_done is None or number >= self.last_done.number:
                self.last_done = step
        return step

    def idle_span(self, start: float, end: float) -> None:
        """Attribute a finished idle span to every step open during it."""
        for step in self.by_number.values():
            if step.started is not None and step.done is None:
                self._add_gap(step, start, end)

    @staticmethod
    def _add_gap(step: Step, start: float, end: float) -> None:
        begin = max(start, step.started) if step.started is not None else start
        if end > begin:
            step.gap += end - begin

    def metrics(self, number: int, ts: float, metrics: Mapping[str, float | None]) -> Step:
        step = self.get(number)
        step.metrics_ts = ts if step.metrics_ts is None else max(ts, step.metrics_ts)
        bad = [k for k, v in metrics.items() if v is not None and not math.isfinite(v)]
        if bad:
            step.nonfinite = sorted(set(step.nonfinite or ()) | set(bad))
            step.nonfinite_ts = _earliest(step.nonfinite_ts, ts)
        watched = self.watched.intersection(metrics)
        if watched:
            step.metrics = step.metrics.updated({key: metrics[key] for key in watched})
            if not watched <= self.logged:
                self.logged = _shared(self.logged | watched)
        if self.early_keys:
            for key in self.early_keys.intersection(metrics):
                value = metrics[key]
                kept = self.early.setdefault(key, [])
                if value is not None and math.isfinite(value) and len(kept) < self.early_n:
                    kept.append(value)
        return step

    def group_reward(self, number: int, group: str, reward: float) -> None:
        """One finished trajectory's reward, counted in its step's prompt group."""
        step = self.get(number)
        self.grouped = True
        if step.done is not None:
            self.settled += 1
        if step.groups is None:
            step.groups = {}
        seen = step.groups.get(group)
        if seen is None:
            step.groups[group] = [1, reward, reward]
        else:
            seen[0] += 1
            seen[1], seen[2] = min(seen[1], reward), max(seen[2], reward)

    def reward(self, number: int, ts: float, mean: float) -> Step:
        step = self.get(number)
        step.reward_mean = mean
        step.reward_ts = ts
        if not math.isfinite(mean):
            step.nonfinite = sorted(set(step.nonfinite or ()) | {"reward.mean"})
            step.nonfinite_ts = _earliest(step.nonfinite_ts, ts)
        return step


#: the sets of logged keys runs hold, one object per distinct set
_LOGGED: dict[frozenset[str], frozenset[str]] = {}


def _shared(keys: frozenset[str]) -> frozenset[str]:
    if len(_LOGGED) > 4096:  # bounded: runs that log ever other keys must not grow it
        _LOGGED.clear()
    return _LOGGED.setdefault(keys, keys)


def _earliest(current: float | None, ts: float) -> float:
    return ts if current is None else min(current, ts)
