"""Which destination the Emitter picks: RUNWATCH_KAFKA, then RUNWATCH_URL, then
RUNWATCH_SPOOL; a bad URL is refused at construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.emitters import Emitter


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
