"""What launchers put in front of a process's lines, taken off so the parsers see the line.

Real consoles arrive wrapped: colour codes (sometimes pasted with the ESC byte lost, as
`[36m`, or turned into U+FFFD), torchrun's `[rank3]:` / `[default0]:` (`--tee` /
`--local-ranks-filter`; torch/distributed/elastic/multiprocessing/api.py), Open MPI's
`--tag-output` `[1,0]<stdout>:` and with `--timestamp-output` a date before it
(`Tue May 20 21:16:06 2025[1,0]<stdout>:`; orte/mca/iof/base/iof_base_output.c), horovodrun's
own (Gloo) launcher's `[0]<stderr>:` -- the rank alone, with `--timestamp-output` the same
date before it (horovod/runner/common/util/safe_shell_exec.py `forward_stream`:
'{time}[{rank}]<{prefix}>:{line}', time.asctime) -- and a launcher's own `[2024-08-21
03:38:02] `, SLURM's `srun --label` task id (`0: `, padded to the widest id, ` 3: `; `P1 0: `
for a heterogeneous job's component: src/common/write_labelled_message.c `_build_label`, `"%*d: "`)
and the systemd journal's (`journalctl` and syslog's short format, `Dec 02 05:19:57 HOST
IDENT[PID]: `), DeepSpeed's pdsh's host (`worker-1: `), and `docker compose`'s `NAME  | ` or
`kubectl logs --prefix`'s `[pod/NAME/CONTAINER] ` before them all. Ray's own prefix is read by
`runwatch.emitters.logparse.ray_origin`, between a compose or `--tee` prefix around the Ray
driver and those inside a worker's line. A rank the prefix names is kept: it
tells one process of a job from another when nothing else does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from runwatch.emitters.metric_pairs import NUMBER

#: glog's year before its month and day: from glog 0.6 its prefix is `I20251130 12:34:56.789012`
#: (`log_year_in_prefix`, on by default; src/logging.cc), before it `I1130 ...`
GLOG_YEAR = r"(?:(?:19|20)\d\d)?"

#: colour codes, with the ESC byte or without it (lost in a paste), or as U+FFFD
#: (without its ESC a code has a number: `[m` alone begins a word -- `[missing ranks: 0]`,
#: `[metrics]` -- in a line that holds codes elsewhere)
COLOUR = re.compile(r"(?:\x1b|\ufffd)\[[0-9;?]*m|\[[0-9;]+m|\x1b\[[0-9;?]*[A-Za-z]")
_LOST_ESC = re.compile(r"(?:\ufffd)?\[[0-9;]+m")

_TORCHRUN = r"\[(?P<tr>rank|default)(?P<trank>\d+)\]:"
_MPI = (
    r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4})?"
    r"\[(?:\d+,)?(?P<mrank>\d+)\]<std(?:out|err)>:"
)
_STAMPED = r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\] ?"
#: `srun --label`: the task id (SLURM_PROCID, a rank) right-aligned to the widest id's digits,
#: then `: ` -- not a program's own numbered lines, whose number is its iteration or an item's:
#: a number and a comma after it (darknet's `%ld: %f, %f avg loss`, its NaN as the C library
#: prints it: `-nan(ind)`, `1.#QNAN0`), a key and its value after a tab or a run of spaces
#: (CatBoost's `N:\tlearn: 0.12`, its tab often pasted as spaces), a call printed (`2: tensor(`)
_SRUN = (
    r" {0,4}(?:P\d+ +)?(?P<srank>\d{1,5}): "
    r"(?![-+]?(?:\d+(?:\.\d+)?|\d\.#\w+|nan(?:\(\w+\))?|inf), "
    r"|(?:\t| \s)\s*[a-z_]\w*:\s+[-+]?(?:\d|nan\b|inf\b)|[a-z_]\w*\()"
)
#: the journal's and syslog's short format (systemd/src/shared/logs-show.c `output_short`:
#: the local time without a year, the host, the identifier and `[PID]` where it has one)
#: (month, day and time grouped: `runwatch diagnose` dates the line by them, the year its own)
JOURNAL = re.compile(
    r"([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) [\w.-]+ [\w.@/-]+(?:\[\d+\])?: "
)
#: pdsh's label of each line a node's command wrote (DeepSpeed's and accelerate's multi-node
#: launcher; chaos/pdsh src/pdsh/dsh.c `rsh`: `out("%S: %s", host, line)` unless `-N`): the
#: host, an address or a lower-case name in parts with a digit (`10.96.202.43: `, `worker-1: `,
#: `gpu-node-07: `, `node1.cluster: `) -- not a metric's key (`acc1: `, `loss2: NaN`, `top1: 75.2`,
#: `math500: acc=0.45`: one part), an error code (CANN's `EI0006: `, upper-case), a script bash
#: names in its own messages (`run-qwen2.5-7b.sh: line 12: 4321 Killed`) nor Python's
#: (`python3.11: No module named x`); nor a number alone after it (a time may follow a host)
_PDSH = (
    r"(?:(?:\d{1,3}\.){3}\d{1,3}"
    r"|(?!python)(?=[a-z0-9.-]*\d)[a-z][a-z0-9]*(?:[-.][a-z0-9]+)+(?<!\.sh)(?<!\.py)(?<!\.bash)): "
    r"(?!line \d+: |[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?%?(?:[\s,;|]|$)|nan\b|inf\b))"
)
#: `docker compose logs` / `up` (docker/compose@f729794 cmd/formatter/logs.go `setPrefix`:
#: `fmt.Sprintf("%-"+width+"s | ", name)`, the width the longest name's + 1, then each line
#: of a message): the container's name without its project (`service-N`, compose v1
#: `project_service_N`) or its own `container_name`, padded so that two spaces at least come
#: before the bar -- which a table's `Step | loss` or `1 | 0.5` row has not; nor a log level
#: a format pads the same way (loguru's `{level: <8} | `: `WARNING  | `, its words a warning's)
_LEVEL = r"(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|WARN|ERROR|CRITICAL|FATAL) "
#: ... nor a key a table pads the same way: after a container's bar comes a line of its log,
#: not one number alone (`loss        | nan`: a dict printed as `f"{key:<12} | {value}"`,
#: which the metric readers take as a record) -- a row of several (`1 | -0.28 | nan`) may be
#: a container's process printing a table, and stays its line
_CELL = rf"\s*(?:{NUMBER})%?\s*"
_COMPOSE = rf"(?!{_LEVEL})[A-Za-z][\w.-]*  +\| (?!{_CELL}\|?\s*$)"
_COMPOSE_WITHIN = 80
#: a log collector's time of arrival before each line: RFC 3339 with its `T` and zone, as
#: `kubectl logs --timestamps` and `docker logs -t` write it (RFC3339Nano, `2024-05-01T10:00:
#: 00.123456789Z `), GitHub Actions' logs (seven digits) and Loki's or CloudWatch's exports --
#: not Python logging's `2024-05-01 10:00:00,123`, a program's own
_COLLECTED = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "
#: `kubectl logs --prefix` (-l SELECTOR, --all-containers): the pod and container before each
#: line, before the collector's time where `--timestamps` asks it (k8s.io/kubectl
#: pkg/cmd/logs/logs.go `addPrefixIfNeeded`: `fmt.Sprintf("[pod/%s/%s] ", ref.Name, container)`)
_KUBECTL = r"\[pod/[\w.-]+/[\w.-]*\] "
_POD = re.compile(_KUBECTL)
#: a log viewer's line numbers, `[80746] `, pasted with the lines
_GUTTER = r"\[\d+\] (?=\[)"
PREFIX = re.compile(
    rf"(?:{_KUBECTL})?(?:{_COLLECTED})?(?:{JOURNAL.pattern})?(?:{_COMPOSE})?(?:{_COLLECTED})?"
    rf"(?:{_GUTTER})?(?:{_PDSH})?(?:{_SRUN})?(?:{_TORCHRUN}|{_MPI}|{_STAMPED})*"
)


_DIGIT = re.compile(r"\d")


def strip_colour(line: str) -> str:
    """The line without colour codes, also those whose ESC byte was lost."""
    if "\x1b" in line:
        line = COLOUR.sub("", line)
    if "[" in line and "m" in line and ("\ufffd[" in line or _LOST_ESC.match(line)):
        line = _LOST_ESC.sub("", line)
    return line


def _may_be_prefixed(line: str) -> bool:
    """Whether the line may start with a prefix `PREFIX` knows: cheap tests of its first
    characters, so that most lines never meet the expression."""
    first = line[:1]
    if first in ("[", "M", "T", "W", "F", "S", "P") or first.isdigit():
        return True  # (a bracket, an MPI date's weekday, srun's het label, a time or a label)
    if first == " ":  # (srun's label padded to the widest task id's digits)
        return line.lstrip(" ")[:1].isdigit() and not line.startswith("     ")
    if " | " in line[:_COMPOSE_WITHIN] or line[10:11] == "T":
        return True  # (a compose name's bar, a collector's RFC 3339 time)
    if line[3:4] == " " and line[9:10] == ":":
        return True  # (the journal's month, day and time)
    # pdsh's host: one lower-case name in parts with a digit in it, then `: `
    end = line.find(": ", 0, 64)
    return (
        end > 0
        and first.islower()
        and " " not in line[:end]
        and ("-" in line[:end] or "." in line[:end])
        and _DIGIT.search(line, 0, end) is not None
    )


def launcher_prefix(line: str) -> tuple[str, int | None]:
    """(the line without torchrun's, Open MPI's and a launcher's prefixes, the rank they
    name or None)."""
    if not _may_be_prefixed(line):
        return line, None
    m = PREFIX.match(line)
    if m is None or not m.end():
        return line, None
    rank = m.group("trank") or m.group("mrank") or m.group("srank")
    return line[m.end() :], int(rank) if rank is not None else None


def time_places(line: str) -> Iterator[str]:
    """Where a line's time may stand, in the order to look: its start as written (a
    collector's or a launcher's time), then -- only if asked, the first had none -- its start
    under those prefixes (a program's own, behind a container's name or a rank). `runwatch
    diagnose` dates a line so; the waits' clock (`stalls`) reads the prefixes first too."""
    yield line
    if line.startswith("[pod/") and (pod := _POD.match(line)) is not None:
        yield line[pod.end() :]  # (the collector's time after a pod's name too long to look past)
    if (inner := launcher_prefix(line)[0].lstrip()) != line:
        yield inner


def launcher_lead(line: str) -> str:
    """The launcher's prefixes a line starts with, as written ("" for none): what a launcher
    writes before each line a process writes, the rest of a message it split included."""
    rest, _ = launcher_prefix(line)
    return line[: len(line) - len(rest)]


#: the times a prefix holds (a collector's RFC 3339, a launcher's `[2024-08-21 03:38:02]`,
#: Open MPI's asctime): they move on between a line's pieces, where a rank or a container's
#: name (`[rank1]:`, `trainer-2  | `) does not
_TIME = re.compile(
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|\d\d:\d\d:\d\d(?: \d{4})?"
)


def lead_form(lead: str) -> str:
    """A prefix without its times: two lines' prefixes of one writer, one form."""
    return _TIME.sub("", lead)
