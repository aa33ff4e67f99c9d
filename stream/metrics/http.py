"""Serving /metrics, /healthz and /readyz: from a daemon thread (embedded service, `runwatch
notify`) or inside an asyncio loop (worker, sink).

Both take the body as a callable (`RunwatchMetrics.exposition`, or any registry through
`registry_body`) and the two checks as `Ready` callables, and answer a path the same way
(`answer`). A scrape may name the families it wants (`/metrics?name[]=NAME`, as
prometheus-client's own server reads it): a server given `select` renders only those -- a
look at one gauge (the processing lag) then costs nothing per run. The asyncio variant
scrapes on the loop that applies events, so the collector never sees a run state
mid-update; the threaded one relies on the collector's lock or snapshot-retry (or on checks
that read a snapshot).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from runwatch.stream.exceptions import PortUnavailable

Body = Callable[[], bytes]
#: The body of only the named families (`?name[]=`): what a server renders when asked so.
Select = Callable[[frozenset[str]], bytes]
#: A readiness check: (ready, reason). Served as /readyz (200 or 503 with the reason).
Ready = Callable[[], tuple[bool, str]]


def registry_body(registry: CollectorRegistry) -> Body:
    return lambda: generate_latest(registry)


def answer(
    path: str, body: Body, live: Ready | None, ready: Ready | None, select: Select | None = None
) -> tuple[int, str, bytes]:
    """(status, content type, body) for a GET of `path` (its query included). /healthz asks
    `live()` and /readyz `ready()`: 200 or 503 with the reason; no check given: 200 "ok".
    /metrics?name[]=A&name[]=B: `select({A, B})` where given, else the whole body."""
    path, _, query = path.partition("?")
    if path in ("/metrics", "/"):
        names = parse_qs(query).get("name[]") if query and select is not None else None
        if names and select is not None:
            return 200, CONTENT_TYPE_LATEST, select(frozenset(names))
        return 200, CONTENT_TYPE_LATEST, body()
    checks = {"/healthz": live, "/readyz": ready}
    if path not in checks:
        return 404, "text/plain; charset=utf-8", b"not found\n"
    check = checks[path]
    ok, reason = check() if check is not None else (True, "ok")
    return 200 if ok else 503, "text/plain; charset=utf-8", (reason + "\n").encode()


def _unavailable(host: str, port: int, err: OSError) -> PortUnavailable:
    why = os.strerror(err.errno) if err.errno else str(err)  # asyncio's strerror is long
    return PortUnavailable(f"cannot listen on {host}:{port}: {why}")


class MetricsServer:
    """/metrics, /healthz and /readyz in a daemon thread; `close()` stops it and joins it.

    The checks run on the server's threads: give ones that read a snapshot.
    Raises PortUnavailable when it cannot listen."""

    def __init__(
        self,
        body: Body,
        port: int,
        host: str = "0.0.0.0",
        *,
        live: Ready | None = None,
        ready: Ready | None = None,
        select: Select | None = None,
    ) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    status, content_type, data = answer(self.path, body, live, ready, select)
                except Exception as err:  # a scrape must never take the server down
                    self.send_error(500, type(err).__name__)
                    return
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        try:
            self._httpd = ThreadingHTTPServer((host, port), Handler)
        except OSError as err:
            raise _unavailable(host, port, err) from None
        self._httpd.daemon_threads = True
        self.port: int = int(self._httpd.server_address[1])
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="runwatch-metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def start_metrics_server(body: Body, port: int, host: str = "0.0.0.0") -> MetricsServer:
    """Serve `body()` on http://host:port/metrics (port 0: a free one; see `.port`)."""
    return MetricsServer(body, port, host)


class AsyncMetricsServer:
    """/metrics served by aiohttp on the running event loop, with /healthz and /readyz.

    /healthz answers only while the loop still runs handlers (it is served on that loop),
    and then asks `live()` (none given: 200); /readyz asks `ready()` (none given: 200).
    """

    def __init__(
        self,
        body: Body,
        port: int,
        host: str = "0.0.0.0",
        *,
        ready: Ready | None = None,
        live: Ready | None = None,
        select: Select | None = None,
    ) -> None:
        self.body = body
        self.select = select
        self.host = host
        self.port = port
        self.ready = ready
        self.live = live
        self._runner: Any = None

    async def start(self) -> None:
        """Listen; raises PortUnavailable when it cannot."""
        from aiohttp import web

        async def handle(request: web.Request) -> web.Response:
            status, content_type, data = answer(
                request.path_qs, self.body, self.live, self.ready, self.select
            )
            return web.Response(body=data, status=status, headers={"Content-Type": content_type})

        app = web.Application()
        for path in ("/metrics", "/", "/healthz", "/readyz"):
            app.router.add_get(path, handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise _unavailable(self.host, self.port, err) from None
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
