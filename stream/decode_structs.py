"""The decoder's structs, one per event kind, with the bounds of their fields: generated
by `runwatch.stream.decode_gen` from the event models (`runwatch.emitters.events`) -- do
not edit; `make docs` writes it again. No pydantic here: `runwatch.stream.decode` builds
the structs from `structs` at import.
"""

# ruff: noqa: E501, N806
# mypy: disable-error-code="valid-type"
from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from msgspec import Meta

#: A struct maker: (name, tag or None, fields as (name, type[, default]), pattern-constrained
#: str fields as (dotted path, Python regex)) -> the struct type.
Make = Callable[[str, "str | None", list[tuple[Any, ...]], list[tuple[str, str]]], Any]

#: Every kind the models define, in their order.
KINDS = (
    'run.started',
    'run.finished',
    'run.resumed',
    'heartbeat',
    'step.started',
    'step.done',
    'step.metrics',
    'eval.metrics',
    'reward',
    'trajectory.started',
    'trajectory.phase',
    'trajectory.done',
    'request.queued',
    'request.done',
    'inference.stats',
    'progress',
    'rank.status',
    'weights.published',
    'weights.loaded',
    'collective.timeout',
    'component.failed',
    'process.stacks',
    'dep.held',
    'dep.canary',
    'dep.released',
)

#: Each kind's fields that must be finite numbers (not NaN or infinite).
FINITE: dict[str, tuple[str, ...]] = {
    'run.started': ('ts',),
    'run.finished': ('ts',),
    'run.resumed': ('ts',),
    'heartbeat': ('ts',),
    'step.started': ('ts',),
    'step.done': ('ts',),
    'step.metrics': ('ts',),
    'eval.metrics': ('ts',),
    'reward': ('ts',),
    'trajectory.started': ('ts',),
    'trajectory.phase': ('ts',),
    'trajectory.done': ('ts',),
    'request.queued': ('ts',),
    'request.done': ('ts',),
    'inference.stats': ('ts',),
    'progress': ('ts',),
    'rank.status': ('ts',),
    'weights.published': ('ts',),
    'weights.loaded': ('ts',),
    'collective.timeout': ('ts',),
    'component.failed': ('ts',),
    'process.stacks': ('ts',),
    'dep.held': ('ts',),
    'dep.canary': ('ts',),
    'dep.released': ('ts',),
}


def structs(make: Make) -> list[Any]:
    """Every kind's struct, made by `make`, in the order of `KINDS`."""
    Source = make(
        'Source',
        None,
        [
        ('component', Annotated[str, Meta(max_length=64)]),
        ('host', Annotated[str, Meta(max_length=200)] | None, None),
        ('pid', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('rank', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('instance', Annotated[str, Meta(max_length=200)] | None, None),
        ],
        [('component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    RunStarted = make(
        'RunStarted',
        'run.started',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('labels', dict[str, str] | None, None),
        ('config', dict[str, dict[str, Any]] | None, None),
        ('total_steps', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    RunFinished = make(
        'RunFinished',
        'run.finished',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('status', Literal['ok', 'failed', 'killed']),
        ('exit_code', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    RunResumed = make(
        'RunResumed',
        'run.resumed',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('rule', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ('by', Annotated[str, Meta(max_length=200)] | None, None),
        ('reason', Annotated[str, Meta(max_length=200)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    Heartbeat = make(
        'Heartbeat',
        'heartbeat',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('final', bool | None, None),
        ('dropped_events', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    StepStarted = make(
        'StepStarted',
        'step.started',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    StepDone = make(
        'StepDone',
        'step.done',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('duration_s', float | None, None),
        ('timing', dict[str, float] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    StepMetrics = make(
        'StepMetrics',
        'step.metrics',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('metrics', dict[str, float | None]),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    EvalMetrics = make(
        'EvalMetrics',
        'eval.metrics',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('metrics', dict[str, float | None]),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    Reward = make(
        'Reward',
        'reward',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('mean', float),
        ('count', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    TrajectoryStarted = make(
        'TrajectoryStarted',
        'trajectory.started',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('traj', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('group', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    TrajectoryPhase = make(
        'TrajectoryPhase',
        'trajectory.phase',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('traj', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('phase', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('dep', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    TrajectoryDone = make(
        'TrajectoryDone',
        'trajectory.done',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('traj', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('status', Literal['ok', 'error', 'timeout', 'aborted']),
        ('reward', float | None, None),
        ('duration_s', float | None, None),
        ('group', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    RequestQueued = make(
        'RequestQueued',
        'request.queued',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('req', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('server', Annotated[str, Meta(max_length=200)] | None, None),
        ('dep', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    RequestDone = make(
        'RequestDone',
        'request.done',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('req', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('server', Annotated[str, Meta(max_length=200)] | None, None),
        ('prompt_tokens', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('completion_tokens', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('status', Literal['ok', 'error', 'aborted'] | None, None),
        ('dep', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    InferenceStats = make(
        'InferenceStats',
        'inference.stats',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('server', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('running', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('waiting', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('kv_cache_usage', Annotated[float, Meta(ge=0.0, le=1.0)] | None, None),
        ('gen_tokens_per_s', float | None, None),
        ('prompt_tokens_per_s', float | None, None),
        ('stalled_since', float | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    Progress = make(
        'Progress',
        'progress',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('name', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('n', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('total', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    RankStatus = make(
        'RankStatus',
        'rank.status',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('rank', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('world_size', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('phase', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('since', float | None, None),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    WeightsPublished = make(
        'WeightsPublished',
        'weights.published',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('version', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('step', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    WeightsLoaded = make(
        'WeightsLoaded',
        'weights.loaded',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('version', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('server', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    CollectiveTimeout = make(
        'CollectiveTimeout',
        'collective.timeout',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('backend', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('rank', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('group_rank', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('pg', Annotated[str, Meta(max_length=200)] | None, None),
        ('op', Annotated[str, Meta(max_length=200)] | None, None),
        ('seq', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('timeout_s', float | None, None),
        ('ran_s', float | None, None),
        ('last_enqueued', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('last_completed', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ('message', Annotated[str, Meta(max_length=2000)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    ComponentFailed = make(
        'ComponentFailed',
        'component.failed',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('error', Annotated[str, Meta(max_length=2000)]),
        ('how', Literal['exception', 'fatal', 'exit']),
        ('exit_code', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    StackFrame = make(
        'StackFrame',
        None,
        [
        ('file', Annotated[str, Meta(max_length=200)]),
        ('line', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)]),
        ('function', Annotated[str, Meta(max_length=200)]),
        ],
        [],
    )
    StackThread = make(
        'StackThread',
        None,
        [
        ('name', Annotated[str, Meta(max_length=200)]),
        ('frames', Annotated[list[StackFrame], Meta(max_length=64)]),
        ],
        [],
    )
    ProcessStacks = make(
        'ProcessStacks',
        'process.stacks',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('request', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('how', Literal['emitter', 'py-spy']),
        ('threads', Annotated[list[StackThread], Meta(max_length=64)] | None, None),
        ('truncated', bool | None, None),
        ('error', Annotated[str, Meta(max_length=2000)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    DepHeld = make(
        'DepHeld',
        'dep.held',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('dep', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('fleet', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ('waiting', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    DepCanary = make(
        'DepCanary',
        'dep.canary',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('dep', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('fleet', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ('status', Literal['ok', 'error', 'timeout', 'aborted']),
        ('duration_s', float | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    DepReleased = make(
        'DepReleased',
        'dep.released',
        [
        ('v', Literal[1]),
        ('id', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('ts', float),
        ('run', str),
        ('src', Source),
        ('dep', Annotated[str, Meta(min_length=1, max_length=200)]),
        ('fleet', Annotated[str, Meta(min_length=1, max_length=200)] | None, None),
        ('reason', Literal['healthy', 'beating', 'resolved', 'unreachable', 'closed']),
        ('held_s', float | None, None),
        ('waited', Annotated[int, Meta(ge=-9223372036854775808, le=9223372036854775807)] | None, None),
        ],
        [('run', '^(?!(?:@fleet)\\Z)[A-Za-z0-9._:/@+-]{1,200}\\Z'), ('src.component', '^[a-z][a-z0-9_-]*\\Z')],
    )
    return [RunStarted, RunFinished, RunResumed, Heartbeat, StepStarted, StepDone, StepMetrics, EvalMetrics, Reward, TrajectoryStarted, TrajectoryPhase, TrajectoryDone, RequestQueued, RequestDone, InferenceStats, Progress, RankStatus, WeightsPublished, WeightsLoaded, CollectiveTimeout, ComponentFailed, ProcessStacks, DepHeld, DepCanary, DepReleased]
