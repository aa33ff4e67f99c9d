"""Events read from a training job's console: tqdm bars, verl / PRIME-RL / AReaL step lines,
vLLM and SGLang engine stats.

`LineScanner` finds the few interesting lines in a byte stream without looking at the rest:
`bytes.find` for a handful of literal markers runs over each chunk in C, and only the
lines around a hit are decoded and parsed. So unknown lines cost a scan, nothing more.
Lines end at `\\n` or `\\r` (tqdm rewrites its bar with `\\r`).

The formats it reads, version by version, are listed beside the fixtures they were
checked against (tests/fixtures/consoles/README.md).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Sequence
from typing import Any

from runwatch.emitters.reward_keys import DEFAULT_REWARD_KEYS
from runwatch.emitters.trainer import step_events

Found = tuple[str, dict[str, Any]]

#: the notes a reader keeps for its owner to take, at most: `runwatch diagnose` takes them
#: after every line; `runwatch watch` never does, and a job that runs for weeks must not grow
#: a list of why its lines gave no event -- the latest are kept
NOTES_KEPT = 64


def notes() -> deque[str]:
    """An empty list of a reader's notes, bounded (`NOTES_KEPT`)."""
    return deque(maxlen=NOTES_KEPT)


# --- Ray's driver console ----------------------------------------------------------------

#: `(Name pid=N)`, `(Name pid=N, ip=IP)`, a name with its own parentheses (ROLL's
#: `(ActorWorker(actor_train-1) pid=N, ...)`), and one whose head a paste cut (` pid=N) `);
#: SkyPilot's for a task's processes, Ray's form with a comma after the name and a node's rank
#: (skypilot-org/skypilot sky/backends task code: `(setup pid=N[, ip=IP])`, `(TASK, pid=N)`,
#: `(head, rank=0, pid=N)`, `(worker1, rank=1, pid=N, ip=IP)`)
_RAY_PREFIX = re.compile(
    r"^(?:\((?:(?P<name>[^()\s,]+(?:\([^()\s]*\))?),? )?| ?)(?:rank=\d+, )?pid=(?P<pid>\d+)"
    r"(?:, ip=(?P<ip>[0-9A-Za-z.:\[\]-]+))?\) ?"
)
_RAY_REPEATED = re.compile(
    r" ?\[repeated \d+x across cluster\](?: \(Ray deduplicates logs by default\..*\))?\s*$"
)
#: A forwarded worker's component, from its actor or task name (case-insensitive, first
#: match): verl's (b178a3c) TaskRunner and WorkerDict train, AgentLoopWorker and
#: FullyAsyncRollouter roll out, vLLMHttpServer / SGLangHttpServer (and vLLM's own
#: RayWorkerWrapper) serve; so do vLLM's own processes, which prefix their lines the same
#: way (`(APIServer pid=N)`, `(EngineCore_0 pid=N)`); anything else is a `worker`.
RAY_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("httpserver", "inference"), ("vllm", "inference"), ("sglang", "inference"),
    ("rayworkerwrapper", "inference"), ("apiserver", "inference"), ("enginecore", "inference"),
    ("agentloop", "rollout"), ("rollouter", "rollout"), ("taskrunner", "trainer"),
    ("workerdict", "trainer"),
)  # fmt: skip


def ray_origin(line: str) -> tuple[dict[str, Any] | None, str]:
    """(the forwarding worker as an event `src`, the line without Ray's prefix and dedup
    suffix); (None, line) for a line Ray did not forward from a worker."""
    m = _RAY_PREFIX.match(line)
    if m is None:
        return None, line
    rest = line[m.end() :]
    if "across cluster]" in rest:
        rest = _RAY_REPEATED.sub("", rest)
    name = (m.group("name") or "").lower()
    component = next((c for part, c in RAY_COMPONENTS if part in name), "worker")
    src: dict[str, Any] = {"component": component, "pid": int(m.group("pid"))}
    if m.group("ip"):
        src["host"] = m.group("ip")
    return src, rest


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def ray_prefix(head: str) -> str:
    """The Ray prefix, `(Name pid=N[, ip=IP]) ` without colour codes, that a line starts with;
    "" for none."""
    if head[:1] not in ("(", "\x1b"):  # Ray prints "(", colorama its codes first
        return ""
    if "\x1b" in head:
        head = _ANSI.sub("", head)
    m = _RAY_PREFIX.match(head)
    return m.group(0) if m is not None else ""


def segments(line: str) -> list[str]:
    """The lines one physical line (up to `\\n`) shows: its parts between `\\r`s, as tqdm
    rewrites a bar. Under Ray every part is the forwarding worker's: Ray's log monitor reads
    a worker's file with `readline()`, which at the end of the file returns what is there,
    so a bar's refreshes since its last read arrive as one forwarded line,
    `(TaskRunner pid=N) \\rbar\\rbar` (python/ray/_private/log_monitor.py), and each part
    gets the line's prefix."""
    parts = line.split("\r")
    if len(parts) > 1 and (prefix := ray_prefix(parts[0])):
        parts[1:] = [prefix + part for part in parts[1:]]
    return parts


# --- tqdm --------------------------------------------------------------------------------

_COUNT = r"\d+(?:\.\d+)?[kMGTPEZY]?"
_TQDM_TOTAL = re.compile(  # also vLLM's weight-loading bar_format, "{desc}: {pct}% Completed |"
    rf"^(?P<desc>.*?)\s*(?<!\d)(?P<pct>\d{{1,3}})%(?:\|[^|]*\|| Completed \|)? (?P<n>{_COUNT})/"
    rf"(?P<total>{_COUNT}) ?\["
)
#: how much of a line a bar can take: the bar regexes try every start of the percentage, so
#: on a long line of digits or spaces they would take time growing with its square
_BAR_HEAD = 4096
_TQDM_OPEN = re.compile(
    rf"^(?:(?P<desc>.*?): )?(?P<n>{_COUNT})(?P<unit>[^\s\[]*) \[(?:\d+:)?\d\d:\d\d[,\]]"
)
_TQDM_TIME = re.compile(r"\[(?:\d+:)?\d\d:\d\d[<,\]]")
_SCALE = {c: 1000.0**i for i, c in enumerate(" kMGTPEZY") if c != " "}


def _count(text: str) -> int:
    scale = _SCALE.get(text[-1], 1.0)
    return round(float(text[:-1] if scale != 1.0 else text) * scale)


def tqdm_bar(line: str) -> tuple[Found, int] | None:
    """A tqdm bar at the start of the line as `progress` (name = the description, or
    "progress"), and where the bar ends (after its `[...]`): a bar has no line end, so
    what the program prints next starts right after it, on the same line."""
    if "/s" not in line and "s/" not in line:  # tqdm's rate: 1.00it/s, ?it/s, 2.50s/it
        return None
    if _TQDM_TIME.search(line) is None:  # its [elapsed<remaining, ...]: cheaper to rule out
        return None
    head = line[:_BAR_HEAD]
    m = _TQDM_TOTAL.match(head) or _TQDM_OPEN.match(head)
    if m is None:
        return None
    desc = (m.group("desc") or "").strip()
    desc = desc[:-1].rstrip() if desc.endswith(":") else desc
    fields: dict[str, Any] = {"name": desc[:200] or "progress", "n": _count(m.group("n"))}
    if "total" in m.groupdict():
        fields["total"] = _count(m.group("total"))
    close = line.find("]", m.end() - 1)
    return ("progress", fields), len(line) if close < 0 else close + 1


# --- verl --------------------------------------------------------------------------------

_STEP = re.compile(r"(?:^|[\s)\]])step:(\d+) - (.+)$")
_WRAPPED = re.compile(r"^(?:np|numpy|torch)\.\w+\((.*)\)$")
_BOOLS = {"True": 1.0, "False": 0.0, "np.True_": 1.0, "np.False_": 0.0}


def metric_text(text: str) -> float | None:
    """A value as pprint / numpy print it: 0.5, nan, -inf, np.float64(0.5), np.int64(3)."""
    text = text.strip()
    if (m := _WRAPPED.match(text)) is not None:
        text = m.group(1).split(",")[0].strip()  # torch.tensor(0.5, ...) too
    if text in _BOOLS:
        return _BOOLS[text]
    try:
        return float(text)
    except ValueError:
        return None


def parse_verl_step(line: str, reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS) -> list[Found]:
    m = _STEP.search(line)
    if m is None:
        return []
    data: dict[str, float] = {}
    for item in m.group(2).split(" - "):
        key, sep, raw = item.rpartition(":")
        if not sep or not key:
            continue
        value = metric_text(raw)
        if value is not None:
            data[key.strip()] = value
    if not data:
        return []
    return step_events(data, int(m.group(1)), reward_keys)


# --- AReaL -------------------------------------------------------------------------------

_AREAL_STEP = re.compile(r"Train step (\d+)/\d+ done\.")
#: AReaL's step reward (its `task_reward`, exported under the ppo_actor scope)
AREAL_REWARD_KEY = "ppo_actor/task_reward/avg"


def parse_areal_row(line: str) -> dict[str, float]:
    """One row of AReaL's stats table (`tabulate_stats`, fancy_grid): `│ key │ 1.2e-01 │ ...`
    as {key: value}; {} for anything else."""
    cells = [c.strip() for c in line.strip().strip("│").split("│")]
    out: dict[str, float] = {}
    for key, raw in zip(cells[0::2], cells[1::2], strict=False):
        if not key or not raw:
            continue
        value = metric_text(raw)
        if value is None:
            return {}  # not a table of numbers
        out[key] = value
    return out


# --- PRIME-RL ----------------------------------------------------------------------------

#: the step line; before 559b447 (385538edb, 2025-11) the time and every value had a label,
#: `Step N | Time: 12.34s | Reward: 0.5000 | ...`; its eval line, `Evaluated ENV (Step N) |`
_PRIME_STEP = re.compile(
    r'(?:^|[\s"])(?:Evaluated (?P<env>\S+) \()?Step (\d+)\)? \| +(?:Time: )?'
    r"(\d+(?:\.\d+)?(?:ms|s)|\d+[mhd] \d+[smhd]) \| (.+)$"
)
_PRIME_ITEM = re.compile(r"^([A-Za-z][A-Za-z .-]*?):? (-?\d[\d.]*(?:e[-+]?\d+)?|nan|-?inf)(.*)$")
#: PRIME-RL's console labels as its own metric names (559b447: the trainer's from
#: src/prime_rl/trainer/rl/train.py, the orchestrator's stats from src/prime_rl/orchestrator/
#: metrics.py without the `{env}/{subset}/` they are logged under); the three rates are
#: printed as percentages of a fraction, MFU as the percentage it is. The older labels are
#: the same words followed by a colon.
PRIME_RL_KEYS = {
    "Loss": "loss/mean", "Entropy": "entropy/all/mean", "Mismatch KL": "mismatch_kl/all/mean",
    "Grad. Norm": "optim/grad_norm", "LR": "optim/lr", "Throughput": "perf/throughput",
    "MFU": "perf/mfu", "Peak Mem.": "perf/peak_memory", "Max Vio": "max_vio/mean",
    "Routing Conf.": "routing_confidence/mean",
    "Reward": "reward/mean", "Trainable": "trainable/mean", "Turns": "num_turns/mean",
    "Branches": "num_branches/mean", "Max Off-Policy": "off_policy/max",
    "Error": "has_error/mean", "Cancelled": "cancelled/mean", "Truncation": "is_truncated/mean",
}  # fmt: skip
_PRIME_RATES = frozenset({"Error", "Cancelled", "Truncation"})
_DURATION = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def prime_rl_duration(text: str) -> float:
    """PRIME-RL's `format_time`, read back: 850ms, 12.3s, 1m 14s, 2h 5m, 1d 3h."""
    total = 0.0
    for part in text.split():
        unit = "ms" if part.endswith("ms") else part[-1]
        total += float(part[: -len(unit)]) * _DURATION[unit]
    return total


def parse_prime_rl_step(line: str, reward_keys: Sequence[str] = DEFAULT_REWARD_KEYS) -> list[Found]:
    """PRIME-RL's step line, `Step N | 1m 14s | Label value | ...` (older: `Step N | Time:
    12.34s | Label: value | ...`): the trainer's (`Loss ...`) ends step N, taking the time it
    gives; the orchestrator's (`Reward ...`) carries the rollout's metrics. Also inside its
    JSON log lines (`"message": "Step N | ..."`); a multi-environment run's per-environment
    lines after the first are not read. An eval line gives `eval.metrics`, under
    `eval/ENV/`."""
    m = _PRIME_STEP.search(line)
    if m is None:
        return []
    message = m.group(4).split("\\n", 1)[0].split('"', 1)[0]  # a JSON message ends there
    data: dict[str, float] = {}
    for item in message.split(" | "):
        if (part := _PRIME_ITEM.match(item.strip())) is None:
            continue
        label, raw, rest = part.groups()
        if (key := PRIME_RL_KEYS.get(label)) is None:
            continue
        value = float(raw)
        if label in _PRIME_RATES and rest.startswith("%"):
            value /= 100.0
        elif rest.startswith("/") and (whole := rest[1:].split(" ", 1)[0]).isdigit():
            value = value / int(whole) if int(whole) else 0.0  # Trainable 240/256 (93.8%)
        data[key] = value
    if not data:
        return []
    step = int(m.group(2))
    if (env := m.group("env")) is not None:
        return step_events({f"eval/{env}/{k}": v for k, v in data.items()}, step, ())
    trainer = "loss/mean" in data
    if trainer:
        data["timing_s/step"] = prime_rl_duration(m.group(3))
    return step_events(data, step, reward_keys, done=trainer)


# --- vLLM and SGLang ---------------------------------------------------------------------

_VLLM_RUNNING = re.compile(r"Running: (\d+) reqs")
_VLLM_WAITING = re.compile(r"(?:Waiting|Pending): (\d+) reqs")
_VLLM_KV = re.compile(
    r"KV cache usage: (?:active )?(\d+(?:\.\d+)?)%"
)  # the first: V0 has GPU, then CPU (swap)
_VLLM_GEN = re.compile(r"Avg generation throughput: (\d+(?:\.\d+)?) tokens/s")
_VLLM_PROMPT = re.compile(r"Avg prompt throughput: (\d+(?:\.\d+)?) tokens/s")
_VLLM_ENGINE = re.compile(r"Engine (\d+):")
_SGL_RUNNING = re.compile(r"#running-req: (\d+)")
_SGL_QUEUE = re.compile(r"#queue-req: (\d+)")
_SGL_USAGE = re.compile(r"token usage: (\d+(?:\.\d+)?)")
_SGL_GEN = re.compile(r"gen throughput \(token/s\): (\d+(?:\.\d+)?)")
_SGL_DP = re.compile(r"\bDP(\d+)\b")


def _fraction(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def parse_vllm(line: str, server: str = "vllm") -> Found | None:
    running, waiting = _VLLM_RUNNING.search(line), _VLLM_WAITING.search(line)
    if running is None or waiting is None:
        return None
    engine = _VLLM_ENGINE.search(line)
    if engine is not None and int(engine.group(1)) > 0:
        server = f"{server}/engine-{int(engine.group(1))}"
    fields: dict[str, Any] = {
        "server": server,
        "running": int(running.group(1)),
        "waiting": int(waiting.group(1)),
    }
    if (kv := _VLLM_KV.search(line)) is not None:
        fields["kv_cache_usage"] = _fraction(float(kv.group(1)) / 100.0)
    if (gen := _VLLM_GEN.search(line)) is not None:
        fields["gen_tokens_per_s"] = float(gen.group(1))
    if (prompt := _VLLM_PROMPT.search(line)) is not None:
        fields["prompt_tokens_per_s"] = float(prompt.group(1))
    return ("inference.stats", fields)


def parse_sglang(line: str, server: str = "sglang") -> Found | None:
    running, queue = _SGL_RUNNING.findall(line), _SGL_QUEUE.search(line)
    if not running or queue is None or "batch" not in line:
        return None
    dp = _SGL_DP.search(line.split("]", 1)[0]) if "]" in line else None
    if dp is not None and int(dp.group(1)) > 0:
        server = f"{server}/dp-{int(dp.group(1))}"
    fields: dict[str, Any] = {
        "server": server,
        "running": int(running[-1]),  # "Prefill batch(mixed #running-req: 3). ..." has two
        "waiting": int(queue.group(1)),
    }
    if (usage := _SGL_USAGE.search(line)) is not None:
        fields["kv_cache_usage"] = _fraction(float(usage.group(1)))
    if (gen := _SGL_GEN.search(line)) is not None and math.isfinite(float(gen.group(1))):
        fields["gen_tokens_per_s"] = float(gen.group(1))
    return ("inference.stats", fields)
