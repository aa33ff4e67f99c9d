"""Where an emitter's events go: Kafka, `runwatch serve` over HTTP, or a directory.

The arguments given, else the environment (`runwatch.emitters.env`), else a directory on
disk: a missing variable must not stop a training job. Bad or conflicting settings raise
ValueError here, when the emitter is made, never later. Each destination spools in a
directory of its own (`identity`), so leftovers are only ever sent where they were going.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.emitters import env
from runwatch.emitters.kafka_security import PLAINTEXT, KafkaSecurity
from runwatch.emitters.once import say_once
from runwatch.emitters.spool import default_base, destination_dir


@dataclass(frozen=True)
class Where:
    """One emitter's destination, chosen once: `kafka`, `url`, or `path` (a directory)."""

    kafka: str | None
    url: str | None
    path: Path | None
    security: KafkaSecurity
    #: what makes two destinations the same (`identity`)
    identity: dict[str, str]
    #: where events wait while the destination is away; the directory itself for `path`
    spool_dir: Path


def identity(
    kafka: str | None, topic: str, security: KafkaSecurity, url: str | None
) -> dict[str, str]:
    """What makes two destinations the same: for Kafka the brokers, the topic and who we are
    to them; for a service its URL."""
    if url is not None:
        return {"kind": "http", "url": url.rstrip("/")}
    if kafka is None:
        return {"kind": "file"}
    brokers = ",".join(sorted(b.strip() for b in kafka.split(",") if b.strip()))
    who = security.protocol + (f":{security.username}" if security.username else "")
    return {"kind": "kafka", "bootstrap": brokers, "topic": topic, "security": who}


def choose(
    *,
    kafka: str | None,
    url: str | None,
    path: str | os.PathLike[str] | None,
    spool: str | os.PathLike[str] | None,
    topic: str,
    kafka_options: Mapping[str, Any],
    kafka_security: KafkaSecurity | None,
) -> Where:
    """The destination of an `Emitter` made with these arguments (its docstring says how
    they and the environment pick one); ValueError for settings that cannot work."""
    fallback = False  # no destination was given: the events wait on disk
    if kafka is not None and path is not None:
        raise ValueError("pass kafka= or path=, not both")
    if url is not None and (kafka is not None or path is not None):
        raise ValueError("pass one of kafka=, url= or path=")
    if kafka is None and path is None and url is None:
        kafka, url, path = env.destination()
        path = None if kafka or url else spool or path
        if kafka is None and path is None and url is None:
            # a missing variable must not stop a training job: keep the events on disk
            path, fallback = default_base() / "unsent", True
            say_once(
                f"runwatch: no destination for events (RUNWATCH_KAFKA, RUNWATCH_URL or "
                f"RUNWATCH_SPOOL, or kafka=/url=/path=): keeping them in {path}; send "
                "them later with `runwatch spool flush --dir "
                f"{path} --url URL` (or --kafka HOST:PORT)"
            )
    if kafka is not None and not (isinstance(kafka, str) and kafka.strip()):
        raise ValueError(f"kafka must be 'host:port[,host:port...]', not {kafka!r}")
    if kafka is not None and kafka_options:
        from kafka import KafkaProducer  # only now: a file destination never needs it

        if unknown := sorted(set(kafka_options) - set(KafkaProducer.DEFAULT_CONFIG)):
            raise ValueError(f"kafka_options has settings KafkaProducer lacks: {unknown}")
    if kafka is not None and kafka_security is None:
        kafka_security = KafkaSecurity.from_env()  # raises KafkaSecurityError (ValueError)
    security = kafka_security or PLAINTEXT
    directory = Path(path) if path is not None else None
    same = identity(kafka, topic, security, url)
    if directory is not None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            if not fallback:
                raise ValueError(f"cannot use {directory} as the spool directory: {err}") from None
            # the fallback cannot be written either: events are dropped and counted
    spool_dir = directory or destination_dir(
        Path(spool or env.get(env.SPOOL) or default_base()), same
    )
    return Where(kafka, url, directory, security, same, spool_dir)
