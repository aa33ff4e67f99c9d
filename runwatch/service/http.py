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

The endpoints (docs/serve.md has them with their answers): ingest here, the live state here,
the history, silences and resume in `service.api`, the follower stream of alert transitions
in `service.stream` (served by waitress's I/O thread, not a worker per follower).
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import resource
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs

from runwatch.service import api, pages, stream
from runwatch.service.api import error
from runwatch.service.api import json_answer as _json
from runwatch.service.core import RECENT, Service
from runwatch.stream.metrics.roles import EXPOSITION_TYPE

log = logging.getLogger("runwatch.serve")

MAX_BODY = 4 << 20
RUN_RE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+-")
OPEN = ("/healthz", "/readyz")  # answered without the token: probes carry none

Answer = tuple[int, bytes, str]
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def _run_id(path: str, prefix: str) -> str | Answer:
    """The run id at the end of `path` (PATH_INFO: decoded, as latin-1), or the 400."""
    run = path[len(prefix) :].encode("latin-1").decode("utf-8", "replace")
    if not 1 <= len(run) <= 200 or not RUN_RE_CHARS.issuperset(run):
        return error(400, f"bad run id {run!r}: 1-200 of [A-Za-z0-9._:/@+-]")
    return run


def _int(query: dict[str, list[str]], name: str, default: int, top: int) -> int | Answer:
    text = query.get(name, [str(default)])[0]
    if not text.isascii() or not text.isdigit() or not 0 <= int(text) <= top:
        return error(400, f"{name} must be a whole number from 0 to {top}, got {text!r}")
    return int(text)


class App:
    """The WSGI application: routes a request to the `Service`."""

    def __init__(self, service: Service, token: str | None, silences: Path | None = None) -> None:
        self.service = service
        self.token = token
        self.silences = silences  # the Slack notifier's ledger, where silences live
        self.pages = pages.Pages(pages.through(self.answer, token), token, service.clock)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if pages.handles(environ.get("PATH_INFO", "")):  # the HTML pages (runwatch.service.pages)
            return self.pages(environ, start_response)
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
            # the front has checked the length against --max-body and read the body whole
            length = str(environ.get("CONTENT_LENGTH") or "0")
            size = int(length) if length.isascii() and length.isdigit() else 0
            body = environ["wsgi.input"].read(size)
            if path == "/v1/events":
                return self._post(body)
            if path == "/v1/silences":
                return api.add_silence(self.service, self.silences, body)
            if path == "/v1/resume":
                return api.resume(self.service, body)
            if path == "/v1/sql":
                return api.sql(self.service, body)
            return _json(404, {"error": f"no such endpoint: POST {path}"})
        if method == "DELETE":
            if path.startswith("/v1/silences/"):
                return api.remove_silence(self.silences, path[len("/v1/silences/") :])
            return _json(404, {"error": f"no such endpoint: DELETE {path}"})
        if method in ("GET", "HEAD"):
            return self._get(path, parse_qs(environ.get("QUERY_STRING", "")))
        return _json(405, {"error": f"method {method} not allowed"})

    def refuse_follower(self, environ: dict[str, Any]) -> Answer | None:
        """Why a `GET /v1/alerts/stream` cannot follow (its token, its parameters); None
        when it can. The stream itself is served by `stream.FollowerChannel`."""
        if not self._authorised(environ):
            return self._refuse(
                401, "missing or wrong token (Authorization: Bearer ...)", "unauthorised"
            )
        query = parse_qs(environ.get("QUERY_STRING", ""))
        run = query.get("run", [None])[0]
        if run is not None:
            checked = _run_id(run, "")
            if not isinstance(checked, str):
                return checked
        return None

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
        for prefix, read in (("/v1/runs/", service.run), ("/v1/breaker/", service.run_view)):
            if path.startswith(prefix):
                run = _run_id(path, prefix)
                if not isinstance(run, str):
                    return run
                found = read(run)
                if found is None:
                    return _json(404, {"error": f"no run {run!r}"})
                return _json(200, found if isinstance(found, dict) else found.to_dict())
        if path == "/v1/alerts":
            state = query.get("state", [None])[0]
            if state not in (None, "firing", "resolved"):
                return _json(400, {"error": "state must be firing or resolved"})
            limit = _int(query, "limit", 200, RECENT)
            if not isinstance(limit, int):
                return limit
            return _json(200, {"alerts": service.alerts(state, limit),
                               "incidents": service.incidents(),
                               "cursor": service.cursor()})  # fmt: skip
        if path == stream.PATH:  # a follower refused, or not through waitress: what is held
            after, of = query.get("after", [None])[0], query.get("run", [None])[0]
            if of is not None and not isinstance(checked := _run_id(of, ""), str):
                return checked
            frames = [stream.frame(c, a) for c, a in service.transitions(after, of)]
            return 200, b"".join(frames), stream.CONTENT_TYPE
        if path == "/v1/history/runs":
            return api.history_runs(service)
        if path.startswith("/v1/history/runs/"):
            run = _run_id(path, "/v1/history/runs/")
            slowest = _int(query, "slowest", 5, 1000)
            if not isinstance(run, str):
                return run
            if not isinstance(slowest, int):
                return slowest
            return api.history_run(service, run, slowest)
        if path == "/v1/silences":
            return api.silences(self.silences)
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


def _guard(trigger: Any) -> None:
    """Make pulling waitress's trigger after it was closed raise EBADF, never write: its pipe
    keeps the closed descriptor's number, which by then may belong to another file (a WAL, a
    socket), and a byte written there is corruption -- and a wake-up the loop never sees."""
    lock = threading.Lock()
    pull, close = trigger._physical_pull, trigger._close

    def guarded_pull() -> None:
        with lock:
            if trigger._closed:
                raise OSError(errno.EBADF, "the HTTP loop's trigger is closed")
            pull()

    def guarded_close() -> None:
        with lock:
            close()

    trigger._physical_pull, trigger._close = guarded_pull, guarded_close


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
        silences: Path | None = None,
    ) -> None:
        from waitress.server import create_server

        files = _open_files_limit(max_connections + 256)
        app = App(service, token, silences)
        self.server: Any = cast(Any, create_server)(
            app,
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
        _guard(self.server.trigger)
        self.server_address: tuple[str, int] = (address[0], int(self.server.effective_port))
        self.followers = stream.Followers(service, self._on_loop)
        # accepted connections are made by this class: one that can become a follower
        self.server.channel_class = stream.follower_channel(self.followers, app.refuse_follower)
        self._thread: threading.Thread | None = None
        self._beating: threading.Thread | None = None
        self._stopping = threading.Event()

    def _on_loop(self, thunk: Callable[[], None]) -> None:
        """Run `thunk` on the I/O thread (where the connections live)."""
        with contextlib.suppress(OSError):  # stopping: its trigger is closed, as are they
            self.server.trigger.pull_trigger(thunk)

    def _keepalive(self) -> None:
        while not self._stopping.wait(stream.KEEPALIVE_S):
            self.followers.keepalive()

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.server.run, name="runwatch-serve-http")
        self._thread.start()
        self._beating = threading.Thread(target=self._keepalive, name="runwatch-serve-followers")
        self._beating.start()
        return self._thread

    def stop(self, timeout: float = 10.0) -> None:
        """Close every connection and the listener (in the I/O thread, where they live),
        then stop the workers."""
        server = self.server
        self._stopping.set()
        self.followers.close()
        if self._beating is not None:
            self._beating.join(timeout)

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
