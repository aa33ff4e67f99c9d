"""The environment's one reader: where events go, in which order, and the history's default."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runwatch.emitters import env
from runwatch.emitters.env import Destination


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (env.KAFKA, env.URL, env.SPOOL, env.DB):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_kafka_wins_over_the_url_and_the_url_over_the_spool(clean: pytest.MonkeyPatch) -> None:
    clean.setenv(env.SPOOL, "/spool")
    assert env.destination() == Destination(spool="/spool")
    clean.setenv(env.URL, "http://h:8787")
    assert env.destination() == Destination(url="http://h:8787")
    clean.setenv(env.KAFKA, "k:9092")
    assert env.destination() == Destination(kafka="k:9092")


def test_a_destination_given_wins_over_the_environment(clean: pytest.MonkeyPatch) -> None:
    clean.setenv(env.KAFKA, "k:9092")
    assert env.destination(url="http://h:8787") == Destination(url="http://h:8787")
    assert env.destination(spool="/s") == Destination(spool="/s")
    assert env.destination(kafka="a:1", url="http://h") == Destination(kafka="a:1")


def test_empty_variables_count_as_unset(clean: pytest.MonkeyPatch) -> None:
    clean.setenv(env.KAFKA, "")
    clean.setenv(env.URL, "")
    assert not env.destination()
    clean.setenv(env.DB, "")
    assert env.db() == "runwatch.duckdb"


def test_the_history_file(clean: pytest.MonkeyPatch) -> None:
    assert env.db() == "runwatch.duckdb"
    clean.setenv(env.DB, "/data/h.duckdb")
    assert env.db() == "/data/h.duckdb"
    assert env.db("given.duckdb") == "given.duckdb"


@pytest.mark.parametrize(
    ("name", "read", "default"),
    [
        (env.SPOOL_MAX_AGE, lambda: env.spool_max_age(), None),
        (env.LAST_WORD, lambda: env.last_word(300.0), 300.0),
        (env.OVERFLOW_STEPS, lambda: env.overflow_steps(32), 32),
    ],
)
def test_a_mistyped_variable_is_said_once_and_the_default_holds(
    clean: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    name: str,
    read: Callable[[], object],
    default: object,
) -> None:
    """A typo (`5 min`, `three`) must not pass silently for the default: the user would
    believe the value they wrote is in force."""
    clean.setattr("runwatch.emitters.once._SAID", set())
    clean.setenv(name, "5 mins")
    with caplog.at_level("WARNING", logger="runwatch.emitters"):
        assert read() == default
        assert read() == default
    said = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(said) == 1, said
    assert "'5 mins'" in said[0]
    assert "ignored" in said[0]


def test_a_good_value_is_read_and_nothing_said(
    clean: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean.setenv(env.LAST_WORD, "2m")
    clean.setenv(env.OVERFLOW_STEPS, "4")
    with caplog.at_level("WARNING", logger="runwatch.emitters"):
        assert env.last_word(300.0) == 120.0
        assert env.overflow_steps(32) == 4
    assert caplog.records == []
