"""The service's HTTP side: `POST /v1/events` (JSON Lines), `/metrics`, health, JSON API.

A stdlib `ThreadingHTTPServer`: one thread per connection, the `Service` lock around the
rules. A request is refused before its body is read when it is unauthorised (401) or too
large (413); a body that is not JSON Lines of valid events gets 400 with the reason per
line (valid lines of the same body are accepted, and the answer says how many).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from runwatch.service.core import Service
from runwatch.stream.metrics.roles import EXPOSITION_TYPE

log = logging.getLogger("runwatch.serve")

MAX_BODY = 4 << 20
#: Larger bodies than the limit are still read (and dropped) up to this size.
DRAIN_LIMIT = 64 << 20
RUN_RE = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}\Z")


class Handler(BaseHTTPRequestHandler):
    server: ServiceServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the console is for alerts
        pass

    def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else (json.dumps(body) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if status >= 400 and status != 400:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self, status: int, reason: str, counter: str) -> None:
        self.server.service.rejected.labels(counter).inc()
        self._send(status, {"error": reason})

    def _authorised(self) -> bool:
        token = self.server.token
        if not token:
            return True
        got = self.headers.get("Authorization", "")
        return hmac.compare_digest(got.encode(), f"Bearer {token}".encode())

    def do_POST(self) -> None:
        try:
            self._post()
        except Exception as err:
            log.exception("runwatch serve: POST %s failed", self.path)
            self._send(500, {"error": f"internal error: {err!r}"})

    def _post(self) -> None:
        path = urlsplit(self.path).path
        if path != "/v1/events":
            self._send(404, {"error": f"no such endpoint: POST {path}"})
            return
        if not self._authorised():
            self._refuse(401, "missing or wrong token (Authorization: Bearer ...)", "unauthorised")
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._refuse(411, "Content-Length required", "no_length")
            return
        if int(length) > self.server.max_body:
            if int(length) <= DRAIN_LIMIT:  # read it, so that the client sees the answer
                left = int(length)
                while left > 0 and (chunk := self.rfile.read(min(left, 1 << 20))):
                    left -= len(chunk)
            self._refuse(
                413, f"body is {length} bytes; the limit is {self.server.max_body}", "too_large"
            )
            return
        body = self.rfile.read(int(length))
        service = self.server.service
        if not service.ready:
            self._send(503, {"error": "starting up: rebuilding state"})
            return
        try:
            result = service.ingest(body.split(b"\n"))
        except OSError as err:  # the log could not be written: nothing was acknowledged
            self._send(503, {"error": f"cannot write the event log: {err}"})
            return
        if result.rejected:
            self.server.service.rejected.labels("bad_request").inc()
            errors = [{"line": n, "reason": r} for n, r in result.rejected[:100]]
            first = f"line {errors[0]['line']}: {errors[0]['reason']}"
            self._send(400, {"error": first, "accepted": result.accepted, "rejected": errors})
            return
        self._send(200, {"accepted": result.accepted})

    def do_GET(self) -> None:
        try:
            self._get()
        except Exception as err:  # answer, and keep serving: a read must not kill a thread
            log.exception("runwatch serve: GET %s failed", self.path)
            self._send(500, {"error": f"internal error: {err!r}"})

    def _get(self) -> None:
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        service = self.server.service
        if path == "/healthz":
            self._send(200, {"ok": True})
        elif path == "/readyz":
            ok, why = service.readiness()
            if ok:
                self._send(200, {"ready": True})
            else:
                self._send(503, {"ready": False, "reason": why})
        elif path == "/metrics":
            with service.lock:
                data = service.counters.exposition()
            self._send(200, data, EXPOSITION_TYPE)
        elif path == "/v1/runs":
            self._send(200, {"runs": service.runs()})
        elif path.startswith("/v1/runs/"):
            run = unquote(path[len("/v1/runs/") :])
            if not RUN_RE.match(run):
                self._send(400, {"error": f"bad run id {run!r}: 1-200 of [A-Za-z0-9._:/@+-]"})
                return
            found = service.run(run)
            if found is None:
                self._send(404, {"error": f"no run {run!r}"})
            else:
                self._send(200, found)
        elif path == "/v1/alerts":
            state = query.get("state", [None])[0]
            if state not in (None, "firing", "resolved"):
                self._send(400, {"error": "state must be firing or resolved"})
                return
            self._send(200, {"alerts": service.alerts(state)})
        else:
            self._send(404, {"error": f"no such endpoint: GET {path}"})


class ServiceServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], service: Service, token: str | None, max_body: int
    ) -> None:
        self.service = service
        self.token = token
        self.max_body = max_body
        super().__init__(address, Handler)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="runwatch-serve-http")
        thread.start()
        return thread
