"""Whether a role can reach Kafka, said in one line before it starts: the broker is not there,
refuses the credentials, fails the TLS handshake, or speaks another protocol -- instead of a
client library's retries, hang or traceback. The password is blanked out of every line."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import ssl

from runwatch.emitters.kafka_security import KafkaSecurity


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for server in bootstrap.split(","):
        host, sep, port = server.strip().rpartition(":")
        host, port = (host, port) if sep else (port, "9092")
        with contextlib.suppress(ValueError):
            out.append((host.strip("[]"), int(port)))
    return out


def explain(err: BaseException, server: str, security: KafkaSecurity) -> str:
    """One line for why a connection to `server` failed (the password blanked out)."""
    name = type(err).__name__
    cause = err.__cause__ or err.__context__
    if "SaslAuthentication" in name or "Authentication" in name:
        line = (
            f"Kafka at {server} refused the SASL credentials ({security.mechanism} as "
            f"{security.username}): {err}"
        )
    elif isinstance(err, ssl.SSLCertVerificationError):
        line = (
            f"TLS with Kafka at {server} failed: {err.verify_message} (check "
            "--kafka-ssl-cafile, or --kafka-ssl-no-check-hostname for a name mismatch)"
        )
    elif isinstance(err, ssl.SSLError) or isinstance(cause, ssl.SSLError):
        tls = err if isinstance(err, ssl.SSLError) else cause
        reason = getattr(tls, "reason", None) or str(tls)
        hint = " (the broker wants a client certificate?)" if "CERTIFICATE" in reason else ""
        line = f"TLS with Kafka at {server} failed: {reason}{hint}"
    elif isinstance(err, ConnectionRefusedError):
        line = f"no Kafka broker at {server} (connection refused)"
    elif isinstance(err, TimeoutError):  # asyncio's too (an alias since 3.11)
        line = f"Kafka at {server} did not answer in time"
    else:
        detail = str(err) if str(err).startswith(name) else f"{name}: {err}"
        line = (
            f"Kafka at {server} dropped the connection ({detail}): is "
            f"{security.protocol} the protocol of that listener? (--kafka-security-protocol)"
        )
    return security.scrub(" ".join(line.split()))


async def _probe(host: str, port: int, security: KafkaSecurity, timeout: float) -> None:
    from aiokafka.conn import create_conn

    conn = await asyncio.wait_for(
        create_conn(host, port, request_timeout_ms=int(timeout * 1000), **security.aiokafka()),
        timeout,
    )
    conn.close()


def kafka_problem(bootstrap: str, security: KafkaSecurity, timeout: float = 10.0) -> str | None:
    """None if some bootstrap server accepts a connection with `security` (TLS handshake and
    SASL authentication included), else one line saying why the first one did not."""
    servers = _servers(bootstrap)
    if not servers:
        return f"--kafka {bootstrap!r} is not HOST:PORT[,HOST:PORT...]"
    if (
        importlib.util.find_spec("aiokafka") is None
    ):  # no `kafka` extra:  # kafka-python alone: only a TCP check, the client says the rest
        from runwatch.emitters.producer import reachable

        return None if reachable(bootstrap, {}, timeout) else f"no Kafka broker at {bootstrap}"

    first: str | None = None
    for host, port in servers:
        try:
            asyncio.run(_probe(host, port, security, timeout))
            return None
        except Exception as err:
            first = first or explain(err, f"{host}:{port}", security)
    return first
