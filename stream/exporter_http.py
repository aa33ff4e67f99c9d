"""Serving /metrics: from a daemon thread (embedded service) or inside an asyncio loop (worker).

Both take the body as a callable (`RunwatchMetrics.exposition`, or any registry through
`registry_body`). The asyncio variant scrapes on the loop that applies events, so the
collector never sees a run state mid-update; the threaded one relies on the collector's
lock or snapshot-retry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Body = Callable[[], bytes]
#: A readiness check: (ready, reason). Served as /readyz (200 or 503 with the reason).
Ready = Callable[[], tuple[bool, str]]


def registry_body(registry: CollectorRegistry) -> Body:
    return lambda: generate_latest(registry)


class MetricsServer:
    """A running /metrics endpoint in a daemon thread; `close()` stops it and joins it."""

    def __init__(self, body: Body, port: int, host: str = "0.0.0.0") -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                try:
                    data = body()
                except Exception as err:  # a scrape must never take the server down
                    self.send_error(500, type(err).__name__)
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer((host, port), Handler)
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

    /healthz answers 200 while the loop that applies events still runs handlers (it is
    served on that loop); /readyz asks `ready()` (no check given: the same as /healthz).
    """

    def __init__(
        self, body: Body, port: int, host: str = "0.0.0.0", *, ready: Ready | None = None
    ) -> None:
        self.body = body
        self.host = host
        self.port = port
        self.ready = ready
        self._runner: Any = None

    async def start(self) -> None:
        from aiohttp import web

        async def metrics(request: web.Request) -> web.Response:
            return web.Response(body=self.body(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def healthz(request: web.Request) -> web.Response:
            return web.Response(text="ok\n")

        async def readyz(request: web.Request) -> web.Response:
            ok, reason = self.ready() if self.ready is not None else (True, "ok")
            return web.Response(text=reason + "\n", status=200 if ok else 503)

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/", metrics)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
