"""`runwatch watch -- CMD`: output passed through byte for byte, exit status kept, signals
forwarded, events as the rules need them."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import read_events, terminate, wait_for
from hung_consoles import (
    BARRIER_FILLS,
    BARRIER_TIMEOUT,
    BARRIER_WAIT,
    LIGHTNING_TWICE,
    OFFLINE_GOES_ON,
    V0_STALL,
    VLLM_QUEUE,
)

from runwatch.emitters import Emitter
from runwatch.emitters.watch import ProgressGate, Watcher, watch

WATCH = [sys.executable, "-m", "runwatch.cli", "watch"]

#: A training script: tqdm on stderr, verl step lines on stdout, exit 3. It keeps a copy of
#: every byte it writes, to compare with what `runwatch watch` passed on.
TRAIN = textwrap.dedent(
    """
    import sys, time
    from tqdm import tqdm

    class Tee:
        def __init__(self, stream, copy):
            self.stream, self.copy = stream, open(copy, "w")
        def write(self, s):
            self.copy.write(s); self.copy.flush()
            return self.stream.write(s)
        def flush(self):
            self.stream.flush()

    sys.stdout = Tee(sys.stdout, sys.argv[1] + ".out")
    sys.stderr = Tee(sys.stderr, sys.argv[1] + ".err")
    for step in range(1, 7):
        for _ in tqdm(range(20), desc="Training Progress", file=sys.stderr, mininterval=0):
            time.sleep(0.001)
        print(f"step:{step} - critic/score/mean:0.0 - actor/entropy:0.5 - "
              f"timing_s/gen:0.5 - timing_s/step:1.0", flush=True)
        print("other output ünïcode", flush=True)
    sys.stdout.write("no newline at the end")
    sys.exit(3)
    """
)


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}


def test_watch_passes_output_through_and_emits_the_events(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    spool = tmp_path / "spool"
    copy = tmp_path / "copy"
    proc = subprocess.run(
        [*WATCH, "--run", "r-watch", "--spool", str(spool), "--", sys.executable, str(script),
         str(copy)],
        capture_output=True, timeout=60, env=env(),
    )  # fmt: skip
    assert proc.returncode == 3
    assert proc.stdout == (tmp_path / "copy.out").read_bytes()
    assert proc.stderr == (tmp_path / "copy.err").read_bytes()
    assert b"\r" in proc.stderr
    events = read_events(spool)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "heartbeat"
    assert kinds[1] == "run.started"
    assert kinds[-2:] == ["run.finished", "heartbeat"]
    assert events[-2]["status"] == "failed"
    assert events[-1]["final"] is True
    done = [e for e in events if e["kind"] == "step.done"]
    assert [e["step"] for e in done] == [1, 2, 3, 4, 5, 6]
    assert done[0]["timing"] == {"gen": 0.5}
    assert done[0]["duration_s"] == 1.0
    progress = [e for e in events if e["kind"] == "progress"]
    assert {e["name"] for e in progress} == {"Training Progress"}
    assert progress[-1]["n"] == 20
    assert progress[-1]["total"] == 20

    from helpers import make_engine

    from runwatch.stream.decode import decode

    engine = make_engine()
    alerts = [a for e in events for a in engine.apply(decode(json.dumps(e).encode()))]
    assert ("zero_reward", "firing") in {(a.rule, a.state) for a in alerts}


def watched(spool: Path, command: list[str], run: str = "r") -> int:
    """`runwatch watch --run RUN --spool SPOOL -- COMMAND`'s work, in this process (the
    command's own start-up is tested once, above): the command's exit status as watch's."""
    with Emitter(run=run, component="trainer", path=spool) as em:
        return watch(command, em)


def test_exit_status_ok_and_signal_death(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    assert watched(spool, ["true"]) == 0
    assert watched(spool, ["sh", "-c", "kill -9 $$"]) == 128 + 9
    finished = [e["status"] for e in read_events(spool) if e["kind"] == "run.finished"]
    assert sorted(finished) == ["killed", "ok"]


def test_signals_are_forwarded_and_heartbeats_flow_while_it_lives(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    child = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen(
        [*WATCH, "--run", "r", "--spool", str(spool), "--heartbeat-interval", "0.1",
         "--no-run-events", "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE, env=env(),
    )  # fmt: skip

    def beats() -> int:  # (a line being written is not read as an event yet)
        return sum('"heartbeat"' in ln for p in spool.glob("*.jsonl")
                   for ln in p.read_text().splitlines())  # fmt: skip

    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        wait_for(lambda: beats() >= 4, "heartbeats while the command lives")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 7
        assert proc.stdout.read() == b"got TERM\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert "run.finished" not in [e["kind"] for e in read_events(spool)]


def test_no_command_and_no_destination_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from runwatch.cli import main

    for name in [k for k in os.environ if k.startswith("RUNWATCH_")]:
        monkeypatch.delenv(name)
    assert main(["watch", "--run", "r"]) == 2
    assert "no command" in capsys.readouterr().err
    assert main(["watch", "--", "true"]) == 2
    nowhere = capsys.readouterr().err
    assert "pass --kafka HOST:PORT, --url URL or --spool DIR" in nowhere
    assert "run id watch-" not in nowhere
    assert "runwatch watch: run id true-" in nowhere  # made up, and said
    assert main(["watch", "--spool", str(tmp_path), "--", str(tmp_path / "nope")]) == 127
    assert "cannot run" in capsys.readouterr().err


def test_made_up_run_ids_name_the_script() -> None:
    from runwatch.emitters.watch import run_id_for as _run_id

    assert _run_id(["python3", "-u", "train.py", "--lr", "1"]).startswith("train-")
    assert _run_id(["torchrun", "--nproc-per-node=8", "grpo.py"]).startswith("grpo-")
    assert _run_id(["uv", "run", "ppo.py"]).startswith("ppo-")
    assert _run_id(["/usr/bin/vllm", "serve", "m"]).startswith("vllm-")


def test_progress_gate_bounds_the_rate_and_sends_what_it_held() -> None:
    now = [0.0]
    gate = ProgressGate(1.0, clock=lambda: now[0])
    assert gate.offer({"name": "a", "n": 0, "total": 10}) is not None
    assert gate.offer({"name": "a", "n": 1, "total": 10}) is None
    assert gate.offer({"name": "a", "n": 2, "total": 10}) is None
    assert gate.due() == []
    now[0] = 1.5
    assert gate.due() == [{"name": "a", "n": 2, "total": 10}]
    assert gate.offer({"name": "a", "n": 2, "total": 10}) is None  # nothing new
    assert gate.offer({"name": "a", "n": 10, "total": 10}) is not None  # complete: at once
    assert gate.offer({"name": "a", "n": 0, "total": 10}) is not None  # started over
    assert gate.offer({"name": "a", "n": 3, "total": 10}) is None
    assert gate.drain() == [{"name": "a", "n": 3, "total": 10}]


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "consoles"


def test_a_ray_driver_console_is_demultiplexed_by_actor(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """Each forwarded line's events are its worker's (component and pid from Ray's prefix,
    the node's ip as host); each vLLM engine in an actor is its own server; a line Ray
    deduplicated is one observation, not N; Ray's own lines are nobody's events."""
    fixture = FIXTURES / "ray_verl_driver.log"
    spool = tmp_path / "spool"
    assert watched(spool, ["cat", str(fixture)], run="ray-run") == 0
    out = capfdbinary.readouterr().out
    assert out == fixture.read_bytes()  # passed through untouched, colours and all
    events = [e for e in read_events(spool) if e["kind"] not in ("heartbeat",)]
    stats = [(e["server"], e["src"]["component"], e["src"].get("host"), e["src"]["pid"],
              e["running"]) for e in events if e["kind"] == "inference.stats"]  # fmt: skip
    host = events[0]["src"]["host"]  # the watching process's: actors on this node
    assert stats == [
        ("vllm/3251000", "inference", host, 3251000, 48),
        ("vllm@10.0.0.2/3262000", "inference", "10.0.0.2", 3262000, 40),
        ("vllm/3251000", "inference", host, 3251000, 0),
        ("vllm@10.0.0.2/3262000", "inference", "10.0.0.2", 3262000, 0),  # [repeated 3x]: once
    ]
    # the bar's two refreshes came as one forwarded line, "\\r"-joined: both the worker's
    bars = [e for e in events if e["kind"] == "progress"]
    assert (bars[-1]["name"], bars[-1]["n"], bars[-1]["total"]) == (
        "Generating trajectories", 256, 512)  # fmt: skip
    assert {(e["src"]["component"], e["src"]["pid"]) for e in bars} == {("rollout", 3252000)}
    steps = [e for e in events if e["kind"] in ("step.metrics", "reward", "step.done")]
    assert {(e["src"]["component"], e["src"]["pid"]) for e in steps} == {("trainer", 3249149)}
    assert [e["mean"] for e in events if e["kind"] == "reward"] == [0.42]
    run_events = [e for e in events if e["kind"].startswith("run.")]
    assert all(e["src"]["component"] == "trainer" and "pid" in e["src"] for e in run_events)


def test_a_prime_rl_run_is_watched_through_the_log_files_its_launcher_writes(
    tmp_path: Path,
) -> None:
    """PRIME-RL's `rl` launcher sends the orchestrator's and the trainer's output to
    logs/orchestrator.log and logs/trainer.log, so the README's way in is `runwatch watch
    -- tail -n +1 -F` of both: the orchestrator's rewards and the trainer's step ends
    arrive as one run's events, and SIGTERM ends it."""
    logs = tmp_path / "outputs" / "logs"
    logs.mkdir(parents=True)
    for name in ("orchestrator.log", "trainer.log"):
        (logs / name).write_bytes((FIXTURES / "prime_rl" / name).read_bytes())
    spool = tmp_path / "spool"
    watch = subprocess.Popen(
        [*WATCH, "--run", "rl-7", "--spool", str(spool), "--", "tail", "-n", "+1", "-F",
         str(logs / "orchestrator.log"), str(logs / "trainer.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env(),
    )  # fmt: skip
    try:

        def steps_read() -> list[dict]:
            got = [e for e in read_events(spool) if e["kind"] in ("reward", "step.done")]
            return got if len(got) == 12 else []

        events = wait_for(steps_read, "8 rewards and 4 step ends in the spool", timeout=60)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 128 + signal.SIGTERM, err
    rewards = [e["mean"] for e in events if e["kind"] == "reward"]
    assert rewards == [0.3125, 0.3516, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25]
    assert [e["step"] for e in events if e["kind"] == "step.done"] == [1, 2, 3, 4]
    assert {e["run"] for e in events} == {"rl-7"}


#: A bar whose refreshes come far apart: it writes refresh k, then waits for the test to say
#: go (the test says it once runwatch has reported refresh k).
SLOW_BAR = textwrap.dedent(
    """
    import os, sys, time
    from tqdm import tqdm

    go = sys.argv[1]
    bar = tqdm(total=4, desc="Training Progress", file=sys.stderr, mininterval=0)
    for k in range(1, 4):
        bar.update(1)
        while not os.path.exists(f"{go}.{k}"):
            time.sleep(0.01)
    bar.close()
    """
)


@pytest.mark.slow
def test_a_refresh_is_reported_when_it_is_written_and_once(tmp_path: Path) -> None:
    """tqdm writes `\\r` + the bar and no line end until its next refresh: runwatch reads the
    unfinished refresh once the output pauses, not one refresh late -- refresh k is reported
    before refresh k + 1 is written (here: before the bar is even allowed to go on)."""
    script, spool, go = tmp_path / "bar.py", tmp_path / "spool", tmp_path / "go"
    script.write_text(SLOW_BAR)
    proc = subprocess.Popen(
        [*WATCH, "--run", "r-bar", "--spool", str(spool), "--", sys.executable, str(script),
         str(go)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env(),
    )  # fmt: skip

    def bar_at(k: int) -> bool:
        if not spool.exists():
            return False
        events = [json.loads(line) for p in sorted(spool.glob("*.jsonl"))
                  for line in p.read_text().splitlines() if line.strip()]  # fmt: skip
        return any(e["kind"] == "progress" and e["n"] == k for e in events)

    try:
        for k in range(1, 4):
            wait_for(lambda k=k: bar_at(k), f"refresh {k} reported while the bar waits")
            (tmp_path / f"go.{k}").touch()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    progress = [e["n"] for e in read_events(spool) if e["kind"] == "progress"]
    assert progress == [0, 1, 2, 3]  # each refresh once: 0 as the bar opens, then 1-3


def test_a_python_child_writes_through_at_once(tmp_path: Path) -> None:
    """A Python child's stdout to a pipe is block-buffered: watch makes it unbuffered, so a
    step line is read while the child still runs."""
    script, spool, go = tmp_path / "quiet.py", tmp_path / "spool", tmp_path / "go"
    script.write_text(textwrap.dedent(
        """
        import os, sys, time
        print("step:1 - critic/score/mean:0.5 - timing_s/step:2.0")  # no flush
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.01)
        """))  # fmt: skip
    plain = {k: v for k, v in env().items() if k != "PYTHONUNBUFFERED"}  # as a user's shell
    proc = subprocess.Popen(
        [*WATCH, "--run", "r-unbuffered", "--spool", str(spool), "--", sys.executable,
         str(script), str(go)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=plain,
    )  # fmt: skip
    try:

        def stepped() -> bool:
            lines = [ln for p in spool.glob("*.jsonl") for ln in p.read_text().splitlines()]
            return any('"step.done"' in ln for ln in lines)

        wait_for(stepped, "the step line read while the child runs")
        go.touch()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _failures(tmp_path: Path, code: str, name: str) -> tuple[int, list[dict]]:
    spool = tmp_path / name
    rc = watched(spool, [sys.executable, "-c", code], run=name)
    return rc, [e for e in read_events(spool) if e["kind"] == "component.failed"]


def test_an_uncaught_exception_and_the_exit_status_are_a_component_failure(
    tmp_path: Path,
) -> None:
    rc, failed = _failures(tmp_path, "import sys\nd = {}\nd['teacher_logprobs']", "crash")
    assert rc == 1
    assert [(f["how"], f["error"]) for f in failed] == [
        ("exception", "KeyError: 'teacher_logprobs'"),
        ("exit", "exited with status 1"),
    ]


def test_a_clean_exit_a_handled_traceback_and_a_stop_are_not_failures(tmp_path: Path) -> None:
    handled = textwrap.dedent(
        """
        import logging, sys
        logging.basicConfig()
        try:
            raise TimeoutError("sandbox did not answer")
        except TimeoutError:
            logging.exception("retrying")
        # (on the traceback's stream: two pipes' bytes read in one round have no order)
        print("step:1 - critic/score/mean:0.5 - timing_s/step:2.0", file=sys.stderr, flush=True)
        """
    )
    assert _failures(tmp_path, handled, "handled") == (0, [])
    assert _failures(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
                     "stopped") == (128 + signal.SIGTERM, [])  # fmt: skip
    rc, failed = _failures(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                           "oom-killed")  # fmt: skip
    assert (rc, [f["error"] for f in failed]) == (128 + signal.SIGKILL, ["killed by SIGKILL"])


def test_a_reader_that_fails_costs_one_line_and_never_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader's bug on one line (here: any line holding BOOM) skips that line, noted; the
    lines after it are still read, and every byte is still copied through. Should reading
    itself fail (the scanner), the bytes are copied all the same."""
    from runwatch.emitters.console import LineParser, LineScanner
    from runwatch.emitters.watch import Watcher

    real = LineParser._readers_of

    def flaky(self: LineParser, line: str) -> Any:
        if "BOOM" in line:
            raise RuntimeError("a reader's bug")
        return real(self, line)

    monkeypatch.setattr(LineParser, "_readers_of", flaky)
    text = (b"step:1 - critic/score/mean:0.5 - actor/loss:nan BOOM\n"
            b"step:2 - critic/score/mean:0.5 - actor/loss:nan\n")  # fmt: skip
    parser = LineParser()
    em = Emitter(run="r", component="trainer", path=tmp_path / "spool", heartbeat=False)
    watcher = Watcher(em, parser, progress_every=0.0)
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(src_w, text)
    os.close(src_w)
    watcher.pump({src_r: out_w})
    os.close(out_w)
    assert os.read(out_r, 1 << 16) == text
    os.close(src_r)
    os.close(out_r)
    em.close()
    metrics = [e for e in read_events(tmp_path / "spool") if e["kind"] == "step.metrics"]
    assert [e["step"] for e in metrics] == [2]  # the line after the bad one, still read
    assert any("a reader's bug" in note for note in parser.notes())

    def broken(self: LineScanner, data: bytes) -> Any:
        raise RuntimeError("the scanner's bug")

    monkeypatch.setattr(LineScanner, "feed", broken)
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(src_w, text)
    os.close(src_w)
    em = Emitter(run="r2", component="trainer", path=tmp_path / "spool2", heartbeat=False)
    again = Watcher(em, LineParser(), progress_every=0.0)
    again.pump({src_r: out_w})
    os.close(out_w)
    assert os.read(out_r, 1 << 16) == text
    assert again.read_failed == 1
    for fd in (src_r, out_r):
        os.close(fd)
    em.close()


#: A rank that dies and a job that hangs: the traceback is printed, the process stays (the
#: other ranks wait in NCCL); it writes its pid first, so the test can end it by pid.
HUNG = textwrap.dedent(
    """
    import os, sys, time, traceback
    open(sys.argv[1], "w").write(str(os.getpid()))
    print("step:1 - critic/score/mean:0.5 - timing_s/step:2.0", flush=True)
    try:
        {}["teacher_logprobs"]
    except KeyError:
        traceback.print_exc()  # as Python prints an uncaught one
    sys.stderr.flush()
    time.sleep(600)
    """
)


def test_a_traceback_then_silence_while_the_command_runs_is_a_failure(tmp_path: Path) -> None:
    """`watch` on a hung job: its last word, a traceback, is its process's death once the
    output has been quiet for RUNWATCH_LAST_WORD (here 1 s), while the command still runs."""
    script, spool, pid_file = tmp_path / "hung.py", tmp_path / "spool", tmp_path / "pid"
    script.write_text(HUNG)
    proc = subprocess.Popen(
        [*WATCH, "--run", "r-hung", "--spool", str(spool), "--", sys.executable, str(script),
         str(pid_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**env(), "RUNWATCH_LAST_WORD": "1s"},
    )  # fmt: skip

    def failed() -> list[dict[str, Any]]:
        if not spool.exists():
            return []
        events = [json.loads(line) for p in sorted(spool.glob("*.jsonl"))
                  for line in p.read_text().splitlines() if line.strip()]  # fmt: skip
        return [e for e in events if e["kind"] == "component.failed"]

    try:
        (event,) = wait_for(failed, "the traceback decided while the command hangs")
        assert (event["how"], event["error"]) == ("exception", "KeyError: 'teacher_logprobs'")
        assert proc.poll() is None  # decided by the quiet, not by the command's end
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            # watch exits as its command did once it has seen it die: wait for that, or a
            # SIGTERM sent before it noticed would be what it exits with (a flake under load)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)
        rc = terminate(proc)  # (or it is stopped by pid)
    # the command killed: no second failure for the same traceback, the exit's own only
    assert rc == 128 + signal.SIGKILL
    assert [e["how"] for e in failed()] == ["exception", "exit"]


# --- a saved console that ends in its hang (issue 41, item 5) ------------------------------
@pytest.mark.parametrize(
    ("console", "rule"),
    [(BARRIER_WAIT * 2, "ranks_stalled"), (LIGHTNING_TWICE, "ranks_stalled"),
     (VLLM_QUEUE, "inference_stalled"), (V0_STALL, "inference_stalled")],
    ids=["barrier", "lightning-rank-twice", "vllm-queue", "engine-stats-stalled"],
)  # fmt: skip
def test_a_saved_console_that_ends_in_its_hang_leaves_the_run_open(
    tmp_path: Path, console: str, rule: str
) -> None:
    """`watch -- cat` of a console that ends inside a wait its framework declared, nothing
    ending it, no failure: cat's clean exit is no end of the job it shows, so no
    run.finished -- the rules decide as time passes (here an engine, as serve's clock would),
    and the watcher's clean exit (its final heartbeat) is no heartbeat_lost, nor takes the
    engine it read out of the picture."""
    from helpers import feed, make_engine

    saved = tmp_path / "saved.log"
    saved.write_text(console)
    spool = tmp_path / "spool"
    assert watched(spool, ["cat", str(saved)]) == 0
    events = read_events(spool)
    assert "run.finished" not in [e["kind"] for e in events]
    assert (events[-1]["kind"], events[-1]["final"]) == ("heartbeat", True)
    engine = make_engine()
    fired = {a.rule for a in feed(engine, events) if a.state == "firing"}
    assert rule not in fired  # (not yet: the wait is younger than the rule's limit)
    fired |= {a.rule for a in engine.advance(events[-1]["ts"] + 3600) if a.state == "firing"}
    assert rule in fired
    assert "heartbeat_lost" not in fired


@pytest.mark.parametrize(
    "console",
    [BARRIER_FILLS, BARRIER_WAIT * 2 + BARRIER_TIMEOUT, BARRIER_WAIT * 2 + "step:1 - loss:0.5\n",
     OFFLINE_GOES_ON],
    ids=["barrier-fills", "barrier-times-out", "steps-after", "offline-engine-goes-on"],
)  # fmt: skip
def test_a_saved_console_whose_wait_ended_or_failed_finishes_the_run(
    tmp_path: Path, console: str
) -> None:
    saved = tmp_path / "saved.log"
    saved.write_text(console)
    spool = tmp_path / "spool"
    assert watched(spool, ["cat", str(saved)]) == 0
    finished = [e["status"] for e in read_events(spool) if e["kind"] == "run.finished"]
    assert finished == ["ok"]


@pytest.mark.parametrize(
    "console", [BARRIER_TIMEOUT + V0_STALL, V0_STALL + BARRIER_TIMEOUT],
    ids=["failure-then-engine-stalled", "engine-stalled-then-failure"],
)  # fmt: skip
def test_a_failed_console_s_engine_stall_at_its_end_is_one_alert_in_both_readers(
    tmp_path: Path, console: str
) -> None:
    """A console whose processes failed (torch's barrier timed out) and whose engine's stats
    lines, to its end, show it holding a request with no token for 2.5 minutes: its processes
    died, they did not hang -- the failure's alert, and no engine stall the end decides
    (`hangs.at_end`, as `ended_in_hang`): `runwatch diagnose` and `watch -- cat` into the
    rules agree, and watch sends no stalled snapshot."""
    from helpers import feed, make_engine

    from runwatch.diagnose import diagnose
    from runwatch.emitters.console import LineParser
    from runwatch.emitters.hangs import at_end

    saved = tmp_path / "saved.log"
    saved.write_text(console)
    told = {a.rule for a in diagnose([saved]).alerts if a.state == "firing"}
    spool = tmp_path / "spool"
    assert watched(spool, ["cat", str(saved)]) == 0
    events = read_events(spool)
    engine = make_engine()
    fired = {a.rule for a in feed(engine, events) if a.state == "firing"}
    fired |= {a.rule for a in engine.advance(events[-1]["ts"] + 3600) if a.state == "firing"}
    assert fired == told
    assert "collective_timeout" in told
    assert "inference_stalled" not in told
    assert [e for e in events if e.get("stalled_since") is not None] == []
    parser = LineParser()
    kinds = [kind for line in V0_STALL.splitlines() for kind, _ in parser.parse(line)]
    assert at_end(parser, [*kinds, "collective.timeout"]) == []
    assert [kind for kind, _ in at_end(parser, kinds)] == ["inference.stats"]  # (no failure)


def test_a_hung_console_still_finishes_its_run_when_the_command_fails(tmp_path: Path) -> None:
    """A job killed mid-hang, or one whose command fails: its run finishes as it ends."""
    saved = tmp_path / "saved.log"
    saved.write_text(BARRIER_WAIT * 2)
    spool = tmp_path / "spool"
    assert watched(spool, ["sh", "-c", f'cat "{saved}"; exit 2']) == 2
    assert watched(spool, ["sh", "-c", f'cat "{saved}"; kill -TERM $$']) == 128 + 15
    finished = [e["status"] for e in read_events(spool) if e["kind"] == "run.finished"]
    assert sorted(finished) == ["failed", "killed"]


def test_a_job_that_lived_through_the_wait_it_printed_finishes_on_a_clean_exit(
    tmp_path: Path,
) -> None:
    """The same lines from a job that ran through them (a wait that began after the command
    started, read as it was printed) and then exited 0: the job ended its wait, whatever its
    output says last -- nothing is left open. Read before the command started (a saved
    console), they leave rank 0's barrier open."""

    def read_at(now: float) -> Watcher:
        return _pumped(tmp_path / f"spool-{now:g}", (BARRIER_WAIT * 2).encode(), lambda: now)

    started = 1000.0
    assert read_at(started + 60).left_open(started) is None  # waited 20 s of its 60
    left = read_at(started + 5).left_open(started)  # 20 s before it started: older
    assert left is not None
    assert (left.ranks, left.ranks_since) == ({0: "store_based_barrier"}, started + 5 - 20)


def _pumped(spool: Path, output: bytes, clock: Callable[[], float]) -> Watcher:
    """A watcher that read `output` through a pipe, each line at `clock`'s time."""
    from runwatch.emitters.console import LineParser

    em = Emitter(run="r", component="trainer", path=spool, heartbeat=False)
    watcher = Watcher(em, LineParser(), progress_every=0.0, clock=clock)
    src_r, src_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(src_w, output)
    os.close(src_w)
    watcher.pump({src_r: out_w})
    for fd in (src_r, out_w, out_r):
        os.close(fd)
    em.close()
    return watcher


def test_a_job_that_printed_a_wait_with_no_clock_and_exited_0_finishes(tmp_path: Path) -> None:
    """A wait read by the console's grammar from lines that print no clock shows no duration
    (five in a row make it one): unlike a framework's wait declared with none (a stack dump),
    nothing says it is older than the command -- a job that printed it as it waited (each
    line seconds after the one before) and exited 0 lived through it. The same lines read
    all at once, faster than any wait repeats its line, were written before the command
    started -- `watch -- cat` of a saved console: the run is left open for ranks_stalled, as
    `runwatch diagnose` reads the file's end."""
    lines = b"still waiting for slurm job 4242 to finish...\n" * 6
    live = _pumped(tmp_path / "live", lines, itertools.count(1005.0, 10.0).__next__)
    assert "rank.status" in live.kinds  # (read as a wait)
    assert live.left_open(1000.0) is None
    replayed = _pumped(tmp_path / "cat", lines, lambda: 1005.0)
    left = replayed.left_open(1000.0)
    assert left is not None
    assert (left.ranks, left.ranks_since) == ({0: "still waiting for slurm job to finish.."},
                                              1005.0)  # fmt: skip


def test_a_retry_whose_count_says_more_attempts_than_were_read_is_older(tmp_path: Path) -> None:
    """slime's rollout retrying its router (corpus28's excerpt, slime#683): its attempt 60
    read first says 59 lines of the wait were written where this watcher did not read them --
    before the command started (`watch -- cat` of a saved console): left open for
    ranks_stalled, as `runwatch diagnose` reads the file's end. A job that printed its
    attempts one by one as it retried, then exited 0, lived through its wait."""
    line = (
        "(RolloutManager pid=519445) For more information check: https://developer.mozilla."
        "org/en-US/docs/Web/HTTP/Status/503, retrying... (attempt {k}/60, url=http://10.78.210."
        "151:4674/generate, response=No available workers (all circuits open or unhealthy))\n"
    )
    replayed = _pumped(tmp_path / "cat", line.format(k=60).encode(), lambda: 1005.0)
    left = replayed.left_open(1000.0)
    assert left is not None
    assert left.ranks_since == 1005.0
    every = "".join(line.format(k=k) for k in range(1, 61)).encode()
    live = _pumped(tmp_path / "live", every, itertools.count(1005.0, 2.0).__next__)
    assert "rank.status" in live.kinds  # (read as a wait)
    assert live.left_open(1000.0) is None


def test_a_catalogued_wait_its_lines_do_not_date_is_left_open(tmp_path: Path) -> None:
    """kubectl's event row of a pod the scheduler could not place, 351 times over 23 hours
    (corpus26's Geti console; the catalogue's `dates = false`: the span says the pod waited,
    not since when it still does): a framework's wait declared with no duration, as
    `runwatch diagnose` reads it at a console's end -- `watch -- cat` of it leaves the run open
    for ranks_stalled to decide, though it was read after the command started."""
    row = ("Warning  FailedScheduling  6m7s (x351 over 23h)  default-scheduler  0/1 nodes are "
           "available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No "
           "preemption victims found for incoming pod.\n")  # fmt: skip
    watcher = _pumped(tmp_path / "spool", row.encode(), lambda: 1005.0)
    left = watcher.left_open(1000.0)
    assert left is not None
    assert (left.ranks, left.ranks_since) == ({0: "kubernetes_pod_pending"}, 1005.0)
