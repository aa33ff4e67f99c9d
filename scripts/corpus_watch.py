"""Whether `runwatch watch` agrees with `runwatch diagnose` on the corpora's development parts
(issue 41, item 5).

    .venv/bin/python scripts/corpus_report.py --watch --corpus corpus2   # one corpus
    .venv/bin/python scripts/corpus_watch.py corpus corpus2 corpus3       # the same, several

Each dev excerpt (tests/fixtures/consoles/CORPUS/dev/, its `#` header left out) is read by
`runwatch.diagnose.diagnose` in process, as scripts/corpus_report.py reads it but with the
thresholds the excerpt is played at (`config`; the defaults under `--cat`), and played
through the real watch path: `runwatch watch --run ID --url URL -- sh -c 'tail ...'`, every
excerpt of a corpus its own run, many at once, into one real `runwatch serve` per corpus. An
excerpt whose labels name a rule that needs time to pass with the output still open (a
collective's settle, ranks or an engine stalled for a while), and an inference engine's
control (a server idle between requests), is played by a command that prints it and then
hangs, as the job did (`hangs`: decided from the labels, never from diagnose's result); the
others by one that prints it and exits, 1 when its labels say a process failed (`status`).
The service runs with short thresholds (`config`), and `RUNWATCH_LAST_WORD` is as short, so a
hung command's last traceback is read in seconds, not minutes: what is measured is the path,
not the rules' defaults.

`--cat` plays every excerpt as issue 41 states its check instead: `runwatch watch -- cat FILE`
(the excerpt without its header), which exits 0 and never hangs -- what a user trying
runwatch on a saved log does -- into a service with the rules' defaults. An excerpt that
ends inside a wait its framework declared leaves its run open (docs/watch.md): the service's
ranks_stalled or inference_stalled decides it on its clock, within the rule's default limit
of the wait's start, so such a run is waited for -- until one of them fires, or for that
limit and a margin after its watch exited (`left_open_wait`), about five minutes at most.

Prints, per corpus, how many excerpts the two commands agree on (the same set of firing rules
read from the text: a failure that is the command's exit status alone is left out, as a file
has none; for a hung excerpt, both what had fired while it hung and at the end of its output)
and, for each that differs, its id and both sets, with its labels. It reports and does not
fail. Never pass a corpus whose dev part you must not see. `--part heldout` (with `--cat`,
issue 41's check of both commands on consoles nobody tuned on) plays a held-out part and
prints figures only -- each class's recall by either command, false alerts on the controls
-- naming no excerpt.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository's root is the import root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runwatch.dev.launch import ServeProcess
from runwatch.stream.config import RulesConfig
from runwatch.stream.timekeeping.reading import LATE_S
from scripts.corpus_report import CLASSES, CONSOLES, excerpt_lines, read_part, run_one

#: rules that fire only while the job's output stays open (the job hung)
WHILE_HUNG = frozenset(
    {"collective_timeout", "inference_stalled", "ranks_stalled", "weight_sync_stalled"}
)
#: frameworks of inference engines: a control of one is a server, quiet between requests
ENGINES = frozenset({"vllm", "vllm-ascend", "sglang"})
#: the played service's thresholds: short, but longer than a batch can be late without
#: holding the service's silence clock (`LATE_S`): a batch later than a collective's settle,
#: and not late enough to hold it, is judged on its first line alone, its other ranks not
#: yet in (the defaults are longer still)
THRESHOLD_S = LATE_S + 1
#: how long a hung command is held after its run's first event: its last word, then the
#: longest threshold, then the service's tick, with room for a loaded machine
HOLD_S = 4 * THRESHOLD_S + 10
#: excerpts played at once (each a `runwatch watch` and its command)
AT_ONCE = 24
#: rules that decide a run `runwatch watch -- cat` left open, on the service's clock
DECIDE_LEFT_OPEN = {"ranks_stalled": "timeout", "inference_stalled": "stalled_for"}
#: beyond the longest of their limits: the service's tick and a loaded machine
LEFT_OPEN_MARGIN_S = 30.0


def config(threshold: float = THRESHOLD_S) -> str:
    """The rules config of the service the consoles are played into."""
    return "".join(
        f"[rules.{rule}]\n{param} = {threshold:g}\n\n"
        for rule, param in (("collective_timeout", "settle"), ("inference_stalled", "stalled_for"),
                            ("ranks_stalled", "timeout"), ("weight_sync_stalled", "timeout"))
    )  # fmt: skip


def hangs(name: str, entry: dict[str, Any]) -> bool:
    """Whether an excerpt is played by a command that prints it and then hangs: its labels
    name a rule that fires only while the job's output stays open, or it is the control of an
    inference engine (a server goes quiet between requests and lives on)."""
    if WHILE_HUNG & set(entry["rules"]):
        return True
    control = not entry["rules"]
    return control and (entry.get("framework") in ENGINES or name.startswith("healthy_vllm"))


def status(entry: dict[str, Any]) -> int:
    """The exit status of a command that prints an excerpt and exits, as the job's: 1 when
    its labels say a process of the run failed, else 0."""
    return 1 if "component_failed" in entry["rules"] else 0


def watch_command(
    url: str, run: str, path: Path, header: int, hang: bool, rc: int = 0
) -> list[str]:
    """`runwatch watch` of a command that prints the excerpt (its first `header` lines left
    out), then hangs or exits `rc`."""
    show = f'tail -n +{header + 1} "{path}"'
    play = ["sh", "-c", f"{show}; exec sleep 600" if hang else f"{show}; exit {rc}"]
    return [sys.executable, "-m", "runwatch.cli", "watch", "--run", run, "--url", url, "--",
            *play]  # fmt: skip


def watch_env(last_word: float = THRESHOLD_S) -> dict[str, str]:
    """The environment of the played `runwatch watch`: none of the caller's RUNWATCH_*, and a
    hung command's last word read after `last_word` seconds of quiet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    return {**env, "RUNWATCH_LAST_WORD": f"{last_word:g}"}


def left_open_wait() -> float:
    """How long after its watch exited a run left open is waited for: the longest default
    limit of the rules that decide it, and a margin."""
    rules = RulesConfig.default().by_id()
    limits = (float(getattr(rules[rule].params, param)) for rule, param in DECIDE_LEFT_OPEN.items())
    return max(limits) + LEFT_OPEN_MARGIN_S


def fired(transitions: list[dict[str, Any]]) -> list[str]:
    """The rules a run's transitions fired on its text: not an incident's evidence (the
    stacks `runwatch watch` took of a hung command), nor a failure that is the command's exit
    status alone (diagnose reads a file, which has none)."""
    return sorted(
        {
            a["rule"]
            for a in transitions
            if a["state"] == "firing"
            and (a.get("incident") or {}).get("role") != "evidence"
            and (a.get("details") or {}).get("how") != "exit"
        }
    )


@dataclass
class Played:
    name: str
    hang: bool
    proc: subprocess.Popen[bytes]
    started: float
    seen: float | None = None  # when its run's first event was in the service
    stopped: bool = False
    exited: float | None = None  # when its watch exited


@dataclass
class Agreement:
    corpus: str
    labels: dict[str, dict[str, Any]]
    diagnosed: dict[str, list[str]] = field(default_factory=dict)
    watched: dict[str, list[str]] = field(default_factory=dict)
    #: what a hung excerpt's run had fired when it was stopped: what a user of a job that
    #: stays hung gets (the end of its output, at the stop, may decide more)
    while_hung: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # a watch that did not end well
    cat: bool = False  # played as `runwatch watch -- cat FILE`
    part: str = "dev"  # `heldout`: reported as figures only (`show`)

    def differ(self) -> list[str]:
        """The excerpts whose watch fired other rules than diagnose, while hung or in all."""
        return sorted(
            n
            for n in self.labels
            if self.diagnosed[n] != self.watched.get(n)
            or self.diagnosed[n] != self.while_hung.get(n, self.diagnosed[n])
        )


def play(corpus: str, at_once: int = AT_ONCE, cat: bool = False, part: str = "dev") -> Agreement:
    """Diagnose every excerpt of `corpus`'s `part`, and play each through `runwatch watch` into
    one `runwatch serve` (`cat`: as `runwatch watch -- cat FILE`)."""
    labels = read_part(corpus, part)
    folder = CONSOLES / corpus / part
    out = Agreement(corpus, labels, cat=cat, part=part)
    # diagnose reads each excerpt with the thresholds its watch is played at
    played = None if cat else RulesConfig.from_mapping(tomllib.loads(config()))
    for name, entry in labels.items():
        result = run_one(folder / f"{name}.log", entry["rules"], played)
        out.diagnosed[name] = ["CRASH"] if result.crash else result.fired
    with tempfile.TemporaryDirectory(prefix="corpus-watch-") as tmp:
        rules = Path(tmp) / "rules.toml"
        rules.write_text("" if cat else config())
        with ServeProcess(Path(tmp) / "h.duckdb", args=["--config", str(rules)]) as serve:
            _play_all(serve, out, folder, at_once, Path(tmp) if cat else None)
            runs = {r["run"] for r in serve.get("/v1/runs")["runs"]}
            for name in labels:
                if name not in runs:
                    out.watched[name] = ["NO EVENTS"]
                    continue
                out.watched[name] = fired(serve.get(f"/v1/runs/{name}")["transitions"])
    return out


def _play_all(
    serve: ServeProcess, out: Agreement, folder: Path, at_once: int, cat: Path | None = None
) -> None:
    """Play the excerpts, `at_once` at a time: a hung one is stopped (SIGTERM, passed on to
    its command) `HOLD_S` after its run's first event; then wait for the service's tick.
    `cat`: a folder where each excerpt, its header left out, is written and played by `cat`."""
    todo = sorted(out.labels)
    playing: dict[str, Played] = {}
    exited: dict[str, float] = {}  # excerpt -> when its watch exited
    env = watch_env()
    while todo or playing:
        while todo and len(playing) < at_once:
            name = todo.pop(0)
            entry = out.labels[name]
            hang = cat is None and hangs(name, entry)
            if cat is None:
                cmd = watch_command(serve.url, name, folder / f"{name}.log", 2, hang, status(entry))
            else:
                lines = excerpt_lines(folder / f"{name}.log")
                (cat / f"{name}.log").write_bytes(b"".join(line for _, line in lines))
                cmd = [sys.executable, "-m", "runwatch.cli", "watch", "--run", name, "--url",
                       serve.url, "--", "cat", str(cat / f"{name}.log")]  # fmt: skip
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    env=env)  # fmt: skip
            playing[name] = Played(name, hang, proc, time.monotonic())
        time.sleep(0.25)
        now = time.monotonic()
        runs = {r["run"] for r in serve.get("/v1/runs")["runs"]}
        for name, p in list(playing.items()):
            if p.seen is None and name in runs:
                p.seen = now
            if p.proc.poll() is not None:
                want = 0 if cat is not None else status(out.labels[name])
                if not p.hang and p.proc.returncode != want:
                    out.notes[name] = f"watch exited {p.proc.returncode}"
                exited[name] = now
                del playing[name]
            elif p.hang and not p.stopped and p.seen is not None and now - p.seen >= HOLD_S:
                out.while_hung[name] = fired(serve.get(f"/v1/runs/{name}")["transitions"])
                p.proc.send_signal(signal.SIGTERM)
                p.stopped = True
            elif now - p.started > 180 and not p.stopped:
                out.notes[name] = "watch still running after 180 s: stopped"
                p.proc.send_signal(signal.SIGTERM)
                p.stopped = True
    time.sleep(2 * THRESHOLD_S)  # the service's last ticks on the runs that ended last
    if cat is not None:
        _await_left_open(serve, out, exited)


def _await_left_open(serve: ServeProcess, out: Agreement, exited: dict[str, float]) -> None:
    """Wait for the runs `runwatch watch -- cat` left open (their watch exited, the run is not
    finished) until a rule that decides them fires, or `left_open_wait` after their watch
    exited."""
    bound = left_open_wait()
    runs = {r["run"]: r for r in serve.get("/v1/runs")["runs"]}
    left = {n: t for n, t in exited.items() if runs.get(n, {}).get("status") == "running"}
    for name in left:
        out.notes[name] = "left open"
    while left:
        now = time.monotonic()
        for name, at in list(left.items()):
            decided = set(fired(serve.get(f"/v1/runs/{name}")["transitions"]))
            if decided & set(DECIDE_LEFT_OPEN):
                out.notes[name] = "left open, decided"
                del left[name]
            elif now - at > bound:
                out.notes[name] = f"left open, nothing decided in {bound:g} s"
                del left[name]
        time.sleep(1.0)


def show(result: Agreement) -> None:
    differ = result.differ()
    total = len(result.labels)
    agree = total - len(differ)
    how = "watch -- cat" if result.cat else "watch"
    print(f"\n== {result.corpus} {result.part}: {how} agrees with diagnose on {agree} / {total}")
    if result.cat:
        left = [n for n, note in result.notes.items() if note.startswith("left open")]
        print(f"  runs left open by watch: {len(left)}")
    if result.part != "dev":  # figures only: nobody tunes the reader on a held-out excerpt
        figures(result)
        return
    for name in differ:
        said = ", ".join(result.labels[name]["rules"]) or "control"
        diag = ", ".join(result.diagnosed[name]) or "nothing"
        watched = ", ".join(result.watched.get(name, [])) or "nothing"
        hang = " (hung)" if not result.cat and hangs(name, result.labels[name]) else ""
        if name in result.while_hung and result.while_hung[name] != result.watched.get(name):
            watched += f" (while hung: {', '.join(result.while_hung[name]) or 'nothing'})"
        note = f" [{result.notes[name]}]" if name in result.notes else ""
        print(f"  {name}{hang}: labels {said}; diagnose {diag}; watch {watched}{note}")


def figures(result: Agreement) -> None:
    """Each class's recall by either command, and false alerts on the controls: the figures
    issue 41 checks on held-out consoles, for both commands, no excerpt named."""
    by = {"diagnose": result.diagnosed, "watch": result.watched}
    failures = {n: e["rules"] for n, e in result.labels.items() if e["rules"]}
    for rule in CLASSES:
        should = [n for n, rules in failures.items() if rule in rules]
        if should:
            found = "  ".join(
                f"{who} {sum(rule in fired[n] for n in should):3} / {len(should)}"
                for who, fired in by.items()
            )
            print(f"  {rule:22} {found}")
    controls = [n for n, e in result.labels.items() if not e["rules"]]
    false = "  ".join(f"{who} {sum(bool(fired[n]) for n in controls)}" for who, fired in by.items())
    print(f"  false alerts on {len(controls)} controls: {false}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", metavar="CORPUS", help="e.g. corpus corpus2")
    parser.add_argument("--at-once", type=int, default=AT_ONCE, help="excerpts played at once")
    parser.add_argument(
        "--cat", action="store_true", help="each as `runwatch watch -- cat FILE`, default rules"
    )
    parser.add_argument(
        "--part", choices=("dev", "heldout"), default="dev",
        help="heldout: figures only, no excerpt named (with --cat: issue 41's check)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    for corpus in args.corpora:
        show(play(corpus, args.at_once, args.cat, args.part))
    return 0


if __name__ == "__main__":
    sys.exit(main())
