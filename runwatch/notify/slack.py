"""Talking to Slack: slack-sdk's WebClient plus the retry policy runwatch needs.

Alertmanager's lesson: a notifier says whether an error is worth retrying. Here 429 waits
for its Retry-After, 5xx and network errors back off and retry (bounded), and everything
else (invalid_auth, channel_not_found, not_in_channel, ...) fails at once: retrying a bad
token forever only hides it. The token lives in the WebClient and in nothing we log or
raise: every message built here names the method and Slack's error code only.

Before a call goes out it waits for its slot under Slack's rate limits (`runwatch.notify.pace`),
so a 429 is the exception. slack-sdk's own `RateLimitErrorRetryHandler` is not used: it
sleeps with `time.sleep` (Retry-After plus up to a second of jitter) where a test or a
stopping notifier needs its own `sleep`, caps nothing (a Retry-After of a day is slept), and
knows nothing of the pacing; `bench/slack_storm.py` measures the two on a storm.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from runwatch.exceptions import SlackError, TokenMissing
from runwatch.notify.config import DEFAULT_BASE_URL
from runwatch.notify.pace import Paces

log = logging.getLogger("runwatch.notify")

TOKEN_ENV = "SLACK_BOT_TOKEN"
TOKEN_FILE_ENV = "SLACK_BOT_TOKEN_FILE"
#: Slack error codes that mean "Slack's side, try again" (besides any 5xx status).
SERVER_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
#: slack-sdk's error for a body that is not JSON (a proxy's page, a truncated answer): an
#: answer nobody at Slack meant, so tried again like a 5xx.
NOT_JSON = "Received a response in a non-JSON format"
#: The longest Retry-After obeyed: a header asking for a day must not silence Slack for one.
MAX_RETRY_AFTER = 300.0
#: The token itself is refused: nothing will work until someone fixes it.
AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)


def load_token(token_file: str | None = None, env: dict[str, str] | None = None) -> str:
    """The bot token: from `token_file` (a mounted secret), $SLACK_BOT_TOKEN_FILE, or
    $SLACK_BOT_TOKEN, in that order."""
    env = dict(os.environ) if env is None else env
    path = token_file or env.get(TOKEN_FILE_ENV)
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as err:
            raise TokenMissing(f"cannot read the Slack token file {path}: {err.strerror}") from None
        if not token:
            raise TokenMissing(f"the Slack token file {path} is empty")
        return token
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        raise TokenMissing(
            f"no Slack token: set {TOKEN_ENV}, or {TOKEN_FILE_ENV} / token_file to a secret file"
        )
    return token


#: A channel ID (C..., G... for private, D... for an IM): what every method but
#: chat.postMessage needs; a name (`#rl-alerts`, `rl-alerts`) is lowercase.
CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9_-]+$")


def is_channel_id(channel: str) -> bool:
    return CHANNEL_ID.match(channel) is not None


class SlackPoster:
    """chat.postMessage / chat.update / conversations.history / conversations.replies /
    conversations.list with retries. Every method but chat.postMessage takes a channel ID,
    as Slack's API does (a name is `channel_not_found`)."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 10.0,
        max_attempts: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not base_url.endswith("/"):
            base_url += "/"
        # no slack-sdk retry handlers: the policy is ours, below
        self._client = WebClient(
            token=token, base_url=base_url, timeout=int(timeout), retry_handlers=[]
        )
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sleep = sleep
        #: the rate-limit meters (`sleep` waits for their slots, on `clock`)
        self.clock = clock
        self.paces = Paces(clock)
        self.calls = 0
        #: 429s Slack answered (each waited out and tried again)
        self.limited = 0

    def __repr__(self) -> str:
        return "SlackPoster(token=<redacted>)"

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        *,
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"channel": channel, "text": text, "unfurl_links": False}
        if blocks is not None:
            args["blocks"] = blocks
        if thread_ts is not None:
            args["thread_ts"] = thread_ts
        if metadata is not None:
            args["metadata"] = metadata
        return self.call("chat.postMessage", args)

    def update(
        self,
        channel: str,
        ts: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """chat.update: the message's text and blocks; its metadata too when given (else
        Slack keeps what it had)."""
        args: dict[str, Any] = {"channel": channel, "ts": ts, "text": text}
        if blocks is not None:
            args["blocks"] = blocks
        if metadata is not None:
            args["metadata"] = metadata
        return self.call("chat.update", args)

    def ready(self, method: str, channel: str, spare: int = 0) -> bool:
        """Whether a call of `method` in `channel` would go out now, without waiting for
        its slot under Slack's rate limit (and leave `spare` slots for others)."""
        pace = self.paces.of(method, channel)
        return pace is None or pace.ready(spare) <= 0

    def permalink(self, channel: str, ts: str) -> str | None:
        """A message's permalink (chat.getPermalink; no scope needed); None when Slack
        has none to give (the message deleted)."""
        try:
            data = self.call("chat.getPermalink", {"channel": channel, "message_ts": ts})
        except SlackError as err:
            if err.retryable or err.error in AUTH_ERRORS:
                raise
            return None
        link = data.get("permalink")
        return str(link) if link else None

    def history(self, channel: str, oldest: float) -> list[dict[str, Any]]:
        """Recent messages of a channel (an ID) with their metadata -- top-level ones: Slack
        leaves replies in threads out of a channel's history."""
        args = {"channel": channel, "oldest": f"{oldest:.6f}", "include_all_metadata": True}
        return self._pages("conversations.history", args, "messages")

    def replies(self, channel: str, thread_ts: str, oldest: float) -> list[dict[str, Any]]:
        """The messages of one thread (the root and its replies) with their metadata."""
        args = {"channel": channel, "ts": thread_ts, "oldest": f"{oldest:.6f}",
                "include_all_metadata": True}  # fmt: skip
        return self._pages("conversations.replies", args, "messages")

    def channel_id(self, name: str) -> str | None:
        """The ID of the channel named `name` (`#rl-alerts` or `rl-alerts`) the bot can see,
        from conversations.list; None when there is none."""
        wanted = name.lstrip("#")
        args = {"types": "public_channel,private_channel", "exclude_archived": True}
        for channel in self._pages("conversations.list", args, "channels"):
            if channel.get("name") == wanted and channel.get("id"):
                return str(channel["id"])
        return None

    def _pages(self, method: str, args: dict[str, Any], field: str) -> list[dict[str, Any]]:
        """Every item of a paginated method (Slack's `response_metadata.next_cursor`)."""
        out: list[dict[str, Any]] = []
        cursor = ""
        for _ in range(100):  # a bound: 100 pages of 200
            data = self.call(
                method, {**args, "limit": 200, **({"cursor": cursor} if cursor else {})}
            )
            out += list(data.get(field) or [])
            cursor = str((data.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
        return out

    def call(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """One API call with the retry policy; returns the response body or raises SlackError."""
        delay = self.backoff
        pace = self.paces.of(method, str(args.get("channel") or ""))
        for attempt in range(1, self.max_attempts + 1):
            if pace is not None:
                slot = pace.reserve()
                if slot > 0:
                    self.sleep(slot)
            self.calls += 1
            try:
                response = self._client.api_call(method, json=args)
                return dict(response.data) if isinstance(response.data, dict) else {}
            except SlackApiError as err:
                status = int(getattr(err.response, "status_code", 0) or 0)
                data = err.response.data if isinstance(err.response.data, dict) else {}
                code = str(data.get("error") or f"HTTP {status}")
                if status == 429 or code == "ratelimited":
                    wait = _retry_after(err.response.headers, delay)
                    self.limited += 1
                    if pace is not None:
                        pace.hold(wait)
                    log.warning("slack %s rate limited: retrying in %.1fs", method, wait)
                elif status >= 500 or code in SERVER_ERRORS or code.startswith(NOT_JSON):
                    code = code if len(code) <= 80 else code[:80] + "…"
                    wait = delay
                    log.warning("slack %s: %s, retrying in %.1fs", method, code, wait)
                else:
                    log.error("slack %s failed: %s (not retried)", method, code)
                    needed = data.get("needed")
                    raise SlackError(method, code, retryable=False,
                                     needed=str(needed) if needed else None) from None  # fmt: skip
            except (SlackClientError, OSError) as err:
                wait = delay
                log.warning(
                    "slack %s: network error %s, retrying in %.1fs",
                    method,
                    type(err).__name__,
                    wait,
                )
            if attempt == self.max_attempts:
                break
            self.sleep(wait)
            delay = min(self.max_backoff, delay * 2) * (1 + random.uniform(0, 0.1))
        log.error("slack %s failed after %d attempts", method, self.max_attempts)
        raise SlackError(method, f"gave up after {self.max_attempts} attempts", retryable=True)


def _retry_after(headers: Any, default: float) -> float:
    """Slack's Retry-After, at most MAX_RETRY_AFTER (said when capped)."""
    try:
        value = headers.get("Retry-After") or headers.get("retry-after")
        if isinstance(value, list):
            value = value[0]
        asked = float(value)
    except (AttributeError, TypeError, ValueError):
        return default
    if not asked >= 0:  # NaN, negative
        return default
    if asked > MAX_RETRY_AFTER:
        log.warning("slack asked to wait %.0fs (Retry-After); waiting %.0fs instead",
                    asked, MAX_RETRY_AFTER)  # fmt: skip
        return MAX_RETRY_AFTER
    return asked
