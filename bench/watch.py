"""What `runwatch watch` costs a job that writes a lot of log text.

A child writes `--mb` MB of log lines (logging-style lines, with a tqdm bar update, a verl
step line and a vLLM stats line sprinkled in) as fast as it can. Timed, in the same run:
straight to /dev/null, through a pipe (`| cat > /dev/null`, what any log collector costs),
and through `runwatch watch -- CHILD > /dev/null` with events going to a spool directory.
Figures only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from benchinfo import machine, write_section

from runwatch.emitters.console import _MARKERS, LITERALS

CHILD = textwrap.dedent(
    """
    import sys, time
    mb = int(sys.argv[1])
    lines = []
    for i in range(10000):
        if i % 1000 == 0:
            lines.append(f"step:{i} - critic/score/mean:0.5 - actor/entropy:np.float64(0.61)"
                         f" - timing_s/gen:12.5 - timing_s/step:20.0\\n")
        elif i % 997 == 0:
            lines.append("INFO 03-14 16:41:00 [loggers.py:118] Engine 000: Avg prompt "
                         "throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
                         "Running: 3 reqs, Waiting: 4 reqs, GPU KV cache usage: 5.0%, "
                         "Prefix cache hit rate: 0.0%\\n")
        elif i % 101 == 0:
            lines.append(f"\\rTraining Progress:  {i//100}%|#         | {i//100}/100"
                         f" [00:{i % 60:02d}<01:00, 1.00it/s]")
        else:
            lines.append(f"2026-03-14 16:41:{i % 60:02d},123 INFO worker.py:{i} rollout {i}:"
                         f" generated 512 tokens for prompt {i * 7} in 0.{i % 10}s\\n")
    block = "".join(lines).encode()
    out = sys.stdout.buffer
    written, target = 0, mb << 20
    while written < target:
        out.write(block)
        written += len(block)
    out.flush()
    """
)


def timed(cmd: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, shell=True, check=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    with tempfile.TemporaryDirectory() as tmp:
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        spool = Path(tmp) / "spool"
        py = sys.executable
        base = f"{py} {child} {args.mb}"
        watch = f"{py} -m runwatch.cli watch --run bench --spool {spool} -- {base}"
        cases = {
            "direct (> /dev/null)": f"{base} > /dev/null",
            "pipe (| cat > /dev/null)": f"{base} | cat > /dev/null",
            "runwatch watch": f"{watch} > /dev/null",
            "runwatch watch -- true": f"{watch.split(' -- ')[0]} -- true",
        }
        best: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, cmd in cases.items():
                took = timed(cmd, env)
                best[name] = min(best.get(name, took), took)
        events = sum(len(f.read_bytes().splitlines()) for f in spool.glob("*.jsonl")) // args.repeat
    print(f"bench/watch.py: child writes {args.mb} MB of log text; best of {args.repeat}")
    for name, took in best.items():
        print(f"  {name:26s} {took:6.2f} s  {args.mb / took:8.1f} MB/s")
    extra = best["runwatch watch"] - best["pipe (| cat > /dev/null)"]
    start = best["runwatch watch -- true"]
    net = extra - start
    summary = (
        f"runwatch watch adds {extra:.2f} s over a plain pipe: {start:.2f} s to start and "
        f"stop (the CLI's imports), {net / args.mb * 1000:.1f} ms per MB copied and "
        f"scanned ({args.mb / max(net, 1e-9):.0f} MB/s); {events} events per run"
    )
    print(f"  {summary}")
    one, per = marker_passes()
    markers = (
        f"finding the scanner's {len(LITERALS)} markers in the same log text: one "
        f"Aho-Corasick pass {one:.2f} ms per MB, one bytes.find pass per marker {per:.2f} ms "
        f"per MB ({per / one:.1f}x)"
    )
    print(f"  {markers}")
    write_section("watch", [
        "## What `runwatch watch` costs a job's output (`bench/watch.py`)", "",
        machine(), "",
        f"{args.mb} MB of log text written as fast as the child can, best of {args.repeat}.", "",
        "| path | seconds | MB/s |", "|---|---:|---:|",
        *[f"| {name.replace('|', chr(92) + '|')} | {took:.2f} | {args.mb / took:.0f} |"
          for name, took in best.items()],
        "", summary + ".", "", markers[0].upper() + markers[1:] + ".",
    ])  # fmt: skip


def marker_passes(mb: int = 20) -> tuple[float, float]:
    """ms per MB to find every marker's lines: the one pass `LineScanner` makes, against one
    `bytes.find` pass per marker (what it did with 7 markers), on the bench's log text."""
    data = subprocess.run([sys.executable, "-c", CHILD, str(mb)], capture_output=True,
                          check=True).stdout  # fmt: skip
    chunks = [data[i : i + (1 << 16)] for i in range(0, len(data), 1 << 16)]
    start = time.perf_counter()
    for chunk in chunks:
        _MARKERS.find_matches_as_indexes(chunk)
    one = time.perf_counter() - start
    start = time.perf_counter()
    for chunk in chunks:
        for literal in LITERALS:
            pos = chunk.find(literal)
            while pos >= 0:
                pos = chunk.find(literal, chunk.find(b"\n", pos) + 1 or len(chunk))
    per = time.perf_counter() - start
    size = len(data) / (1 << 20)
    return one / size * 1000, per / size * 1000


if __name__ == "__main__":
    main()
