"""The tests' defaults for events, engine driving shared by the tests, and the suite's leak
detection.

Events are built as plain dicts (what an emitter puts on the wire, by the one event factory,
`runwatch.dev.envelope`) and go through the real decoder before the engine sees them, so
every test exercises the same path as production.

tests/conftest.py imports this module for every test, so it imports only the standard
library and that factory (itself standard library only) at module level: the stream core is
imported where it is used, and a test that checks what `import runwatch.emitters` pulls in
still sees a clean process.
"""

from __future__ import annotations

import glob
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runwatch.dev import envelope

if TYPE_CHECKING:
    from runwatch.emitters.console import LineParser
    from runwatch.emitters.events import Event
    from runwatch.emitters.logparse import Found
    from runwatch.stream.alerts import Alert
    from runwatch.stream.engine import Engine

_ids = itertools.count(1)

#: Emitting processes the tests use most.
TRAINER = {"component": "trainer", "host": "node-0", "pid": 100}
ROLLOUT = {"component": "rollout", "host": "node-1", "pid": 200}
VLLM = {"component": "inference", "host": "node-2", "pid": 300, "instance": "vllm-0"}


def make_event(
    kind: str,
    ts: float,
    run: str = "r1",
    component: str = "trainer",
    host: str | None = "node-0",
    pid: int | None = 100,
    *,
    src: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One contract event as a dict, with a unique id; `src` replaces the whole source."""
    if src is None:
        src = {"component": component}
        if host is not None:
            src["host"] = host
        if pid is not None:
            src["pid"] = pid
    return envelope.event(kind, ts, run, dict(src), f"evt-{next(_ids):08d}", **fields)


def wait_for(what: Any, why: str, timeout: float = 60.0, every: float = 0.05) -> Any:
    """Poll `what()` until it returns something true, and return that; AssertionError
    naming `why` after `timeout` seconds. How the tests wait on a condition: never a fixed
    sleep, and a deadline generous enough for a loaded machine."""
    deadline = time.monotonic() + timeout
    while not (got := what()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {why}")
        time.sleep(every)
    return got


def group_committed(
    bootstrap: str, group: str, topic: str, partitions: int | None, timeout: float = 60.0
) -> dict[int, list[str]]:
    """Wait until consumer group `group` has committed every record of `topic`'s
    `partitions` (all it reads, where None) -- kafka-consumer-groups --describe: current
    offset at the log's end, lag 0 -- and return its rows by partition. The worker commits
    in the transaction that publishes its outputs, the notifier once Slack answered, so
    then a test may say that nothing more arrives, where a sleep would only guess."""
    from runwatch.dev.broker import consumer_groups

    said = ""

    def committed() -> dict[int, list[str]] | None:
        nonlocal said
        said = consumer_groups(bootstrap, "--describe", "--group", group)
        rows = {int(cols[2]): cols for line in said.splitlines()
                if (cols := line.split()) and cols[1:2] == [topic]}  # fmt: skip
        done = all(cols[3] == cols[4] and cols[5] == "0" for cols in rows.values())
        whole = len(rows) == partitions if partitions is not None else bool(rows)
        return rows if whole and done else None

    try:
        return wait_for(committed, f"{group} committing all of {topic}", timeout, every=1.0)
    except AssertionError as e:
        raise AssertionError(f"{e}:\n{said}") from None


def read_all(lines: Iterable[str], parser: LineParser | None = None) -> list[Found]:
    """What a console's readers find in these lines, then what the end of the output
    decides (`runwatch watch` and `runwatch diagnose` share the readers)."""
    from runwatch.emitters.console import LineParser

    parser = parser or LineParser()
    out: list[Found] = []
    for line in lines:
        out += parser.parse(line)
    return out + parser.finish()


def rank_statuses(text: str) -> list[dict[str, Any]]:
    """The ranks' waits a console's readers find in the text's lines (no end decided)."""
    from runwatch.emitters.console import LineParser

    parser = LineParser()
    found = [f for line in text.splitlines() for f in parser.parse(line)]
    return [fields for kind, fields in found if kind == "rank.status"]


def stalled(tmp_path: Path, text: str) -> list[str]:
    """The summaries of ranks_stalled's firings `runwatch diagnose` gives the text."""
    from runwatch.diagnose import diagnose

    log = tmp_path / "console.log"
    log.write_text(text)
    alerts = diagnose([log]).alerts
    return [a.summary for a in alerts if a.rule == "ranks_stalled" and a.state == "firing"]


def scanned(lines: list[str]) -> list[Found]:
    """What `runwatch watch`'s scanner gives for the lines (it shows the readers only the
    lines holding a marker), then what the end of the output decides."""
    from runwatch.emitters.console import LineParser, LineScanner

    scanner = LineScanner(LineParser())
    out = scanner.feed("\n".join(lines).encode() + b"\n") + scanner.finish()
    return out + scanner.parser.finish()


def non_finite(found: list[Found]) -> list[tuple[int, list[str]]]:
    """(step, keys) of every `step.metrics` holding a value that is not finite."""
    out = []
    for kind, fields in found:
        if kind == "step.metrics":
            metrics = fields["metrics"].items()
            keys = sorted(k for k, v in metrics if v is not None and not math.isfinite(v))
            if keys:
                out.append((fields["step"], keys))
    return out


def read_events(directory: Path) -> list[dict[str, Any]]:
    """Every event an emitter wrote into a spool directory, each checked against the models."""
    from runwatch.emitters import validate

    events = []
    for path in sorted(directory.glob("*.jsonl")):
        events += [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        validate(event)
    return events


def encode(event: dict[str, Any]) -> bytes:
    """The wire form (Python's json writes NaN/Infinity tokens, as emitters do)."""
    return json.dumps(event).encode()


def decoded(event: dict[str, Any]) -> Event:
    """The event as the stream sees it after decoding."""
    from runwatch.stream.decode import decode

    return decode(encode(event))


def feed(engine: Engine, events: Iterable[dict[str, Any]]) -> list[Alert]:
    """Decode and apply events in the order given; all transitions, in order."""
    out: list[Alert] = []
    for event in events:
        out.extend(engine.apply(decoded(event)))
    return out


def lawful(alerts: list[Alert], last: dict[str, str]) -> None:
    """What the contract says of every transition, whatever the rule: the fields and their
    types, the rule's own severity, a key that starts with rule and run, plain JSON, and per
    key firing and resolved in turn, starting with firing (`last`: key -> last state, kept
    across calls). `make_engine`'s engines hold each transition they make to it, so
    every rule's own test checks its rule's lifecycle."""
    if not alerts:
        return
    from runwatch.stream.rules import BUILTIN_RULES

    severity = {rule.id: rule.severity for rule in BUILTIN_RULES}
    for alert in alerts:
        d = alert.to_dict()
        required = {"v", "id", "ts", "rule", "run", "state", "severity", "key", "since",
                    "summary", "details"}  # fmt: skip
        optional = {"subject", "labels", "action", "incident"}
        assert required <= d.keys(), d
        assert set(d) - required <= optional, d
        assert d["v"] == 1, d
        assert isinstance(d["id"], str), d
        assert len(d["id"]) == 32, d
        assert isinstance(d["ts"], float), d
        assert isinstance(d["since"], float), d
        assert d["since"] <= d["ts"], d
        assert d["severity"] == severity.get(d["rule"], d["severity"]), d
        assert isinstance(d["summary"], str), d
        assert d["summary"], d
        assert "\n" not in d["summary"], d
        assert isinstance(d["details"], dict), d
        assert d.get("subject", "-"), d
        assert d["key"] == f"{d['rule']}|{d['run']}" or d["key"].startswith(
            f"{d['rule']}|{d['run']}|"
        ), d
        json.dumps(d, allow_nan=False)  # plain JSON on the wire
        want = "resolved" if last.get(alert.key) == "firing" else "firing"
        assert alert.state == want, f"{alert.key}: {alert.state} after {last.get(alert.key)}"
        last[alert.key] = alert.state


def one_root(alerts: Iterable[Alert], roots: dict[str, str], explains: Any) -> None:
    """What the contract says of incidents (sections 7 and 8), whatever the rule: exactly
    one root per incident, the same key on every transition from the first to the last
    (`roots`: incident id -> root key, kept across calls), and a symptom only of a root that
    explains it (`explains(a, b)`: the table's direction, through chains)."""
    for alert in alerts:
        ref = alert.incident
        if ref is None:
            continue
        root = roots.setdefault(ref.id, ref.root)
        assert ref.root == root, f"{ref.id}: root {ref.root} after {root}"
        assert (ref.role == "root") == (alert.key == root), (ref.id, alert.key, ref.role)
        if ref.role == "symptom":
            assert explains(ref.root_rule, alert.rule), f"{alert.rule} under {ref.root_rule}"


def brief(alerts: Iterable[Alert]) -> list[tuple[str, str, float]]:
    """(rule, state, ts) per transition: what most assertions compare."""
    return [(a.rule, a.state, a.ts) for a in alerts]


def of_rule(alerts: Iterable[Alert], rule: str) -> list[Alert]:
    return [a for a in alerts if a.rule == rule]


# --- leak detection (used by the autouse guard in tests/conftest.py) ------------------------


def child_pids() -> set[int]:
    """Pids of this process's children (any thread's), zombies included, read from /proc."""
    pids: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path) as f:
                pids.update(int(p) for p in f.read().split())
        except FileNotFoundError:
            continue  # that thread ended meanwhile
    return pids


def describe_pid(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    return f"{pid} ({cmd or 'exited, not reaped'})"


def leftover_threads(before: set[threading.Thread], deadline: float) -> list[threading.Thread]:
    """Threads not in `before` still alive at `deadline` (time.monotonic) after joining them."""
    new = [t for t in threading.enumerate() if t not in before]
    for thread in new:
        # `enumerate` lists a thread from `start()` on, before it has run (in `_limbo`), and
        # `join` refuses one whose start has not finished: wait for that first
        if thread._started.wait(timeout=max(0.0, deadline - time.monotonic())):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [t for t in new if t.is_alive()]


def leftover_children(before: set[int], deadline: float) -> set[int]:
    """Children not in `before` still there (running or unreaped) at `deadline`."""
    new = child_pids() - before
    while new and time.monotonic() < deadline:
        time.sleep(0.02)
        new &= child_pids()
    return new


def on_event_time(rule: Any) -> Any:
    """`rule.check`, failing for a verdict that waits on time: a rule whose conditions ripen
    later than they are seen, or that asks to be looked at again, ripens in silence, and
    must say so (`Rule.silence`) to be judged on the clock of what was heard."""
    check = rule.check

    def checked(run: Any, now: float, params: Any) -> Any:
        verdict = check(run, now, params)
        waits = verdict.recheck_at is not None or any(c.fire_at > now for c in verdict.holding)
        assert not waits, f"{rule.rule_id} waits on time: set `silence = True` on it"
        return verdict

    return checked


def make_engine(
    rules: dict[str, dict[str, Any]] | None = None,
    custom: list[dict[str, Any]] | None = None,
) -> Engine:
    """An engine with these `[rules.<id>]` tables and `[[rules.custom]]` entries."""
    from runwatch.stream.config import RulesConfig
    from runwatch.stream.engine import Engine

    section: dict[str, Any] = dict(rules or {})
    if custom:
        section["custom"] = custom

    class Lawful(Engine):
        """An engine that holds every transition it makes to the contract (`lawful`), and
        every rule not on silence to verdicts that do not wait on time (`on_event_time`)."""

        def __init__(self, config: RulesConfig) -> None:
            super().__init__(config)
            for rule in self.rules:
                if not rule.silence:
                    rule.check = on_event_time(rule)  # type: ignore[method-assign]
            self.last_state: dict[str, str] = {}
            self.roots: dict[str, str] = {}
            self.depth = 0  # apply() advances too: hold only what the outer call returns

        def apply(self, event: Event, now: float | None = None) -> list[Alert]:
            self.depth += 1
            try:
                out = super().apply(event, now)
            finally:
                self.depth -= 1
            self._hold(out)
            return out

        def _hold(self, out: list[Alert]) -> None:
            lawful(out, self.last_state)
            one_root(out, self.roots, self.config.incidents.explains)

        def advance(self, now: float) -> list[Alert]:
            out = super().advance(now)
            if not self.depth:
                self._hold(out)
            return out

    return Lawful(RulesConfig.from_mapping({"rules": section}))


def beats(
    src: dict[str, Any], start: float, end: float, every: float = 10.0, run: str = "r1"
) -> list[dict[str, Any]]:
    """Heartbeats of one process at start, start+every, ... up to and including end."""
    out = []
    t = start
    while t <= end:
        out.append(make_event("heartbeat", t, run=run, src=src))
        t += every
    return out


def by_ts(*streams: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several event streams merged in time order (stable: ties keep the order given)."""
    return sorted((e for s in streams for e in s), key=lambda e: e["ts"])


def wait_catches_sigterm(pid: int, timeout: float = 60.0) -> None:
    """Wait until process `pid` has a SIGTERM handler of its own (/proc's SigCgt mask): a
    role told to stop before it got that far would just die, and a test asserting a clean
    stop would fail by timing."""
    mask = 1 << (signal.SIGTERM - 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return  # gone already: the caller sees how it ended
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & mask:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} installed no SIGTERM handler in {timeout:.0f}s")


def terminate(proc: subprocess.Popen[Any], grace: float = 30.0) -> int:
    """SIGTERM, then SIGKILL after `grace` seconds; the exit status. A no-op once exited."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)


def http_get(port: int, path: str) -> tuple[int, str] | None:
    """(status, body) of a GET on 127.0.0.1:`port`; None while nothing answers yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return None


def tiny_model_in(env: str, out: Path) -> Path:
    """Build the cached venv `.cache/<env>` (scripts/<env with _>.sh, once per machine) and
    make a tiny random-weight model with its tokenizer in `out` with that venv's Python
    (scripts/tiny_model.py): what the tests that run a real trainer or agent loop need."""
    root = Path(__file__).resolve().parents[1]
    script = root / "scripts" / f"{env.replace('-', '_')}.sh"
    subprocess.run([str(script)], check=True, timeout=1800)
    python = root / ".cache" / env / "bin" / "python"
    subprocess.run([str(python), str(root / "scripts" / "tiny_model.py"), str(out)],
                   check=True, timeout=300)  # fmt: skip
    return out


def printed_by_fresh_interpreter(code: str) -> str:
    """What `code` prints (stripped), run by a new interpreter: which modules a program's start
    imports can only be seen from one that has imported nothing yet."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    return done.stdout.strip()
