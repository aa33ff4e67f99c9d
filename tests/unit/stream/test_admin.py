"""Topics just created: their partition counts are read once the broker's metadata has them,
not as the zero partitions a loaded broker first answers with."""

from __future__ import annotations

import asyncio
from typing import Any

from runwatch.stream.kafka import admin


class SlowMetadata:
    """Answers as a loaded broker does: the new topics without partitions (error 5,
    LEADER_NOT_AVAILABLE) for the first `slow` questions."""

    def __init__(self, slow: int) -> None:
        self.slow, self.asked = slow, 0

    async def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        self.asked += 1
        ready = self.asked > self.slow
        return [{"topic": n, "error_code": 0 if ready else 5,
                 "partitions": [{"partition": p} for p in range(3)] if ready else []}
                for n in names]  # fmt: skip


def test_partitions_are_read_once_the_metadata_has_them() -> None:
    metadata = SlowMetadata(slow=3)
    counts = asyncio.run(admin._partitions(metadata, ["a.events", "a.alerts"]))  # type: ignore[arg-type]
    assert counts == {"a.events": 3, "a.alerts": 3}
    assert metadata.asked == 4


def test_a_broker_that_never_settles_gives_what_it_says_at_the_deadline(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(admin, "SETTLE_S", 0.0)
    counts = asyncio.run(admin._partitions(SlowMetadata(slow=99), ["a.events"]))  # type: ignore[arg-type]
    assert counts == {"a.events": 0}
