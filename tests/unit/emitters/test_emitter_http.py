"""Which destination the Emitter picks: RUNWATCH_KAFKA, then RUNWATCH_URL, then
RUNWATCH_SPOOL; a bad URL is refused at construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.emitters import Emitter
from runwatch.service.core import Service
from runwatch.service.http import ServiceServer


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("RUNWATCH_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RUNWATCH_SPOOL", str(tmp_path / "spool"))
    monkeypatch.delenv("RUNWATCH_KAFKA", raising=False)
    return monkeypatch


def test_kafka_wins_over_url(env: pytest.MonkeyPatch) -> None:
    env.setenv("RUNWATCH_KAFKA", "127.0.0.1:9")
    em = Emitter(run="r", component="trainer", heartbeat=False, close_timeout=0.1)
    try:
        assert em.kafka == "127.0.0.1:9"
        assert em.url is None
    finally:
        em.close()


def test_url_wins_over_the_spool(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    em = Emitter(run="r", component="trainer", heartbeat=False, close_timeout=0.1)
    try:
        assert em.url == "http://127.0.0.1:9"
        assert em.path is None
        assert "url=" in repr(em)
    finally:
        em.close()


def test_a_bad_url_is_refused(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="url must be"):
        Emitter(run="r", component="trainer", url="ftp://x", heartbeat=False)
    with pytest.raises(ValueError, match="one of"):
        Emitter(run="r", component="trainer", url="http://x", path="d", heartbeat=False)


def test_an_emitter_that_never_had_to_spool_leaves_no_spool_directory(tmp_path: Path) -> None:
    """Reachable serve, clean close: nothing under the spool base (every `watch --url` left
    an empty directory there: its first heartbeat raced the start and went to disk)."""
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve", flush_interval=0.05)
    service.recover()
    front = ServiceServer(("127.0.0.1", 0), service, None, threads=2)
    front.start()
    url = f"http://127.0.0.1:{front.server_address[1]}"
    try:
        for i in range(10):  # the race was lost most times: ten starts lose it for sure
            with Emitter(run=f"r{i}", component="trainer", url=url, spool=tmp_path / "spool",
                         close_timeout=30) as em:  # fmt: skip
                em.emit("step.done", step=1, duration_s=1.0)
                assert em.flush(timeout=30)
            assert em.dropped == 0
        assert {r["run"] for r in service.runs()} >= {f"r{i}" for i in range(10)}
    finally:
        front.stop(timeout=30)
        service.close()
    assert not (tmp_path / "spool").exists(), sorted((tmp_path / "spool").rglob("*"))
