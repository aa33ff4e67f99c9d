"""The HTTP destination: batches of events to `runwatch serve` (`POST /v1/events`).

Standard library only (`http.client`), driven by the sender thread like the Kafka one:
stop-and-wait per batch, the spool behind it for outages (a batch the service did not
acknowledge goes to the spool ahead of anything spilled meanwhile), and spooled segments
replayed oldest first once the service answers again. The service acknowledges only what it
has made durable, so a batch cut short by an outage may arrive twice: ids are applied once.
"""

from __future__ import annotations

import http.client
import logging
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from runwatch.emitters.spool import Spool
from runwatch.emitters.transport import SpooledDestination

log = logging.getLogger("runwatch.emitters")

#: Bytes per request: well under the service's default limit (4 MiB).
MAX_REQUEST = 1 << 20


class ServiceClient:
    """`runwatch serve` at a URL: where to connect and who we are (the bearer token). One
    request per connection, as the emitter's sender and the circuit breaker's guard need."""

    def __init__(self, url: str, token: str | None, timeout: float = 5.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], not {url!r}")
        self.url = url
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._base = parts.path.rstrip("/")
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        limit: int = 1 << 20,
    ) -> tuple[int, bytes]:
        """(status, at most `limit` bytes of the answer); raises OSError and
        http.client.HTTPException as the standard library does."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        try:
            conn.request(method, self._base + path, body, {**self._auth, **(headers or {})})
            resp = conn.getresponse()
            return resp.status, resp.read(limit)
        finally:
            conn.close()


class HttpDestination(SpooledDestination):
    """`runwatch serve` behind a stop-and-wait sender, with the spool for outages."""

    def __init__(
        self,
        url: str,
        spool: Spool,
        *,
        token: str | None = None,
        timeout: float = 5.0,
        max_backoff: float = 5.0,
    ) -> None:
        self.service = ServiceClient(url, token, timeout)
        super().__init__(spool, max_backoff)
        self.name = self.url = url
        self._up = True

    def _post(self, body: bytes) -> int:
        """POST one request; the status, or 0 when the service could not be reached."""
        try:
            status, detail = self.service.request(
                "POST", "/v1/events", body, {"Content-Type": "application/x-ndjson"}, limit=300
            )
        except (OSError, http.client.HTTPException):
            return 0
        if status >= 400 and status not in (500, 502, 503, 504):
            log.error("runwatch: %s refused events: %d %r", self.url, status, detail)
        return status

    def _send(self, lines: Sequence[str], live: bool) -> int:
        """Send in requests of at most MAX_REQUEST bytes; how many leading lines settled."""
        settled = 0
        while settled < len(lines):
            size, end = 0, settled
            while end < len(lines) and (end == settled or size + len(lines[end]) < MAX_REQUEST):
                size += len(lines[end]) + 1
                end += 1
            status = self._post("".join(line + "\n" for line in lines[settled:end]).encode())
            if status == 0 or status >= 500 or status in (401, 403, 404, 408, 429):
                self._down(f"HTTP {status}" if status else "no answer")
                return settled
            if 200 <= status < 300:
                self.sent += end - settled
            else:  # 400, 413: the service refused these lines for what they are
                with self.spool.lock:
                    self.spool.dropped += end - settled
            settled = end
        self._up_again()
        return settled

    def _down(self, why: str) -> None:
        self._up = False
        self._went_down(why)

    def _up_again(self) -> None:
        self._up = True
        self._came_back()

    def live(self) -> bool:
        return self._up and self.spool.size == 0

    def tick(self) -> None:
        if not self._up and time.monotonic() < self._retry_at:
            return
        self._adopt_now_and_then()
        if self.spool.size > 0:
            self._replay_some()

    def wait_s(self) -> float:
        if not self._up:
            return max(0.0, self._retry_at - time.monotonic())
        return 0.0 if self.spool.size > 0 else 5.0

    def close(self, deadline: float) -> None:
        while self.spool.size > 0 and time.monotonic() < deadline:
            before = self.spool.size
            self._replay_some()
            if not self._up or self.spool.size >= before:
                break
        with self.spool.lock:
            self.spool.close()

    def orphan(self) -> None:
        self.spool.forget()
