"""`GET /v1/alerts/stream`: followers of serve's alert transitions are held by waitress's I/O
thread, not by a request thread each: a server with two request threads serves a dozen
followers and still answers every other request; each follower gets every transition once,
from its cursor on; one that hangs up or falls too far behind is let go."""

from __future__ import annotations

import http.client
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runwatch.dev import envelope
from runwatch.service import stream
from runwatch.service.core import Service
from runwatch.service.http import ServiceServer

FOLLOWERS = 12  # more than the server has request threads (2), and than serve's default (8)


def event(kind: str, run: str = "r1", **fields: Any) -> str:
    src = {"component": "trainer", "host": "node-1", "pid": 7}
    return json.dumps(envelope.event(kind, time.time(), run, src, **fields))


def post(port: int, *lines: str) -> Any:
    body = "\n".join(lines).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/events", data=body)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
        return json.loads(resp.read())


class Follower:
    def __init__(self, port: int, query: str = "") -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.request("GET", stream.PATH + query)
        self.resp = self.conn.getresponse()

    def next(self) -> tuple[str, dict[str, Any]]:
        """The next transition (keep-alive comments skipped)."""
        ident, data = "", ""
        while True:
            line = self.resp.fp.readline().decode()
            assert line, "the stream ended"
            if line.startswith("id: "):
                ident = line[4:].strip()
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "\n" and data:
                return ident, json.loads(data)

    def close(self) -> None:
        self.resp.close()
        self.conn.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServiceServer]:
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve")
    service.recover()
    front = ServiceServer(("127.0.0.1", 0), service, None, threads=2)
    front.start()
    try:
        yield front
    finally:
        front.stop(timeout=30)
        service.close()


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_many_followers_hold_no_request_thread_and_each_gets_every_transition(
    server: ServiceServer,
) -> None:
    port = server.server_address[1]
    followers = [Follower(port) for _ in range(FOLLOWERS)]
    try:
        assert all(f.resp.status == 200 for f in followers)
        assert followers[0].resp.getheader("Content-Type") == stream.CONTENT_TYPE
        wait_for(lambda: len(server.followers) == FOLLOWERS, "every follower registered")
        # both request threads are free: other requests are answered while they follow
        assert get(port, "/healthz") == {"ok": True}
        post(port, event("run.started"), event("component.failed", error="boom", how="exception"))
        post(port, event("run.finished", status="ok"))
        for f in followers:
            (first, fired), (second, resolved) = f.next(), f.next()
            assert (fired["rule"], fired["state"]) == ("component_failed", "firing")
            assert (resolved["rule"], resolved["state"]) == ("component_failed", "resolved")
            assert first != second
        # a follower that comes later, from the first transition's cursor: only the second
        late = Follower(port, f"?after={first}")
        assert late.next()[1]["state"] == "resolved"
        late.close()
        # without a cursor (or with one of another serve), all that is held, oldest first
        again = Follower(port, "?after=0000-1")
        assert [again.next()[1]["state"], again.next()[1]["state"]] == ["firing", "resolved"]
        again.close()
    finally:
        for f in followers:
            f.close()
    wait_for(lambda: len(server.followers) == 0, "followers that hung up are let go")


def test_a_follower_of_one_run_gets_only_its_transitions(server: ServiceServer) -> None:
    port = server.server_address[1]
    mine = Follower(port, "?run=r2")
    try:
        wait_for(lambda: len(server.followers) == 1, "the follower registered")
        post(port, event("component.failed", run="r1", error="boom", how="exception"))
        post(port, event("component.failed", run="r2", error="bang", how="exception"))
        assert mine.next()[1]["run"] == "r2"
    finally:
        mine.close()


def test_a_follower_asking_for_a_bad_run_id_is_refused(server: ServiceServer) -> None:
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", stream.PATH + "?run=" + "x" * 300)
        resp = conn.getresponse()
        assert resp.status == 400
        assert "bad run id" in json.loads(resp.read())["error"]
    finally:
        conn.close()
    assert len(server.followers) == 0


def test_a_follower_with_the_wrong_token_is_refused(tmp_path: Path) -> None:
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve")
    service.recover()
    front = ServiceServer(("127.0.0.1", 0), service, "s3cret", threads=1)
    front.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", front.server_address[1], timeout=30)
        conn.request("GET", stream.PATH, headers={"Authorization": "Bearer wrong"})
        resp = conn.getresponse()
        assert resp.status == 401
        resp.read()
        conn.request("GET", stream.PATH, headers={"Authorization": "Bearer s3cret"})
        resp = conn.getresponse()
        assert resp.status == 200
        wait_for(lambda: len(front.followers) == 1, "the follower with the token follows")
        resp.close()
        conn.close()
    finally:
        front.stop(timeout=30)
        service.close()


class Slow:
    """A follower whose socket has not taken what it was sent."""

    connected = True
    addr = ("127.0.0.1", 1)

    def __init__(self, behind: int) -> None:
        self.total_outbufs_len = behind
        self.queued: list[bytes] = []
        self.closed = False

    def queue(self, data: bytes) -> None:
        self.queued.append(data)

    def handle_close(self) -> None:
        self.closed = True


def test_a_follower_too_far_behind_is_let_go_and_the_others_are_sent_to(tmp_path: Path) -> None:
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve")
    followers = stream.Followers(service, lambda thunk: thunk())
    try:
        slow, fine = Slow(stream.MAX_BACKLOG + 1), Slow(0)
        followers._send([slow, fine], b"x")  # type: ignore[list-item]
        assert slow.closed
        assert not slow.queued
        assert fine.queued == [b"x"]
        assert not fine.closed
    finally:
        followers.close()
        service.close()
