"""The contract's event kinds, one model each, grouped by what emits them.

Importing any of these modules imports this package first, which defines every kind in the
order of the tables of kinds (`KNOWN_KINDS` keeps the order the models are defined in). A new
kind goes in the module of its group.
"""

# isort: off
from runwatch.emitters.kinds import run
from runwatch.emitters.kinds import rollout
from runwatch.emitters.kinds import processes
from runwatch.emitters.kinds import fleet

# isort: on

__all__ = ["fleet", "processes", "rollout", "run"]
