"""serve's JSON API past ingest and live state: the history (runs, a run's timeline, SQL),
silences, and lifting a run's circuit breaker -- what `runwatch runs|show|sql|silence|resume
--url` ask, and what a web page can ask the same way (docs/serve.md lists every endpoint).

Each handler takes the parsed request and returns `(status, body, content type)`; bodies
sent to it are JSON objects, checked by a model that names the bad field.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runwatch.emitters import env
from runwatch.emitters.events import describe_errors
from runwatch.notify.store import NotifyStore
from runwatch.service.core import Service
from runwatch.store.exceptions import NoSuchRun, NotAStore, QueryFailed, QueryRefused, StoreError
from runwatch.store.report import list_runs, run_timeline
from runwatch.store.sql import query
from runwatch.stream.exceptions import ConfigError

Answer = tuple[int, bytes, str]

#: Rows a statement sent to `POST /v1/sql` returns at most (the answer says it was cut).
MAX_ROWS = 10_000
#: A statement running longer is interrupted: the history waits while it reads.
SQL_TIMEOUT_S = 30.0


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return str(value)  # datetimes, UUIDs, intervals: as DuckDB prints them


def json_answer(status: int, body: Any) -> Answer:
    data = orjson.dumps(body, default=_default, option=orjson.OPT_NON_STR_KEYS)
    return status, data + b"\n", "application/json"


def error(status: int, why: str) -> Answer:
    return json_answer(status, {"error": why})


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NewSilence(_Body):
    run: str = Field(min_length=1, max_length=200)
    rule: str | None = Field(default=None, min_length=1, max_length=200)
    for_s: float = Field(gt=0, le=366 * 86400)
    comment: str = Field(default="", max_length=1000)


class Resume(_Body):
    run: str = Field(min_length=1, max_length=200)
    rule: str | None = Field(default=None, min_length=1, max_length=200)
    reason: str | None = Field(default=None, max_length=200)
    by: str | None = Field(default=None, max_length=200)


class Sql(_Body):
    query: str = Field(min_length=1, max_length=100_000)
    max_rows: int = Field(default=MAX_ROWS, ge=1, le=MAX_ROWS)


def parse(model: type[_Body], body: bytes) -> _Body | Answer:
    """The request's JSON object as `model`, or the 400 that names what is wrong."""
    try:
        raw = orjson.loads(body or b"null")
    except orjson.JSONDecodeError as err:
        return error(400, f"the body is not JSON: {err}")
    if not isinstance(raw, dict):
        return error(400, "the body must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        return error(400, describe_errors(err, limit=3))


# -- the history -----------------------------------------------------------------------------


def _history(service: Service, read: Any) -> Answer:
    try:
        return json_answer(200, service.read_history(read))
    except NoSuchRun as err:
        return error(404, str(err))
    except NotAStore:
        return error(503, f"no history yet in {service.db}: it is written a second or so "
                     "after the first events")  # fmt: skip
    except (QueryRefused, QueryFailed) as err:
        return error(400, str(err))
    except StoreError as err:
        return error(503, str(err))


def history_runs(service: Service) -> Answer:
    """`GET /v1/history/runs`: every run in the history, as `runwatch runs` lists them."""
    return _history(service, lambda store: {"runs": list_runs(store)})


def history_run(service: Service, run: str, slowest: int) -> Answer:
    """`GET /v1/history/runs/{run}`: the run's timeline, as `runwatch show` prints it."""

    def read(store: Any) -> Any:
        try:
            return dataclasses.asdict(run_timeline(store, run, slowest=slowest))
        except StoreError as err:  # the only one it raises: no such run
            raise NoSuchRun(str(err)) from None

    return _history(service, read)


def sql(service: Service, body: bytes) -> Answer:
    """`POST /v1/sql` {"query": ...}: read-only SQL over the history (`runwatch sql`)."""
    asked = parse(Sql, body)
    if not isinstance(asked, Sql):
        return asked  # type: ignore[return-value]

    def read(store: Any) -> Any:
        timer = threading.Timer(SQL_TIMEOUT_S, store.con.interrupt)
        timer.start()
        try:
            results = query(store, asked.query, max_rows=asked.max_rows)
        finally:
            timer.cancel()
        cut = asked.max_rows
        return {
            "results": [
                {"columns": c, "rows": [list(r) for r in rows[:cut]], "truncated": len(rows) > cut}
                for c, rows in results
            ]
        }

    return _history(service, read)


# -- silences --------------------------------------------------------------------------------


def _silence(s: Any) -> dict[str, Any]:
    return dataclasses.asdict(s)


def silences(ledger: Path | None) -> Answer:
    """`GET /v1/silences`: the silences in force."""
    if ledger is None:
        return _no_slack()
    store = NotifyStore(ledger)
    try:
        return json_answer(200, {"silences": [_silence(s) for s in store.silences()]})
    finally:
        store.close()


def _unknown_rule(service: Service, rule: str | None) -> Answer | None:
    """The 400 for a rule id the service's rules do not have (naming the closest)."""
    try:
        if rule is not None:
            service.driver.engine.config.check_rule_id(rule)
    except ConfigError as err:
        return error(400, f"rule: {err}")
    return None


def add_silence(service: Service, ledger: Path | None, body: bytes) -> Answer:
    """`POST /v1/silences` {"run", "rule"?, "for_s", "comment"?}: 201 with the silence."""
    if ledger is None:
        return _no_slack()
    asked = parse(NewSilence, body)
    if not isinstance(asked, NewSilence):
        return asked  # type: ignore[return-value]
    if (unknown := _unknown_rule(service, asked.rule)) is not None:
        return unknown
    store = NotifyStore(ledger)
    try:
        until = time.time() + asked.for_s
        ident = store.add_silence(asked.run, asked.rule, until, asked.comment)
        made = next(s for s in store.silences() if s.id == ident)
        return json_answer(201, {"silence": _silence(made)})
    finally:
        store.close()


def remove_silence(ledger: Path | None, ident: str) -> Answer:
    """`DELETE /v1/silences/{id}`."""
    if ledger is None:
        return _no_slack()
    if not ident.isascii() or not ident.isdigit():
        return error(400, f"bad silence id {ident!r}: a number")
    store = NotifyStore(ledger)
    try:
        if not store.remove_silence(int(ident)):
            return error(404, f"no silence with id {ident}")
        return json_answer(200, {"removed": int(ident)})
    finally:
        store.close()


def _no_slack() -> Answer:
    return error(404, "this serve has no Slack notifier (--slack-config): silences keep "
                 "alerts out of Slack, so there is nothing to silence")  # fmt: skip


# -- resume ----------------------------------------------------------------------------------


def resume(service: Service, body: bytes) -> Answer:
    """`POST /v1/resume` {"run", "rule"?, "reason"?, "by"?}: a `run.resumed` event for the
    run, applied before the answer, which is the run view after it."""
    asked = parse(Resume, body)
    if not isinstance(asked, Resume):
        return asked  # type: ignore[return-value]
    if (unknown := _unknown_rule(service, asked.rule)) is not None:
        return unknown
    if service.run(asked.run) is None:
        return error(404, f"no run {asked.run!r} is tracked here")
    fields = {k: v for k, v in (("rule", asked.rule), ("reason", asked.reason),
                                ("by", asked.by)) if v is not None}  # fmt: skip
    event = {"v": 1, "id": uuid.uuid4().hex, "ts": service.clock(), "run": asked.run,
             "kind": "run.resumed", "src": {"component": "operator",
                                            "host": env.node()[:200]},
             **fields}  # fmt: skip
    result = service.ingest([orjson.dumps(event)], source="api")
    if result.rejected:
        return error(400, result.rejected[0].reason)
    view = service.run_view(asked.run)
    return json_answer(200, {"breaker": view.to_dict() if view is not None else None})
