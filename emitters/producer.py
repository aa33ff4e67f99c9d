"""kafka-python, as the emitter needs it: built without leaks, closed for sure, kept quiet.

Each function works around one way kafka-python 3.x would otherwise hurt a training process
during a broker outage: a failed bootstrap leaving sockets open, `close()` giving up before
stopping its network thread, an error log line per refused reconnect, and a pure-Python hash
per record that holds the GIL the trainer wants.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("runwatch.emitters")


def reachable(bootstrap: str, options: Mapping[str, Any], timeout: float) -> bool:
    """Whether any bootstrap server accepts a TCP connection: a cheap first probe, so an
    outage costs neither kafka-python's bootstrap timeout nor the sockets it leaves."""
    if {"socks5_proxy", "proxy_url"} & set(options):
        return True  # only the proxy knows
    for server in bootstrap.split(","):
        host, sep, port = server.strip().rpartition(":")
        host, port = (host, port) if sep else (port, "9092")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
        except (OSError, ValueError):
            continue
        return True
    return False


def make_producer(config: Mapping[str, Any]) -> Any:
    """A connected KafkaProducer; raises what kafka-python raised, having cleaned up."""
    from kafka import KafkaProducer

    return built(KafkaProducer, config)


def built(kind: Any, config: Mapping[str, Any]) -> Any:
    """A kafka-python client of `kind` (KafkaProducer, KafkaConsumer); raises what its
    constructor raised, having cleaned up.

    One that fails to bootstrap (no broker, a refused password) leaves its network client's
    sockets and I/O thread running, so the client is built through a factory that keeps
    hold of it.
    """
    _quiet_kafka_logs()
    make_client, clients = kind.DEFAULT_CONFIG["kafka_client"], []

    def client(**kwargs: Any) -> Any:
        clients.append(made := make_client(**kwargs))
        return made

    try:
        return kind(**{"kafka_client": client, **config})
    except Exception:
        for made in clients:
            try:
                made.close()
            except Exception:
                log.debug("closing a half-built Kafka client failed", exc_info=True)
        raise


def close_producer(producer: Any, timeout: float) -> None:
    """Close a producer, also one with records the broker never confirmed.

    kafka-python's `close()` raises from its flush when records are unconfirmed at the
    timeout, before it stops its network thread; that thread and its sockets would then
    outlive the producer. So stop it the way `close()` would have gone on to.
    """
    try:
        producer.close(timeout=timeout)
        return
    except Exception:
        log.debug("runwatch: the producer did not close cleanly; forcing it", exc_info=True)
    sender = getattr(producer, "_sender", None)
    try:
        if sender is not None:
            sender.force_close()
            sender.join(1.0)
        producer._closed = True  # nothing left for its __del__ to do
    except Exception:
        log.debug("runwatch: forcing the producer closed failed", exc_info=True)


def abandon_producer(producer: Any, keep: list[Any]) -> None:
    """In a forked child: never close, nor let be collected, a producer inherited from the
    parent (closing shuts down sockets the parent still uses), nor close it at exit."""
    import atexit

    keep.append(producer)
    cleanup = getattr(producer, "_cleanup", None)
    if cleanup is not None:
        atexit.unregister(cleanup)


class _Memo(dict[bytes, "int | None"]):
    """A dict that computes missing keys once."""

    def __init__(self, compute: Callable[[bytes], int | None]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, key: bytes) -> int | None:
        value = self[key] = self._compute(key)
        return value


def partitioner(producer: Any, topic: str, options: Mapping[str, Any]) -> dict[bytes, int | None]:
    """Key -> partition as kafka-python's default partitioner picks it, for one batch.

    Its pure-Python murmur2 per record is a fifth of `send()`; one hash per key and batch
    leaves more of the GIL to the caller. None (kafka-python decides) with a custom
    partitioner, or when the topic's partitions are not known yet.
    """
    try:
        if "partitioner" in options:
            raise LookupError("a custom partitioner decides alone")
        from kafka.partitioner.default import murmur2

        partitions = sorted(producer.partitions_for(topic))
    except Exception:
        return _Memo(lambda key: None)
    return _Memo(lambda key: int(partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]))


class _Demote(logging.Filter):
    """kafka-python logs every refused reconnect as an error; during an outage that is
    expected and handled by the emitter, so records from our producers' threads become DEBUG
    records, shown only where the `kafka` logger is set to DEBUG (the emitter's own warning
    says once that Kafka is away, and why). Our threads' names start with `runwatch-`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "runwatch-" not in (record.threadName or "") or record.levelno >= logging.CRITICAL:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger("kafka").getEffectiveLevel() <= logging.DEBUG


_DEMOTE = _Demote()


def _quiet_kafka_logs() -> None:
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        ours = name == "kafka" or name.startswith("kafka.")
        if ours and isinstance(logger, logging.Logger) and _DEMOTE not in logger.filters:
            logger.addFilter(_DEMOTE)
