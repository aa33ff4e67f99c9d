"""A worker's copy of the fleet stage's decisions: which run incidents belong to which fleet
incident (`runwatch.stream.fleet.members`), followed on the compacted members topic, from its
start (its latest record) and then as the stage publishes, read `read_committed` like every
runwatch consumer -- so a fenced stage's decisions are seen by no worker. What it holds
stamps `incident.fleet` on the transitions the worker publishes (`publish.py`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from runwatch.emitters.topics import Topics
from runwatch.stream.exceptions import InvalidFleetRecord
from runwatch.stream.fleet.members import KEY, Members, Membership
from runwatch.stream.kafka.clients import Connects
from runwatch.stream.kafka.read import read_topic

log = logging.getLogger("runwatch.stream.worker")


async def follow(
    kafka: Connects,
    topics: Topics,
    membership: Membership,
    stop: Callable[[], bool] = lambda: False,
) -> None:
    """Keep `membership` at the stage's newest decisions until cancelled or `stop()`; a
    record that cannot be used is said (once per reason) and passed over."""
    said: set[str] = set()

    def each(records: list[Any]) -> None:
        for record in records:
            if record.key != KEY:
                continue
            try:
                membership.update(Members.decode(record.value))
            except InvalidFleetRecord as err:
                if err.reason not in said:
                    said.add(err.reason)
                    log.warning("%s: a record passed over: %s", topics.fleet_members, err.reason)

    await read_topic(kafka, topics.fleet_members, each, until="stopped", stop=stop)
