"""The sandbox-hang incident from logs alone, end to end: a driver whose real tqdm bar
"Generating trajectories" stops at 511/512 and a vLLM whose V1 stats line says 0 running, 0
waiting, under `runwatch watch`, against `runwatch serve`: `inference_idle_with_pending`
fires with the 511/512 evidence -- not only `stuck_progress`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

#: vLLM V1's stats line (vllm/v1/metrics/loggers.py, 0.8+), with its logging prefix.
DRIVER = textwrap.dedent(
    """
    import sys, time
    from tqdm import tqdm

    V1 = ("INFO 11-24 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: %.1f "
          "tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d "
          "reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%")
    # one stream, so the order of bar and stats lines is the order they were written
    print(V1 % (900.0, 3000.0, 64, 0, 40.0, 10.0), file=sys.stderr, flush=True)
    bar = tqdm(total=512, desc="Generating trajectories", file=sys.stderr, mininterval=0)
    for _ in range(511):
        bar.update(1)
    bar.refresh()
    sys.stderr.write("\\n")
    print(V1 % (0.0, 0.0, 0, 0, 0.0, 10.0), file=sys.stderr, flush=True)  # the last one waits
    time.sleep(600)
    """
)


#: The same run under Ray: the bar is a TaskRunner actor's, written to the file Ray gives the
#: actor for stderr and forwarded by Ray's log monitor -- `readline()` on that file, which at
#: its end returns the unfinished line (a bar's refreshes since the last read, joined by
#: "\\r"), each printed by the driver as `{DIM}{CYAN}(TaskRunner pid=N){RESET_ALL} {line}`
#: (python/ray/_private/log_monitor.py, worker.py print_worker_logs); the vLLM server is a
#: vLLMHttpServer actor on another node.
RAY_DRIVER = textwrap.dedent(
    """
    import os, sys, tempfile, time
    from tqdm import tqdm

    V1 = ("INFO 11-24 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: %.1f "
          "tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d "
          "reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%")
    VLLM = "\\x1b[2m\\x1b[36m(vLLMHttpServer pid=4242, ip=10.0.0.2)\\x1b[0m "
    TASK_RUNNER = "\\x1b[2m\\x1b[36m(TaskRunner pid=%d)\\x1b[0m " % os.getpid()

    # the actor's stderr, a file as Ray redirects it, which the log monitor opens on its own
    fd, path = tempfile.mkstemp(prefix="worker-", suffix=".err")
    writer, monitor = open(fd, "w"), open(path, "rb")
    os.unlink(path)

    def log_monitor():
        while line := monitor.readline():
            text = line.decode("utf-8", "replace").rstrip("\\r\\n")
            print(TASK_RUNNER + text, file=sys.stderr, flush=True)

    print(VLLM + V1 % (900.0, 3000.0, 64, 0, 40.0, 10.0), file=sys.stderr, flush=True)
    bar = tqdm(total=512, desc="Generating trajectories", file=writer, mininterval=0)
    for i in range(511):
        bar.update(1)
        if i % 100 == 0:
            log_monitor()  # a read between refreshes
    bar.refresh()
    log_monitor()
    print(VLLM + V1 % (0.0, 0.0, 0, 0, 0.0, 10.0), file=sys.stderr, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize(
    ("driver", "server"),
    [(DRIVER, "vllm"), (RAY_DRIVER, "vllm@10.0.0.2/4242")],
    ids=["driver-console", "ray-driver-console"],
)
def test_a_hung_sandbox_read_from_the_console_raises_inference_idle_with_pending(
    tmp_path: Path, driver: str, server: str
) -> None:
    config = tmp_path / "rules.toml"
    config.write_text("[rules.inference_idle_with_pending]\nidle_for = 2\n")
    script = tmp_path / "driver.py"
    script.write_text(driver)
    with ServeProcess(tmp_path / "h.duckdb", args=["--config", str(config)]) as serve:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
        watch = subprocess.Popen(
            [sys.executable, "-m", "runwatch.cli", "watch", "--run", "hang", "--url", serve.url,
             "--progress-every", "0", "--", sys.executable, str(script)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            firing: list[dict] = []
            while not firing:
                assert time.monotonic() < deadline, serve.get("/v1/alerts")
                assert watch.poll() is None
                alerts = serve.get("/v1/alerts?state=firing")["alerts"]
                firing = [a for a in alerts if a["rule"] == "inference_idle_with_pending"]
                time.sleep(0.2)
        finally:
            watch.send_signal(signal.SIGTERM)  # passed on to the driver
            watch.wait(60)
    (alert,) = firing
    assert alert["run"] == "hang"
    assert alert["summary"].startswith("511 of 512 trajectories done (Generating trajectories)")
    assert f"while inference is idle ({server})" in alert["summary"]
    assert alert["details"]["pending"] == 1
