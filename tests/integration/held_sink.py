"""`runwatch sink` whose K-th flush stops inside its transaction, rows written and not
committed: it creates a marker file and waits there, so that a test can kill -9 the sink in
the middle of a batch. The fault goes in through the writer's `before_commit` hook; the
command line is the sink's own.

    python tests/integration/held_sink.py MARKER K SINK-ARGS...
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from runwatch import logs
from runwatch.cli import build_parser
from runwatch.commands.store import run_sink


def main(argv: list[str]) -> int:
    marker, nth, *sink_args = argv
    held = threading.Event()  # never set: the process waits for its kill

    def before_commit(flush: int) -> None:
        if flush == int(nth):
            Path(marker).touch()
            held.wait()

    args = build_parser("sink").parse_args(["sink", *sink_args])
    logs.setup("sink")
    return run_sink(args, before_commit=before_commit)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
