"""A local HTTP server that answers like the Slack Web API, for the notifier's tests and the
fleet bench (which times an alert's way to Slack) -- as strict as Slack is, so the notifier
is held to the real API:

- chat.postMessage takes a channel ID or a name (`#rl-alerts` / `rl-alerts`) and answers with
  the channel's ID; chat.update, conversations.history, conversations.replies and
  conversations.info take an ID only (a name is `channel_not_found`, as on Slack);
- conversations.history holds a channel's top-level messages only: replies in threads are
  left out (they come from conversations.replies, with the thread root's ts);
- message metadata comes back only with `include_all_metadata`; it must be an object with
  `event_type` (a string) and `event_payload` (an object), else `invalid_metadata_format`;
- chat.update (Slack's chat.update reference, and its error list) edits a message of this
  app by channel ID and `ts` -- a reply's ts edits the reply -- replacing its text, its
  blocks (dropped when only text is sent), and its metadata when some is sent (kept when
  none is); a ts of no message in that channel is `message_not_found`, another user's
  message `cant_update_message` (`fake.post_as_user`), no text and no blocks `no_text`,
  over 40,000 characters `msg_too_long`, over 50 blocks `invalid_blocks` (also on a post);
- conversations.list and the history methods page with `limit` and
  `response_metadata.next_cursor`;
- the bot's scopes are checked as Slack's method pages list them (`missing_scope`, with
  `needed` and `provided`), and a post to a channel the bot was not invited to is
  `not_in_channel` unless it holds `chat:write.public` -- when the fake is given `scopes`
  and `joined` (every scope, every channel, by default);
- Slack's rate limits (https://docs.slack.dev/apis/web-api/rate-limits): chat.postMessage
  "generally allows posting one message per second per channel", short bursts tolerated, and
  chat.update is Tier 3 ("50+ per minute", per method per workspace; its method page). Past
  either the call is refused as Slack refuses it -- HTTP 429, `{"ok": false, "error":
  "ratelimited"}` and a `Retry-After` header of whole seconds -- and counted in
  `fake.limited`. The burst allowed is a guess on the strict side (Slack names none); time is
  `clock` (a `VirtualClock` lets a test of a storm run without waiting);
- chat.getPermalink (no scope) answers a message's permalink, `message_not_found` else;
- the bot token is checked (invalid_auth), and scripted failures are queued per method:
  `fake.fail("chat.postMessage", 429, retry_after=1)`, `fake.fail(..., 500)`,
  `fake.fail(..., 200, body=b"<html>")` (an answer that is not JSON). `fake.hold(method)`
  takes the next such call (the message is posted) and answers only after
  `fake.release()`: a client killed meanwhile never learns that Slack has it.

Channels are given as IDs (`C-ALERTS`) or as names (`#training-alerts`, which get an ID).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
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
    #: the text of each edit, in order (`text`, `blocks`, `metadata` are the latest)
    updates: list[str] = field(default_factory=list)
    #: when it was posted (wall clock): how long an alert took to reach Slack
    received: float = field(default_factory=time.time)
    #: posted by this app's bot (else a person's: the bot cannot edit it)
    ours: bool = True
    #: every alert id its metadata carried, posted and edited in, in order, each once (a
    #: notifier folds a resolve into its firing's message, and a burst of replies into one,
    #: by an edit whose metadata lists every transition the message shows: `alert_ids`)
    shown: list[str] = field(default_factory=list)

    def carry(self, metadata: dict[str, Any] | None) -> None:
        """Note the alert ids `metadata` carries (`alert_ids`, `alert_id`) not noted yet."""
        payload = (metadata or {}).get("event_payload") or {}
        ids = list(payload.get("alert_ids") or ())
        if payload.get("alert_id") is not None:
            ids.append(payload["alert_id"])
        for ident in map(str, ids):
            if ident not in self.shown:
                self.shown.append(ident)


#: Slack's bounds on a message (chat.postMessage / chat.update reference pages)
MAX_TEXT = 40_000
MAX_BLOCKS = 50


def _json_arg(raw: Any) -> tuple[Any, bool]:
    """An argument sent as a JSON value, or as that value in a JSON string (a form post)."""
    if not isinstance(raw, str):
        return raw, True
    try:
        return json.loads(raw), True
    except ValueError:
        return None, False


def _metadata(raw: Any) -> tuple[dict[str, Any] | None, bool]:
    """Message metadata as sent; whether it has the shape Slack asks for."""
    meta, ok = _json_arg(raw)
    if meta is None:
        return None, ok
    ok = (isinstance(meta, dict) and isinstance(meta.get("event_type"), str)
          and isinstance(meta.get("event_payload"), dict))  # fmt: skip
    return (meta if ok else None), ok


def _blocks(raw: Any) -> tuple[list[dict[str, Any]] | None, bool]:
    blocks, ok = _json_arg(raw)
    if blocks is None:
        return None, ok
    ok = isinstance(blocks, list) and len(blocks) <= MAX_BLOCKS
    return (blocks if ok else None), ok


@dataclass(frozen=True)
class Limit:
    """One call per `interval` seconds on average, `burst` of them back to back (GCRA)."""

    interval: float
    burst: int


#: Slack's rate limits (https://docs.slack.dev/apis/web-api/rate-limits): chat.postMessage one
#: message per second per channel, "short bursts >1 allowed"; chat.update Tier 3, "50+ per
#: minute", per method per workspace. The bursts are this fake's: Slack gives no number.
LIMITS = {"chat.postMessage": Limit(1.0, 4), "chat.update": Limit(60 / 50, 20)}


class VirtualClock:
    """Time that moves only when someone sleeps: the fake's limits and a client's pacing agree
    on it, so a test of a storm neither waits nor depends on timing."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += max(0.0, seconds)


#: The scope each method needs (Slack's method reference, "Scopes"; public channels).
SCOPE = {"chat.postMessage": "chat:write", "chat.update": "chat:write",
         "conversations.history": "channels:history", "conversations.replies": "channels:history",
         "conversations.list": "channels:read", "conversations.info": "channels:read"}  # fmt: skip


class FakeSlack:
    def __init__(
        self,
        token: str = "xoxb-test-token",
        channels: tuple[str, ...] = ("C-ALERTS",),
        *,
        scopes: frozenset[str] | None = None,
        joined: set[str] | None = None,
        limits: dict[str, Limit] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.token = token
        #: the rate limits enforced (`LIMITS` by default; `{}`: none), on `clock`
        self.limits = LIMITS if limits is None else limits
        self.clock = clock
        self._tat: dict[tuple[str, str], float] = {}  # (method, channel or "*") -> GCRA's TAT
        #: the calls refused with 429 for a limit: (method, channel, Retry-After)
        self.limited: list[tuple[str, str, int]] = []
        #: the bot token's scopes (None: every one) and the channels (IDs) it was invited
        #: to (None: every one)
        self.scopes, self.joined = scopes, joined
        self.ids: set[str] = set()  # channel ids
        self.names: dict[str, str] = {}  # channel name (no "#") -> id
        for c in channels:
            if c.startswith("#"):
                self.add_channel(c)
            else:
                self.ids.add(c)
                self.names.setdefault(c.lower(), c)
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
                # a client killed mid-call (as tests kill notify during a held post) is gone:
                # Slack made the post all the same, and nothing is left to answer
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a short poll: `close` (shutdown) waits for one, after every test that made a fake
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       name="fake-slack")  # fmt: skip
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    def hold(self, method: str) -> None:
        """Hold the next call of `method` until `release()` (again after a release)."""
        self.held.clear()
        self._released.clear()
        self.holding.add(method)

    def release(self) -> None:
        self._released.set()

    def close(self) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def add_channel(self, name: str, ident: str | None = None) -> None:
        """A channel called `name`, with the ID `ident` (made up when not given)."""
        ident = ident or "C" + "".join(ch for ch in name.upper() if ch.isalnum())[:10]
        self.ids.add(ident)
        self.names[name.lstrip("#")] = ident

    def post_as_user(self, channel: str, text: str) -> Message:
        """A message a person posted in `channel` (an ID): the bot cannot edit it."""
        with self._lock:
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            message = Message(channel, ts, text, None, None, None, ours=False)
            self.messages.append(message)
            return message

    def remove_channel(self, name: str) -> None:
        ident = self.names.pop(name.lstrip("#"), None)
        self.ids.discard(ident or name)

    def _by_id(self, channel: object) -> str | None:
        return channel if isinstance(channel, str) and channel in self.ids else None

    def _by_id_or_name(self, channel: object) -> str | None:
        if not isinstance(channel, str):
            return None
        return self._by_id(channel) or self.names.get(channel.lstrip("#"))

    @staticmethod
    def _page(items: list[dict[str, Any]], args: dict[str, Any]) -> tuple[list[Any], str]:
        start = int(args.get("cursor") or 0)
        limit = max(1, min(int(args.get("limit") or 100), 1000))
        more = start + limit < len(items)
        return items[start : start + limit], str(start + limit) if more else ""

    def _shown(self, m: Message, args: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"ts": m.ts, "text": m.text}
        if m.thread_ts is not None:
            out["thread_ts"] = m.thread_ts
        if m.metadata is not None and str(args.get("include_all_metadata")).lower() in (
            "true", "1"):  # fmt: skip
            out["metadata"] = m.metadata
        return out

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
            needed = SCOPE.get(method)
            if self.scopes is not None and needed is not None and needed not in self.scopes:
                return 200, {"ok": False, "error": "missing_scope", "needed": needed,
                             "provided": ",".join(sorted(self.scopes))}, {}  # fmt: skip
            if method == "conversations.list":
                listed = [{"id": i, "name": n, "is_channel": True}
                          for n, i in sorted(self.names.items())]  # fmt: skip
                page, cursor = self._page(listed, args)
                return 200, {"ok": True, "channels": page,
                             "response_metadata": {"next_cursor": cursor}}, {}  # fmt: skip
            if method == "chat.postMessage":
                channel = self._by_id_or_name(args.get("channel"))
            else:  # every other method wants the channel's ID
                channel = self._by_id(args.get("channel"))
            if channel is None:
                return 200, {"ok": False, "error": "channel_not_found"}, {}
            public = self.scopes is None or "chat:write.public" in self.scopes
            outside = self.joined is not None and channel not in self.joined
            if outside and not (method == "chat.postMessage" and public):
                return 200, {"ok": False, "error": "not_in_channel"}, {}
            wait = self._over_limit(method, channel)
            if wait is not None:
                self.limited.append((method, channel, wait))
                return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(wait)}
            if method == "chat.getPermalink":
                ts = args.get("message_ts")
                if not any(m.channel == channel and m.ts == ts for m in self.messages):
                    return 200, {"ok": False, "error": "message_not_found"}, {}
                link = f"https://fake.slack.com/archives/{channel}/p{str(ts).replace('.', '')}"
                return 200, {"ok": True, "channel": channel, "permalink": link}, {}
            if method in ("chat.postMessage", "chat.update"):
                meta, meta_ok = _metadata(args.get("metadata"))
                blocks, blocks_ok = _blocks(args.get("blocks"))
                text = args.get("text")
                if not meta_ok:
                    return 200, {"ok": False, "error": "invalid_metadata_format"}, {}
                if not blocks_ok:
                    return 200, {"ok": False, "error": "invalid_blocks"}, {}
                if not text and not blocks:
                    return 200, {"ok": False, "error": "no_text"}, {}
                if len(text or "") > MAX_TEXT:
                    return 200, {"ok": False, "error": "msg_too_long"}, {}
            if method == "chat.postMessage":
                ts = f"{int(time.time())}.{next(self._ts):06d}"
                thread = args.get("thread_ts")
                if thread is not None and not any(
                    m.channel == channel and m.ts == thread and m.thread_ts is None
                    for m in self.messages
                ):
                    return 200, {"ok": False, "error": "thread_not_found"}, {}
                posted = Message(channel, ts, text or "", blocks, thread, meta)
                posted.carry(meta)
                self.messages.append(posted)
                return 200, {"ok": True, "channel": channel, "ts": ts}, {}
            if method == "chat.update":
                wanted = args.get("ts")
                found = next((m for m in self.messages
                              if m.channel == channel and m.ts == wanted), None)  # fmt: skip
                if found is None:
                    return 200, {"ok": False, "error": "message_not_found"}, {}
                if not found.ours:
                    return 200, {"ok": False, "error": "cant_update_message"}, {}
                found.text = text or ""
                found.blocks = blocks  # text alone drops the blocks the message had
                if meta is not None:
                    found.metadata = meta  # none sent: the message keeps its own
                    found.carry(meta)
                found.updates.append(text or "")
                return 200, {"ok": True, "channel": channel, "ts": found.ts,
                             "text": found.text}, {}  # fmt: skip
            if method in ("conversations.history", "conversations.replies"):
                oldest = float(args.get("oldest") or 0)
                if method == "conversations.history":  # top-level messages only
                    msgs = [m for m in self.messages if m.channel == channel
                            and m.thread_ts is None and float(m.ts) >= oldest]  # fmt: skip
                    msgs.reverse()  # newest first, as Slack gives them
                else:
                    root = args.get("ts")
                    parent = [m for m in self.messages if m.channel == channel
                              and m.ts == root and m.thread_ts is None]  # fmt: skip
                    if not parent:
                        return 200, {"ok": False, "error": "thread_not_found"}, {}
                    msgs = parent + [m for m in self.messages if m.channel == channel
                                     and m.thread_ts == root and float(m.ts) >= oldest]  # fmt: skip
                page, cursor = self._page([self._shown(m, args) for m in msgs], args)
                return 200, {"ok": True, "messages": page, "has_more": bool(cursor),
                             "response_metadata": {"next_cursor": cursor}}, {}  # fmt: skip
            if method == "conversations.info":
                name = next((n for n, i in self.names.items() if i == channel), channel)
                return 200, {"ok": True, "channel": {"id": channel, "name": name}}, {}
            return 200, {"ok": False, "error": "unknown_method"}, {}

    def _over_limit(self, method: str, channel: str) -> int | None:
        """None when a call is within its limit (and counts it), else the Retry-After."""
        limit = self.limits.get(method)
        if limit is None:
            return None
        key = (method, channel if method == "chat.postMessage" else "*")
        now = self.clock()
        tat = self._tat.get(key, now)
        allowed_at = tat - (limit.burst - 1) * limit.interval
        if now < allowed_at:
            return max(1, math.ceil(allowed_at - now))
        self._tat[key] = max(tat, now) + limit.interval
        return None

    # -- reading what happened -------------------------------------------------------------

    def roots(self) -> list[Message]:
        return [m for m in self.messages if m.thread_ts is None]

    def replies(self, root: Message) -> list[Message]:
        return [m for m in self.messages if m.thread_ts == root.ts]

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)
