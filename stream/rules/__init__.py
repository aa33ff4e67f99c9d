"""Built-in and custom alert rules: one module each, pure functions of state and time."""

from typing import Any

from runwatch.stream.rules.base import Condition, Description, Params, Rule, Verdict
from runwatch.stream.rules.collective_timeout import CollectiveTimeout
from runwatch.stream.rules.component_failed import ComponentFailed
from runwatch.stream.rules.custom_absent import Absent
from runwatch.stream.rules.custom_metric import MetricThreshold
from runwatch.stream.rules.degenerate_groups import DegenerateGroups
from runwatch.stream.rules.emitter_dropping import EmitterDropping
from runwatch.stream.rules.entropy_collapse import EntropyCollapse
from runwatch.stream.rules.heartbeat_lost import HeartbeatLost
from runwatch.stream.rules.idle_gap import IdleGapGrowing
from runwatch.stream.rules.inference_idle import InferenceIdleWithPending
from runwatch.stream.rules.inference_stalled import InferenceStalled
from runwatch.stream.rules.non_finite import NonFiniteMetric
from runwatch.stream.rules.process_stacks import ProcessStacks
from runwatch.stream.rules.ranks_stalled import RanksStalled
from runwatch.stream.rules.response_length import ResponseLengthDrift
from runwatch.stream.rules.restart_loop import RestartLoop
from runwatch.stream.rules.spike import GradNormSpike, KlSpike
from runwatch.stream.rules.staleness import StalenessGrowing
from runwatch.stream.rules.step_slowdown import StepSlowdown
from runwatch.stream.rules.stuck_progress import StuckProgress
from runwatch.stream.rules.weight_sync import WeightSyncStalled
from runwatch.stream.rules.zero_reward import ZeroReward

#: The contract's built-in rules (section 4) and runwatch's additions (section 7:
#: emitter_dropping, kl_spike, grad_norm_spike, entropy_collapse, response_length_drift,
#: step_slowdown, weight_sync_stalled, restart_loop, staleness_growing, degenerate_groups,
#: collective_timeout, component_failed, inference_stalled, process_stacks), in the order
#: they are evaluated.
BUILTIN_RULES: tuple[type[Rule[Any]], ...] = (
    InferenceIdleWithPending,
    ZeroReward,
    StuckProgress,
    HeartbeatLost,
    RanksStalled,
    NonFiniteMetric,
    IdleGapGrowing,
    EmitterDropping,
    KlSpike,
    GradNormSpike,
    EntropyCollapse,
    ResponseLengthDrift,
    StepSlowdown,
    WeightSyncStalled,
    RestartLoop,
    StalenessGrowing,
    DegenerateGroups,
    CollectiveTimeout,
    ComponentFailed,
    InferenceStalled,
    ProcessStacks,
)

#: `type` of a `[[rules.custom]]` entry -> its rule class.
CUSTOM_RULE_TYPES: dict[str, type[Rule[Any]]] = {"metric": MetricThreshold, "absent": Absent}

__all__ = [
    "BUILTIN_RULES",
    "CUSTOM_RULE_TYPES",
    "Condition",
    "Description",
    "Params",
    "Rule",
    "Verdict",
]
