"""`runwatch serve` restarts from the checkpoint beside its logs: killed between two
checkpoints in the middle of incidents, it replays only what was logged since the last one,
and its alert log ends up as an uninterrupted service's; a checkpoint it cannot use (damaged,
of another format) costs a full replay, never an alert."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from runwatch.dev.scenarios import orchestrator_dies, sandbox_hang, zero_reward
from runwatch.service.core import Service
from runwatch.stream import checkpoint

EVENTS = sorted(sandbox_hang() + zero_reward() + orchestrator_dies(), key=lambda e: e["ts"])
BATCH = 250
BATCHES = [EVENTS[i : i + BATCH] for i in range(0, len(EVENTS), BATCH)]

#: services started and replayed: `make test`, not the inner loop
pytestmark = pytest.mark.slow


class Clock:
    """The service's wall clock: 50 ms after the latest event handed to it."""

    def __init__(self) -> None:
        self.now = EVENTS[0]["ts"]

    def __call__(self) -> float:
        return self.now


def serve(wal: Path, clock: Clock) -> Service:
    return Service(wal / "h.duckdb", wal, clock=clock)


def play(service: Service, clock: Clock, batches: list[list[dict[str, object]]]) -> None:
    """Requests as emitters send them, the timer turning between them."""
    for batch in batches:
        clock.now = float(batch[-1]["ts"]) + 0.05  # type: ignore[arg-type]
        assert service.ingest([orjson.dumps(e) for e in batch]).accepted == len(batch)
        service.tick()


def kill(service: Service) -> None:
    """What kill -9 leaves: the logs as written, no last checkpoint."""
    service.history.stop()
    service.events.close()
    service.alert_log.close()
    service.lock_file.close()


def transitions(wal: Path) -> list[tuple[str, str, float]]:
    lines = (wal / "alerts.jsonl").read_bytes().splitlines()
    return [(a["id"], a["state"], a["ts"]) for a in map(orjson.loads, lines)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, float]]:
    wal, clock = tmp_path_factory.mktemp("whole"), Clock()
    service = serve(wal, clock)
    service.recover()
    play(service, clock, BATCHES)
    service.close()
    rules = {
        orjson.loads(line)["rule"] for line in (wal / "alerts.jsonl").read_bytes().splitlines()
    }
    assert {"inference_idle_with_pending", "zero_reward", "heartbeat_lost"} <= rules
    return transitions(wal)


def crash_and_restart(
    wal: Path, damage: Callable[[Path], None] | None = None
) -> tuple[int, list[tuple[str, str, float]]]:
    """Checkpoint at 40%, killed at 60%, restarted; (events replayed, transitions)."""
    clock = Clock()
    at, crash = len(BATCHES) * 4 // 10, len(BATCHES) * 6 // 10
    service = serve(wal, clock)
    service.recover()
    play(service, clock, BATCHES[:at])
    assert service.checkpoint()
    play(service, clock, BATCHES[at:crash])
    kill(service)
    if damage is not None:
        damage(wal / "state.ckpt")
    service = serve(wal, clock)
    replayed = service.recover()
    play(service, clock, BATCHES[crash:])
    service.close()
    return replayed, transitions(wal)


def test_a_restart_replays_only_what_followed_the_checkpoint(
    tmp_path: Path, uninterrupted: list[tuple[str, str, float]]
) -> None:
    replayed, made = crash_and_restart(tmp_path)
    at, crash = len(BATCHES) * 4 // 10, len(BATCHES) * 6 // 10
    assert replayed == sum(len(b) for b in BATCHES[at:crash])
    assert made == uninterrupted  # nothing lost, nothing said twice, in order


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _older(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:4] + struct.pack(">H", checkpoint.FORMAT - 1) + data[6:])


@pytest.mark.parametrize("damage", [_flip, _older], ids=["damaged", "older-format"])
def test_a_checkpoint_that_cannot_be_used_costs_a_full_replay_and_no_alert(
    tmp_path: Path,
    uninterrupted: list[tuple[str, str, float]],
    damage: Callable[[Path], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    replayed, made = crash_and_restart(tmp_path, damage)
    crash = len(BATCHES) * 6 // 10
    assert replayed == sum(len(b) for b in BATCHES[:crash])
    assert made == uninterrupted
    said = [r.getMessage() for r in caplog.records if "state.ckpt" in r.getMessage()]
    assert len(said) == 1
    assert "replaying the whole event log" in said[0]
