"""Every `RUNWATCH_*` variable runwatch reads, and the one place it reads them.

Emitters, the command wrappers and the commands take their defaults from here, so a name, a
precedence or a default is written once: where events go is `RUNWATCH_KAFKA`, else
`RUNWATCH_URL`, else `RUNWATCH_SPOOL` (a flag or argument given wins over all three); the
history file is `RUNWATCH_DB`, else `runwatch.duckdb`. An empty variable counts as unset.
(The Slack token's variables, `SLACK_BOT_TOKEN` and `SLACK_BOT_TOKEN_FILE`, are Slack's
names and are read by `runwatch.notify.slack`.)
"""

from __future__ import annotations

import os
import re
import socket
from typing import NamedTuple

from runwatch.emitters.once import say_once

RUN = "RUNWATCH_RUN"
#: the node a process runs on (`src.host`; contract section 8): on Kubernetes the downward
#: API's `spec.nodeName`, where the host name is the pod's
NODE = "RUNWATCH_NODE"
COMPONENT = "RUNWATCH_COMPONENT"
KAFKA = "RUNWATCH_KAFKA"
URL = "RUNWATCH_URL"
SPOOL = "RUNWATCH_SPOOL"
TOKEN = "RUNWATCH_TOKEN"
STRICT = "RUNWATCH_STRICT"
GUARD = "RUNWATCH_GUARD"
DB = "RUNWATCH_DB"
NOTIFY_DB = "RUNWATCH_NOTIFY_DB"
PY_SPY = "RUNWATCH_PY_SPY"
PROMETHEUS = "RUNWATCH_PROMETHEUS"
CACHE = "RUNWATCH_CACHE"
#: spooled events older than this are dropped (counted) instead of sent; unset: never
SPOOL_MAX_AGE = "RUNWATCH_SPOOL_MAX_AGE"
#: consecutive loss-scale overflow skips a console reader takes for a failure
OVERFLOW_STEPS = "RUNWATCH_OVERFLOW_STEPS"
#: how long a watched command's output stays quiet after a traceback before it counts as the
#: process's last word (a duration)
LAST_WORD = "RUNWATCH_LAST_WORD"
#: a secured Kafka (`kafka_security.KafkaSecurity.from_env`, which reads any mapping)
KAFKA_PROTOCOL = "RUNWATCH_KAFKA_SECURITY_PROTOCOL"
KAFKA_MECHANISM = "RUNWATCH_KAFKA_SASL_MECHANISM"
KAFKA_USERNAME = "RUNWATCH_KAFKA_SASL_USERNAME"
KAFKA_PASSWORD_FILE = "RUNWATCH_KAFKA_SASL_PASSWORD_FILE"
KAFKA_PASSWORD = "RUNWATCH_KAFKA_SASL_PASSWORD"
KAFKA_CAFILE = "RUNWATCH_KAFKA_SSL_CAFILE"
KAFKA_CERTFILE = "RUNWATCH_KAFKA_SSL_CERTFILE"
KAFKA_KEYFILE = "RUNWATCH_KAFKA_SSL_KEYFILE"
KAFKA_CHECK_HOSTNAME = "RUNWATCH_KAFKA_SSL_CHECK_HOSTNAME"

#: the history file when neither --db nor RUNWATCH_DB names one
DEFAULT_DB = "runwatch.duckdb"


def get(name: str) -> str | None:
    """The variable's value; None when it is unset or empty."""
    return os.environ.get(name) or None


class Destination(NamedTuple):
    """Where events go: at most one of the three is set."""

    kafka: str | None = None
    url: str | None = None
    spool: str | None = None

    def __bool__(self) -> bool:
        return any(self)


def destination(
    kafka: str | None = None, url: str | None = None, spool: str | None = None
) -> Destination:
    """The destination given, else the environment's: Kafka, else the URL, else the spool."""
    if kafka or url or spool:
        return Destination(kafka or None, None if kafka else url or None,
                           None if kafka or url else spool or None)  # fmt: skip
    if value := get(KAFKA):
        return Destination(kafka=value)
    if value := get(URL):
        return Destination(url=value)
    return Destination(spool=get(SPOOL))


def node() -> str:
    """The node this process runs on: RUNWATCH_NODE, else the host name."""
    return get(NODE) or socket.gethostname()


def machine() -> str:
    """The machine whose loopback address this process reaches: its host name, whatever
    RUNWATCH_NODE says -- on Kubernetes the pod's, whose network namespace `localhost` is,
    so two pods' sidecars on one node are two machines (`runwatch.emitters.deps`)."""
    return socket.gethostname()


def strict() -> bool:
    """RUNWATCH_STRICT=1 (or true, yes): an emit() with a bad kind or field raises."""
    return os.environ.get(STRICT) in ("1", "true", "yes")


def db(given: str | None = None) -> str:
    """The history file: `given`, else RUNWATCH_DB, else runwatch.duckdb here."""
    return given or get(DB) or DEFAULT_DB


_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1h30m`, `1d`, or plain seconds; more than 0. ValueError naming
    the text otherwise."""
    t = text.strip().lower()
    try:
        value = float(t)
    except ValueError:
        parts = _PART.findall(t)
        if not parts or "".join(n + u for n, u in parts) != t:
            raise ValueError(
                f"{text!r} is not a duration: use e.g. 90s, 30m, 2h, 1h30m, 1d"
            ) from None
        value = sum(float(n) * _UNIT[u] for n, u in parts)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{text!r}: a duration must be more than 0 s")
    return value


def _duration(name: str) -> float | None:
    """The variable `name` as seconds; None when unset or not a duration (said once: a
    mistyped value must not pass for the default unseen)."""
    text = get(name)
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as err:
        say_once(f"${name} ignored: {err}")
        return None


def spool_max_age() -> float | None:
    """RUNWATCH_SPOOL_MAX_AGE as seconds; None when unset (nothing expires) or not a
    duration (said once)."""
    return _duration(SPOOL_MAX_AGE)


def overflow_steps(default: int) -> int:
    """RUNWATCH_OVERFLOW_STEPS: how many loss-scale overflow skips in a row a console reader
    takes for a failure (`runwatch.emitters.step_numbers`); `default` when unset or not a
    whole number above 0 (said once)."""
    value = get(OVERFLOW_STEPS)
    if value is None:
        return default
    try:
        steps = int(value)
    except ValueError:
        steps = 0
    if steps > 0:
        return steps
    say_once(f"${OVERFLOW_STEPS} ignored: {value!r} is not a whole number above 0; "
             f"using {default}")  # fmt: skip
    return default


def last_word(default: float) -> float:
    """RUNWATCH_LAST_WORD as seconds: how long `runwatch watch` waits, the command's output
    quiet, before a traceback it printed last is its process's death (a hung job: the other
    ranks wait); `default` when unset or not a duration (said once)."""
    seconds = _duration(LAST_WORD)
    return default if seconds is None else seconds
