"""The service's HTTP side: `POST /v1/events` (JSON Lines), `/metrics`, health, JSON API.

The front is waitress (a maintained pure-Python server), chosen for what a monitor needs on
its worst day rather than hand-written: one I/O thread holds every connection (a thousand
half-open ones cost a socket each, not a thread), a request reaches a worker of a bounded
pool only once it is whole, idle connections are closed after `idle_timeout`, headers and
bodies have limits (a body over `--max-body` is refused with 413 before it is read), the
listen backlog is real, and a malformed request gets a 400 from its parser. bench/serve.py
measures it against the standard library server this replaced.

With a token set, every endpoint but `/healthz` and `/readyz` needs `Authorization: Bearer
TOKEN` -- run labels and server names are not for anyone who can reach the port.
"""

from __future__ import annotations

import hmac
import json
import logging
import resource
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import parse_qs

from runwatch.service.core import Service
from runwatch.stream.metrics.roles import EXPOSITION_TYPE

log = logging.getLogger("runwatch.serve")

MAX_BODY = 4 << 20
RUN_RE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+-")
OPEN = ("/healthz", "/readyz")  # answered without the token: probes carry none

Answer = tuple[int, bytes, str]
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def _json(status: int, body: Any) -> Answer:
    return status, (json.dumps(body) + "\n").encode(), "application/json"


class App:
    """The WSGI application: routes a request to the `Service`."""

    def __init__(self, service: Service, token: str | None) -> None:
        self.service = service
        self.token = token

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            status, body, ctype = self.answer(environ)
        except Exception as err:  # answer, and keep serving: one request must not stop it
            log.exception("runwatch serve: %s %s failed", environ.get("REQUEST_METHOD"),
                          environ.get("PATH_INFO"))  # fmt: skip
            status, body, ctype = _json(500, {"error": f"internal error: {type(err).__name__}"})
        headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [body]

    def _refuse(self, status: int, reason: str, counter: str) -> Answer:
        self.service.rejected.labels(counter).inc()
        return _json(status, {"error": reason})

    def _authorised(self, environ: dict[str, Any]) -> bool:
        if not self.token:
            return True
        got = str(environ.get("HTTP_AUTHORIZATION", "")).encode("latin-1", "replace")
        return hmac.compare_digest(got, f"Bearer {self.token}".encode())

    def answer(self, environ: dict[str, Any]) -> Answer:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path not in OPEN and not self._authorised(environ):
            return self._refuse(
                401, "missing or wrong token (Authorization: Bearer ...)", "unauthorised"
            )
        if method == "POST":
            if path != "/v1/events":
                return _json(404, {"error": f"no such endpoint: POST {path}"})
            # the front has checked the length against --max-body and read the body whole
            length = str(environ.get("CONTENT_LENGTH") or "0")
            size = int(length) if length.isascii() and length.isdigit() else 0
            return self._post(environ["wsgi.input"].read(size))
        if method in ("GET", "HEAD"):
            return self._get(path, parse_qs(environ.get("QUERY_STRING", "")))
        return _json(405, {"error": f"method {method} not allowed"})

    def _post(self, body: bytes) -> Answer:
        service = self.service
        if not service.ready:
            return _json(503, {"error": "starting up: rebuilding state"})
        try:
            result = service.ingest(body.split(b"\n"))
        except OSError as err:  # the log could not be written: nothing was acknowledged
            return _json(503, {"error": f"cannot write the event log: {err}"})
        if result.rejected:
            service.rejected.labels("bad_request").inc()
            errors = [{"line": r.position, "reason": r.reason} for r in result.rejected[:100]]
            first = f"line {errors[0]['line']}: {errors[0]['reason']}"
            return _json(400, {"error": first, "accepted": result.accepted, "rejected": errors})
        return _json(200, {"accepted": result.accepted})

    def _get(self, path: str, query: dict[str, list[str]]) -> Answer:
        service = self.service
        if path == "/healthz":
            return _json(200, {"ok": True})
        if path == "/readyz":
            ok, why = service.readiness()
            return _json(200, {"ready": True}) if ok else _json(503, {"ready": ok, "reason": why})
        if path == "/metrics":
            return 200, service.exposition(), EXPOSITION_TYPE
        if path == "/v1/runs":
            return _json(200, {"runs": service.runs()})
        for prefix, read in (("/v1/runs/", service.run), ("/v1/breaker/", service.breaker)):
            if path.startswith(prefix):
                # PATH_INFO is the decoded path, as latin-1 (WSGI)
                run = path[len(prefix) :].encode("latin-1").decode("utf-8", "replace")
                if not 1 <= len(run) <= 200 or not RUN_RE_CHARS.issuperset(run):
                    why = f"bad run id {run!r}: 1-200 of [A-Za-z0-9._:/@+-]"
                    return _json(400, {"error": why})
                found = read(run)
                if found is None:
                    return _json(404, {"error": f"no run {run!r}"})
                return _json(200, found)
        if path == "/v1/alerts":
            state = query.get("state", [None])[0]
            if state not in (None, "firing", "resolved"):
                return _json(400, {"error": "state must be firing or resolved"})
            return _json(200, {"alerts": service.alerts(state), "incidents": service.incidents()})
        return _json(404, {"error": f"no such endpoint: GET {path}"})


def _open_files_limit(want: int) -> int:
    """Raise this process's open-files limit towards `want` (up to the hard limit): a
    connection is a file, and running out of them must not be what stops the service."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            pass
    return soft


class ServiceServer:
    """The HTTP front of a `Service` on its own threads; `start()`, then `stop()`."""

    def __init__(
        self,
        address: tuple[str, int],
        service: Service,
        token: str | None,
        max_body: int = MAX_BODY,
        *,
        threads: int = 8,
        idle_timeout: int = 30,
        max_connections: int = 10_000,
    ) -> None:
        from waitress.server import create_server

        files = _open_files_limit(max_connections + 256)
        self.server: Any = cast(Any, create_server)(
            App(service, token),
            host=address[0],
            port=address[1],
            threads=threads,
            backlog=2048,
            # keep files for the logs, DuckDB and Slack beside the connections
            connection_limit=max(16, min(max_connections, files - 128)),
            channel_timeout=idle_timeout,
            cleanup_interval=max(1, min(5, idle_timeout)),
            max_request_body_size=max_body,
            max_request_header_size=64 << 10,
            asyncore_use_poll=True,  # select() stops at 1,024 descriptors
            expose_tracebacks=False,
            ident="runwatch",
            clear_untrusted_proxy_headers=True,
        )
        self.server_address: tuple[str, int] = (address[0], int(self.server.effective_port))
        self._thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.server.run, name="runwatch-serve-http")
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 10.0) -> None:
        """Close every connection and the listener (in the I/O thread, where they live),
        then stop the workers."""
        server = self.server

        def close_all() -> None:
            for channel in list(server._map.values()):
                channel.close()

        pulled = False
        if self._thread is not None and self._thread.is_alive():
            try:
                server.trigger.pull_trigger(close_all)
                pulled = True
            except OSError:  # its trigger is already closed: nothing can wake the loop
                log.warning("the HTTP loop's trigger was closed; closing its connections here")
        if not pulled:
            close_all()  # the loop sees an empty map at its next poll and ends
        if self._thread is not None:
            self._thread.join(timeout)
        server.task_dispatcher.shutdown(timeout=timeout)
