"""`GET /v1/alerts/stream`: alert transitions as they happen, to any number of followers.

A WSGI application answers a request on one of waitress's worker threads, and a response
that waits for news would hold that thread for as long as its follower listens: eight
followers would take every thread serve has. So a follower is not a WSGI response. The
worker that reads its request writes the head and the backlog, hands the connection to
`Followers` and returns at once; from then on the connection belongs to waitress's one I/O
thread, like an idle keep-alive connection, and costs a socket. A new transition is framed
once and appended to each follower's output buffer from the I/O thread (`pull_trigger`), so
publishing never waits for a slow reader; a follower whose unsent output passes
`MAX_BACKLOG` is closed, and catches up from its cursor when it reconnects.

The format is Server-Sent Events, so a web page's `EventSource` reads it as it is:

    id: 3f2a91c0-17
    event: alert
    data: {"id": "...", "run": "...", "rule": "...", "state": "firing", ...}

`id` is the transition's cursor; `?after=CURSOR` (or the `Last-Event-ID` header an
`EventSource` sends when it reconnects) starts after it, while serve still holds it (the
last 2,000 transitions of this process); else the stream starts with all it holds.
`?run=RUN` keeps one run's. A comment line (`: keep-alive`) goes out every `KEEPALIVE_S`, so
idle followers are neither closed for idleness nor left on dead connections.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs

import orjson
from waitress.channel import HTTPChannel

from runwatch.stream.alerts import Alert

if TYPE_CHECKING:
    from runwatch.service.core import Service

log = logging.getLogger("runwatch.serve")

PATH = "/v1/alerts/stream"
CONTENT_TYPE = "text/event-stream"
#: A comment line this often keeps a quiet stream open (waitress closes connections idle for
#: `--idle-timeout`) and finds followers that went away.
KEEPALIVE_S = 10.0
#: A follower this far behind (bytes not yet taken by its socket) is let go.
MAX_BACKLOG = 4 << 20

Refusal = tuple[int, bytes, str]


def frame(cursor: str, alert: dict[str, Any]) -> bytes:
    """One transition as a Server-Sent Event."""
    return b"id: %s\nevent: alert\ndata: %s\n\n" % (cursor.encode(), orjson.dumps(alert))


class Followers:
    """The open streams of one server, fed from the service's transitions."""

    def __init__(self, service: Service, trigger: Callable[[Callable[[], None]], None]) -> None:
        self.service = service
        self._trigger = trigger  # runs a callable on the I/O thread
        self._lock = threading.Lock()
        self._open: dict[FollowerChannel, str | None] = {}  # channel -> its run filter
        service.listeners.append(self.publish)

    def __len__(self) -> int:
        return len(self._open)

    def subscribe(self, channel: FollowerChannel, after: str | None, run: str | None) -> bytes:
        """Register `channel`; the backlog it is owed. Under the service's lock, so no
        transition falls between the backlog and the first one published to it."""
        with self.service.lock:
            backlog = self.service.transitions(after, run)
            with self._lock:
                self._open[channel] = run
        return b"".join(frame(cursor, alert) for cursor, alert in backlog)

    def drop(self, channel: FollowerChannel) -> None:
        with self._lock:
            self._open.pop(channel, None)

    def publish(self, cursor: str, alert: Alert) -> None:
        """A transition (called under the service's lock): queued for the I/O thread."""
        with self._lock:
            if not self._open:
                return
            targets = [c for c, run in self._open.items() if run is None or run == alert.run]
        if targets:
            data = frame(cursor, alert.to_dict())
            self._trigger(lambda: self._send(targets, data))

    def keepalive(self) -> None:
        with self._lock:
            targets = list(self._open)
        if targets:
            self._trigger(lambda: self._send(targets, b": keep-alive\n\n"))

    def close(self) -> None:
        """No more transitions to anyone (the server stops; its connections close)."""
        if self.publish in self.service.listeners:
            self.service.listeners.remove(self.publish)
        with self._lock:
            self._open.clear()

    def _send(self, channels: list[FollowerChannel], data: bytes) -> None:
        """On the I/O thread: append to each follower's output; let go of those gone or too
        far behind."""
        for channel in channels:
            if not channel.connected or channel.total_outbufs_len > MAX_BACKLOG:
                if channel.connected:
                    log.warning("a follower of %s from %s fell %d bytes behind: closed (it "
                                "resumes from its cursor)", PATH, channel.addr,
                                channel.total_outbufs_len)  # fmt: skip
                channel.handle_close()
                continue
            channel.queue(data)


class FollowerChannel(HTTPChannel):
    """waitress's connection, which can become a follower: for `GET /v1/alerts/stream` the
    worker writes the head and the backlog and gives the connection back to the I/O thread
    (`Followers`) instead of answering through the WSGI application."""

    followers: Followers | None = None  # set on the class made per server
    #: the WSGI application's check of a request (token, parameters): None to follow
    refuse: Callable[[dict[str, Any]], Refusal | None] | None = None
    following = False

    def service(self) -> None:
        request: Any = self.requests[0]  # (waitress's stubs lack path, query, command)
        followers, refuse = self.followers, self.refuse
        if (
            followers is None
            or refuse is None
            or request.error
            or request.command != "GET"
            or request.path != PATH
        ):
            super().service()
            return
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": request.path,
                   "QUERY_STRING": request.query or ""}  # fmt: skip
        environ.update({f"HTTP_{k}": v for k, v in request.headers.items()})
        if refuse(environ) is not None:
            super().service()  # the application answers with the same refusal
            return
        query = parse_qs(request.query or "")
        after = query.get("after", [environ.get("HTTP_LAST_EVENT_ID")])[0] or None
        run = query.get("run", [None])[0]
        version = "1.0" if request.version == "1.0" else "1.1"
        head = (
            f"HTTP/{version} 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\n"
            "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
        ).encode()
        self.following = True
        backlog = followers.subscribe(self, after, run)
        self.write_soon(head + backlog + b": following\n\n")
        with cast(Any, self).requests_lock:  # requests pipelined after this one go unanswered
            for asked in self.requests:
                asked.close()
            self.requests = []
        self.last_activity = time.time()
        self.server.pull_trigger()

    def received(self, data: bytes) -> bool:
        if self.following:  # a follower has nothing more to ask
            return False
        return bool(super().received(data))

    def handle_read(self) -> None:
        super().handle_read()
        if self.following and not self.connected:  # the follower hung up
            self.handle_close()

    def handle_close(self) -> None:
        if self.following and self.followers is not None:
            self.followers.drop(self)
        super().handle_close()

    def queue(self, data: bytes) -> None:
        """On the I/O thread: append to the output (no task writes to a follower)."""
        with self.outbuf_lock:
            self.outbufs[-1].append(data)
            self.current_outbuf_count += len(data)
            self.total_outbufs_len += len(data)


def follower_channel(
    followers: Followers, refuse: Callable[[dict[str, Any]], Refusal | None]
) -> type[FollowerChannel]:
    """The channel class of one server, bound to its followers and its application."""
    return type(
        "ServeChannel",
        (FollowerChannel,),
        {"followers": followers, "refuse": staticmethod(refuse)},
    )
