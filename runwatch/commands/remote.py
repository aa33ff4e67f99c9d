"""The commands' side of a running `runwatch serve`: its JSON API by URL (`--url`, else
$RUNWATCH_URL -- the address the emitters send to), and the follower stream of alert
transitions. Standard library only, as the emitters' client it builds on.

Which runwatch a reading command asks is decided here once (`history_source`): a flag wins
(`--url`, or the command's file flag), then the file's variable, then $RUNWATCH_URL, then the
file's default -- so `runwatch runs` beside a `serve` whose URL the shell exports asks that
serve, and `--db` still reads a file.
"""

from __future__ import annotations

import argparse
import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

from runwatch.commands import read_token
from runwatch.emitters import env
from runwatch.emitters.http import ServiceClient
from runwatch.exceptions import CommandError


def add_url_args(p: argparse.ArgumentParser, what: str, group: Any = None) -> None:
    """`--url` (in `group` when given: one of the ways to say where) and `--token-file`: ask
    a running `runwatch serve`."""
    (group or p).add_argument("--url", metavar="URL", help=f"ask the runwatch serve at URL "
                              f"{what}; token: --token-file or $RUNWATCH_TOKEN")  # fmt: skip
    p.add_argument("--token-file", metavar="PATH", help="bearer token for --url")


def history_source(url: str | None, path: str | None, path_env: str) -> str | None:
    """The serve URL to ask, or None to read the file: `--url`, else a file flag, else the
    file's variable, else $RUNWATCH_URL."""
    if url:
        return url
    if path or env.get(path_env):
        return None
    return env.get(env.URL)


class Remote:
    """A `runwatch serve` by URL: its JSON answers, its errors as one line."""

    def __init__(self, url: str, token_file: str | None = None, timeout: float = 60.0) -> None:
        try:
            self.client = ServiceClient(url, read_token(token_file), timeout)
        except ValueError as err:
            raise CommandError(f"--url: {err}") from None
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"Content-Type": "application/json"}
        try:
            status, answer = self.client.request(method, path, data, headers, limit=256 << 20)
        except (OSError, http.client.HTTPException) as err:
            raise CommandError(f"runwatch serve at {self.url}: {_why(err)}", 1) from None
        try:
            parsed = json.loads(answer)
        except ValueError:
            parsed = None
        if status >= 400:
            why = parsed.get("error") if isinstance(parsed, dict) else None
            why = why or f"HTTP {status}: {answer[:200].decode('utf-8', 'replace')}"
            # a request it refused (4xx) is the user's to fix; the rest is the service's
            raise CommandError(
                f"runwatch serve at {self.url}: {why}{_hint(status)}", 2 if status < 500 else 1
            )
        if parsed is None:
            raise CommandError(f"runwatch serve at {self.url}: the answer is not JSON", 1)
        return parsed

    def get(self, path: str, **query: Any) -> Any:
        args = {k: v for k, v in query.items() if v is not None}
        return self._call("GET", path + (f"?{urlencode(args)}" if args else ""))

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._call("POST", path, body)

    def delete(self, path: str) -> Any:
        return self._call("DELETE", path)

    def follow(self, after: str | None = None, run: str | None = None) -> Iterator[tuple[str, Any]]:
        """(cursor, transition) from `GET /v1/alerts/stream`, until the connection ends."""
        query = urlencode({k: v for k, v in (("after", after), ("run", run)) if v})
        path = "/v1/alerts/stream" + (f"?{query}" if query else "")
        client = self.client
        cls = http.client.HTTPSConnection if client._https else http.client.HTTPConnection
        conn = cls(client._host, client._port, timeout=None)  # a quiet stream is not an error
        try:
            try:
                headers = {**client._auth, "Accept": "text/event-stream"}
                conn.request("GET", client._base + path, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as err:
                raise CommandError(f"runwatch serve at {self.url}: {_why(err)}", 1) from None
            if resp.status != 200:
                body = resp.read(4096)
                try:
                    why = json.loads(body).get("error")
                except (ValueError, AttributeError):
                    why = f"HTTP {resp.status}"
                raise CommandError(f"runwatch serve at {self.url}: {why}{_hint(resp.status)}", 2)
            yield from _events(resp)
        finally:
            conn.close()


def _events(resp: http.client.HTTPResponse) -> Iterator[tuple[str, Any]]:
    """Server-Sent Events of kind `alert`: (id, parsed data)."""
    ident, kind, data = "", "message", list[str]()
    while True:
        try:
            raw = resp.readline()
        except (OSError, http.client.HTTPException):
            return
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            try:
                parsed = json.loads("\n".join(data)) if kind == "alert" and data else None
            except ValueError:
                parsed = None
            if parsed is not None:
                yield ident, parsed
            kind, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            ident = value
        elif name == "event":
            kind = value
        elif name == "data":
            data.append(value)


def _hint(status: int) -> str:
    """What the user can do about a refusal serve's own words do not say how to fix."""
    if status == 401:  # serve runs with --token-file: so must the command
        return "; give the token with --token-file PATH or $RUNWATCH_TOKEN"
    return ""


def _why(err: Exception) -> str:
    """What went wrong reaching serve, as a person would say it (a wrong port is the usual)."""
    if isinstance(err, ConnectionRefusedError):
        return "connection refused: is runwatch serve running at that address?"
    if isinstance(err, TimeoutError):
        return "no answer in time (timed out)"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def run_path(prefix: str, run: str) -> str:
    """An endpoint that ends with a run id (which may hold `/`)."""
    return prefix + quote(run, safe="/@:+")
