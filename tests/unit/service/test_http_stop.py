"""`runwatch serve`'s HTTP front stops on request, whatever state its I/O loop is in: once,
in a fresh clone's full run, the loop's trigger (the pipe that wakes it) was already closed
when SIGTERM came, `stop()` died writing to it, and serve exited 1. Once more, later: the closed
pipe's descriptor number had been given to another file, so the write "succeeded" into that
file, the wake-up never came and the loop outlived `stop()`."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from runwatch.service.core import Service
from runwatch.service.http import ServiceServer


def serving(tmp_path: Path) -> tuple[Service, ServiceServer]:
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve")
    service.recover()
    server = ServiceServer(("127.0.0.1", 0), service, None)
    server.start()
    port = server.server_address[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as resp:
        assert resp.status == 200
    return service, server


def cleanup(service: Service, server: ServiceServer) -> None:
    """Whatever happened, end the loop (so a failing test does not hang on its thread)."""
    for channel in list(server.server._map.values()):
        channel.close()
    if server._thread is not None:
        server._thread.join(30)
    server.server.task_dispatcher.shutdown(timeout=30)
    service.close()


def test_stop_ends_the_loop(tmp_path: Path) -> None:
    service, server = serving(tmp_path)
    try:
        server.stop(timeout=30)
        assert server._thread is not None
        assert not server._thread.is_alive()
    finally:
        cleanup(service, server)


def test_stop_ends_the_loop_when_its_trigger_is_already_closed(tmp_path: Path) -> None:
    service, server = serving(tmp_path)
    try:
        server.server.trigger.close()  # the pipe that would wake the loop is gone
        server.stop(timeout=30)  # no OSError: it closes the connections itself
        assert server._thread is not None
        assert not server._thread.is_alive()
    finally:
        cleanup(service, server)


def test_a_closed_trigger_is_never_written_when_its_number_is_reused(tmp_path: Path) -> None:
    service, server = serving(tmp_path)
    try:
        written = server.server.trigger.trigger
        # made while the trigger holds its numbers, so that neither end is one of them (made
        # after its close, a thread that took the lowest free number between the two left the
        # pipe's reading end on the trigger's writing number: dup2 closed it)
        reader, writer = os.pipe()
        server.server.trigger.close()
        # the closed pipe's number given to another file: this pipe's writing end, put there
        # (dup2, not the lowest free number: another thread of the process may take that)
        os.dup2(writer, written)
        try:
            server.stop(timeout=30)
            assert server._thread is not None
            assert not server._thread.is_alive()
            os.set_blocking(reader, False)
            try:
                stray = os.read(reader, 64)
            except BlockingIOError:
                stray = b""
            assert stray == b""  # nothing went into the file that holds the number now
        finally:
            for fd in {reader, writer, written}:
                os.close(fd)
    finally:
        cleanup(service, server)
