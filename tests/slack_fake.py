"""A local HTTP server that answers like the Slack Web API, for the notifier's tests.

chat.postMessage, chat.update and conversations.history, with the bot token checked
(invalid_auth), unknown channels refused (channel_not_found), and scripted failures queued
per method: `fake.fail("chat.postMessage", 429, retry_after=1)`, `fake.fail(..., 500)`,
`fake.fail(..., 200, body=b"<html>")` (an answer that is not JSON). `fake.hold(method)`
takes the next such call (the message is posted) and answers only after `fake.release()`:
a client killed meanwhile never learns that Slack has it.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    metadata: dict[str, Any] | None
    updates: list[str] = field(default_factory=list)


class FakeSlack:
    def __init__(self, token: str = "xoxb-test-token", channels: tuple[str, ...] = ("C-ALERTS",)):
        self.token = token
        self.channels = {c: c for c in channels}  # name or id -> id
        self.messages: list[Message] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failures: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self._ts = itertools.count(1)
        self._lock = threading.Lock()
        self.holding: set[str] = set()
        self.held = threading.Event()  # a held call has been taken
        self._released = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                method = self.path.rstrip("/").rsplit("/", 1)[-1]
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                if "json" in (self.headers.get("Content-Type") or ""):
                    args = json.loads(raw or "{}")
                else:
                    args = {k: v[0] for k, v in parse_qs(raw).items()}
                auth = self.headers.get("Authorization", "")
                status, body, headers = fake.answer(method, args, auth)
                if method in fake.holding:
                    fake.holding.discard(method)
                    fake.held.set()
                    fake._released.wait(60)
                data = json.dumps(body).encode() if isinstance(body, dict) else body
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-slack")
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    def hold(self, method: str) -> None:
        self.holding.add(method)

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def add_channel(self, name: str, ident: str | None = None) -> None:
        self.channels[name] = ident or name

    def fail(
        self,
        method: str,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        error: str | None = None,
        body: bytes | None = None,
    ) -> None:
        extra: dict[str, Any] = {} if body is None else {"body": body}
        if retry_after is not None:
            extra["retry_after"] = retry_after
        if error is not None:
            extra["error"] = error
        self.failures.setdefault(method, []).extend([(status, extra)] * times)

    # -- the API ---------------------------------------------------------------------------

    def answer(
        self, method: str, args: dict[str, Any], auth: str
    ) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        with self._lock:
            self.calls.append((method, args))
            queued = self.failures.get(method)
            if queued:
                status, extra = queued.pop(0)
                if "body" in extra:
                    return status, extra["body"], {}
                if status == 429:
                    return (
                        429,
                        {"ok": False, "error": "ratelimited"},
                        {"Retry-After": str(extra.get("retry_after", 1))},
                    )
                if status >= 500:
                    return status, b"<html>upstream error</html>", {}
                return 200, {"ok": False, "error": extra.get("error", "unknown")}, {}
            if auth != f"Bearer {self.token}":
                return 200, {"ok": False, "error": "invalid_auth"}, {}
            channel = self.channels.get(str(args.get("channel")))
            if channel is None:
                return 200, {"ok": False, "error": "channel_not_found"}, {}
            if method == "chat.postMessage":
                ts = f"{int(time.time())}.{next(self._ts):06d}"
                meta = args.get("metadata")
                if isinstance(meta, str):
                    meta = json.loads(meta)
                self.messages.append(
                    Message(
                        channel,
                        ts,
                        args.get("text", ""),
                        args.get("blocks"),
                        args.get("thread_ts"),
                        meta,
                    )
                )
                return 200, {"ok": True, "channel": channel, "ts": ts}, {}
            if method == "chat.update":
                for m in self.messages:
                    if m.channel == channel and m.ts == args.get("ts"):
                        m.updates.append(args.get("text", ""))
                        return 200, {"ok": True, "channel": channel, "ts": m.ts}, {}
                return 200, {"ok": False, "error": "message_not_found"}, {}
            if method == "conversations.history":
                oldest = float(args.get("oldest") or 0)
                msgs = [
                    {"ts": m.ts, "text": m.text, "thread_ts": m.thread_ts, "metadata": m.metadata}
                    for m in self.messages
                    if m.channel == channel and float(m.ts) >= oldest
                ]
                return 200, {"ok": True, "messages": msgs}, {}
            return 200, {"ok": False, "error": "unknown_method"}, {}

    # -- reading what happened -------------------------------------------------------------

    def roots(self) -> list[Message]:
        return [m for m in self.messages if m.thread_ts is None]

    def replies(self, root: Message) -> list[Message]:
        return [m for m in self.messages if m.thread_ts == root.ts]

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)
