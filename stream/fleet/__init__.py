"""Fleet incidents (contract section 8): when one shared thing breaks many runs, one incident
names it.

A run's incident names its cause in its root alert's details -- the service its stalled work
waits on (`dep`), the node its silent or failed process ran on (`host`), the inference
server (`server`): `causes`. The fleet stage reads each run incident as it opens and closes
(a summary per cause: `decide.Summary`) and decides (`decide.FleetBook`, pure: no I/O, no
clock, driven by summaries, so a Kafka stage can drive it from summaries re-keyed by cause)
when the incidents of enough runs that use one thing opened together, far more often than
those of runs that do not: then a `shared_cause` alert of run `@fleet` fires, and every
member run's transitions carry its id (`stage.FleetStage`, what replay, `serve` and the
backtest run beside the engine).
"""
