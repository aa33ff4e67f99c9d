"""Serving /metrics: from a daemon thread (embedded service) or inside an asyncio loop (worker).

The asyncio variant scrapes on the loop that applies events, so the collector never sees a
run state mid-update; the threaded one relies on the collector's lock or snapshot-retry.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import start_http_server


class MetricsServer:
    """A running /metrics endpoint; `close()` stops it and joins its thread."""

    def __init__(self, httpd: Any, thread: threading.Thread | None) -> None:
        self._httpd = httpd
        self._thread = thread
        self.port: int = int(httpd.server_address[1])

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def start_metrics_server(
    registry: CollectorRegistry, port: int, host: str = "0.0.0.0"
) -> MetricsServer:
    """Serve `registry` on http://host:port/metrics (port 0: a free one; see `.port`)."""
    httpd, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(httpd, thread)


class AsyncMetricsServer:
    """/metrics served by aiohttp on the running event loop."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "0.0.0.0") -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._runner: Any = None

    async def start(self) -> None:
        from aiohttp import web

        async def metrics(request: web.Request) -> web.Response:
            body = generate_latest(self.registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/", metrics)
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
