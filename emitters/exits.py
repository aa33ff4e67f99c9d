"""A process's exit reported by whoever ran it, read by grammar (issue 41): not one entry per
launcher, but the few ways launchers, orchestrators and shells say that a named process,
worker, rank, task, pod or container ended badly.

- **a verb and a status**: `exited with code 1`, `exited with exit code 1`, `failed with exit
  code -9`, `exits with return code = -9`, `returned non-zero exit status 2`, `Task 0 exited with
  status 1`, `died with exit code 1`, `Process failed with exitcode 1`, supervisord's `exited:
  train (exit status 1; not expected)`, pm2's `exited with code [1]`, Vertex AI's `exited with a
  non-zero status of 1` -- a past or present verb of ending, then within a few words a code or
  status that is not 0 (one whose line says SIGINT was the signal, pm2's `via signal [SIGINT]`,
  is a user's Ctrl-C: no report, as Python's and the launchers' stops are none);
- **a status field**: `exitcode: 1 (pid: 866229)` (torch elastic's failure summary), `Exit
  code: 1` (YARN's container report), `Exit Code:        2` (`kubectl describe pod`);
- **a signal**: `terminated by signal SIGKILL`, `exited on signal 9`, `killed by signal 9`;
- **a logged failure to start**: a record at ERROR (FATAL, CRITICAL; glog's `E`, logfmt's
  `level=error`, a CLI's `Error:`) that something failed to start, launch, initialize, spawn or
  boot -- a server, an engine, its workers that never came up (FastDeploy's `Failed to launch
  worker processes`, KServe's `Failed to start model server: ...`, vLLM's `Engine core
  initialization failed`'s kin in any framework's words) -- but for a line that says the
  program goes on without it (a retry, a fallback, a part skipped or disabled);
- **Kubernetes' words for a crashed container** (kubelet's container states and the reasons
  `kubectl` prints: pkg/kubelet/container/sync_result.go `CrashLoopBackOff`, the CRI's
  `OOMKilled` and `Error`): a `kubectl get pods` row whose STATUS is one of them, a `Reason:`
  line of `kubectl describe pod`, kubelet's `Back-off restarting failed container` event and
  the eviction manager's `The node was low on resource: memory` (pkg/kubelet/eviction: any
  resource it evicts for -- memory, ephemeral-storage, pids -- and the pod's reason `Evicted`).

A **stop** is not an exit of its own accord: a launcher's or Python's report that the processes
were interrupted by SIGINT (a user's Ctrl-C at the terminal): DeepSpeed's launcher's `Main
process received SIGINT, exiting` (deepspeed/launcher/launch.py `sigkill_handler`,
0.5.5-0.19.5), torch elastic's agent's `Received 2 death signal, shutting down workers` and the
`SignalException: Process N got signal: 2` its termination handler raises
(torch/distributed/elastic/agent/server/api.py, multiprocessing/api.py; `Signals.SIGINT` before
Python 3.11), and Python's own `KeyboardInterrupt`. What fails after it is the stop's doing
(emitters/failures.py). bash reports no SIGINT either (its config-top.h). Another signal sent
to a launcher from outside -- SIGTERM from a scheduler's cancel, time limit or preemption, a
host's OOM handling or a peer node's agent, SIGHUP from a closed session -- ends a run that did
not ask to end, whichever launcher says so: torch elastic's agent (`Received 15 death signal`)
and DeepSpeed's launcher (`Main process received SIGTERM, exiting`) are the catalogue's
(meaning "signalled"), a failure of the trainer -- and, as after a stop, what fails after it
(its ranks torn down) is its doing, no failure of its own. Both launchers then exit non-zero,
so `runwatch watch` reports the command's exit as a failure too: the two readings agree.

An exit code 0, a `Completed` pod and a status that is a word (`exit status: unknown`) are no
report. A report is a *pending* failure of the source that printed it, as a traceback is
(emitters/failures.py): a launcher that restarts its workers (torch elastic's
`max_restarts`) goes on printing progress, and then the report was not the run's end. So
does a Kubernetes restart that succeeds: a later `kubectl get pods` row of the same pod
`Running` with every container ready (mpi-operator's launcher fails and is restarted until
its workers answer) takes its crash's report back, and its `CrashLoopBackOff` row's. Lines
the catalogue names (emitters/catalogue.toml) are read there first, with their framework's
own meaning.
"""

from __future__ import annotations

import re

#: literal pieces one of which every report holds (the scanner's markers)
MARKERS = (
    "exit", "Exit", "EXIT", "return code", "returncode", "signal", "Signal",
    "CrashLoopBackOff", "OOMKilled", "Evicted", "Error ", "restarting failed container",
    "low on resource", "iled to start", "iled to launch", "iled to initiali", "iled to init ",
    "iled to spawn", "iled to boot",
)  # fmt: skip

_CODE = r"[(\[]?(?P<code>[+-]?\d+)\b(?!\.\d)"
#: a verb of ending, then within a few words (no sentence's end between) a code or a status
_VERB_STATUS = re.compile(
    r"\b(?:exited|exits|exit|terminated|failed|finished|died|crashed|returned|stopped|ended)\b"
    r"[^.;!?=]{0,40}?\b(?:exit|return|error)?[ _-]?(?:code|status)\b\s*"
    r"(?:[:=]|(?<=non-zero status )of\b)?\s*" + _CODE,
    re.IGNORECASE,
)
#: a field that states a status: `exitcode: 1`, `Exit code: 1`, `Exit Code:   2`, `returncode=1`
_FIELD = re.compile(
    r"(?:^|[\s\[(,;{'\"])(?:exit[ _]?code|exit[ _]status|return[ _]?code)['\"]?\s*[:=]\s*" + _CODE,
    re.IGNORECASE,
)
_SIGNAL = re.compile(
    r"\b(?:exited|terminated|killed|died|stopped|crashed|ended)\b[^.;!?]{0,30}?"
    r"\b(?:by|on|with|due to|from)\s+signal\b\s*:?\s*(?P<signal>SIG[A-Z]+|\d+)",
    re.IGNORECASE,
)
#: `kubectl get pods`: NAME READY STATUS RESTARTS AGE, STATUS a crashed container's
_POD_ROW = re.compile(
    r"^\s*(?P<pod>\S+)\s+\d+/\d+\s+(?:Init:)?(?P<status>CrashLoopBackOff|Error|OOMKilled|Evicted)"
    r"\s+\d+"
)
#: ... and a pod running with every container ready (READY n/n)
_POD_READY = re.compile(r"^\s*(?P<pod>\S+)\s+(?P<ready>[1-9]\d*)/(?P=ready)\s+Running\s+\d+")
#: `kubectl describe pod`'s container state, and kubelet's and the eviction manager's events
_KUBE = re.compile(
    r"^\s*(?:Reason:\s+(?P<reason>CrashLoopBackOff|OOMKilled|Evicted)\s*$"
    r"|.*\bBack-off restarting failed container\b"
    r"|.*\b[Tt]he node was low on resource: [\w.-]+)"
)
#: a logged error (the record's level, a CLI's `Error:`) that something failed to start: a
#: server, an engine, a worker that never came up
_FAILED_TO_START = re.compile(
    r"\b[Ff]ail(?:ed|s|ure)? to (?:start|launch|initiali[sz]e|init|spawn|boot)\b"
)
_LOGGED_ERROR = re.compile(
    r"\b(?:ERROR|FATAL|CRITICAL)\b|\[(?:error|fatal|critical)\]|\blevel=(?:error|fatal)\b"
    r"|(?:^|[\s\[])[EF]\d{4} \d\d:\d\d|^\s*(?:Error|Fatal):\s"
)
#: ... not when the line says the program goes on: a retry, a fallback, a part it does without
_GOES_ON = re.compile(
    r"\bretr(?:y|ying|ies)\b|\battempt\b|\btrying\b|\bfall(?:ing)? ?back\b|\bskipp(?:ing|ed)\b"
    r"|\bignor(?:e|ed|ing)\b|\bcontinu(?:e|ing)\b|\bwithout\b|\binstead\b|\bdisabl(?:e|ed|ing)\b"
    r"|\bdefault\b|\bwill\b",
    re.IGNORECASE,
)
#: a code that is not a process's: a line that documents or configures one
_NOT_A_REPORT = re.compile(
    r"--exit[-_]code|\bif\b.{0,40}\bexit|\bwill exit\b|(?<!\bnot )\bexpected\b", re.I
)


#: DeepSpeed's launcher tearing its ranks down (deepspeed/launcher/launch.py `sigkill_handler`,
#: 0.3.16-0.19.5, printed, and logged at INFO from 0.5.6): after it either its stop's line
#: (`Main process received SIGINT, exiting`), or a rank failed -- then, to 0.5.7, it raises
#: `subprocess.CalledProcessError` (a traceback), from 0.5.8 it logs `exits with return code`
#: at ERROR (the catalogue's). Kills an output ends after with neither said are a failure
#: (`failures._torn_down`): a user's stop writes its line right after them
TEARDOWN = re.compile(r"(?:^|\] |sigkill_handler\] )Killing subprocess \d+\s*$")
TEARDOWN_MARKER = "Killing subprocess "

#: literal pieces one of which every stop holds (the scanner's markers)
STOP_MARKERS = ("Main process received SIG", "death signal, shutting down workers",
                "got signal: ", "KeyboardInterrupt")  # fmt: skip
_STOP_SIGNAL = r"(?:Signals\.)?(?:SIGINT|2)\b"
_STOP = re.compile(
    r"Main process received SIGINT, exiting"
    rf"|Received {_STOP_SIGNAL} death signal, shutting down workers"
    rf"|SignalException: Process \d+ got signal: {_STOP_SIGNAL}"
    r"|^\s*KeyboardInterrupt\s*$"
)


def stop_request(line: str) -> str | None:
    """The line, when it says the processes were interrupted (SIGINT: a user's Ctrl-C); None
    otherwise."""
    if not any(m in line for m in STOP_MARKERS) or _STOP.search(line) is None:
        return None
    return line.strip()[:2000]


#: a report whose signal was SIGINT: a user's Ctrl-C (pm2's `exited with code [1] via signal
#: [SIGINT]`, `terminated by signal SIGINT`)
_BY_SIGINT = re.compile(r"\bsignal:?\s*\[?(?:SIGINT|Signals\.SIGINT)\b")


def exit_report(line: str) -> str | None:
    """The line, when it reports that a process ended badly; None otherwise."""
    if not any(m in line for m in MARKERS) or ("SIGINT" in line and _BY_SIGINT.search(line)):
        return None
    for pattern in (_VERB_STATUS, _FIELD):
        for m in pattern.finditer(line):
            if int(m.group("code")) != 0 and not _NOT_A_REPORT.search(line):
                return line.strip()[:2000]
    if (sig := _SIGNAL.search(line)) is not None and sig.group("signal") != "0":
        return line.strip()[:2000]
    if _POD_ROW.match(line) or _KUBE.match(line):
        return line.strip()[:2000]
    if (
        "iled to " in line
        and _FAILED_TO_START.search(line)
        and _LOGGED_ERROR.search(line)
        and not _GOES_ON.search(line)
    ):
        return line.strip()[:2000]
    return None


def crashed_pod(line: str) -> str | None:
    """The pod's name, when the line is a `kubectl get pods` row of a crashed container's."""
    m = _POD_ROW.match(line)
    return None if m is None else m["pod"]


#: the literal piece every row `ready_pod` takes holds (the scanner's marker)
READY_MARKER = " Running "


def ready_pod(line: str) -> str | None:
    """The pod's name, when the line is a `kubectl get pods` row of a pod running with every
    container ready: after a row of its crash, the restart that followed succeeded."""
    if READY_MARKER not in line:
        return None
    m = _POD_READY.match(line)
    return None if m is None else m["pod"]


def clean_exit(line: str) -> bool:
    """Whether the line reports a process that exited with code 0 (`died with exit code 0`):
    a clean exit, whatever words it is put in."""
    return any(
        int(m.group("code")) == 0
        for pattern in (_VERB_STATUS, _FIELD)
        for m in pattern.finditer(line)
    )
