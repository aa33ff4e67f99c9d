"""The clock `runwatch diagnose` reads a line's time from: glog's own prefix, bracketless
(google/glog src/logging.cc `LogMessage::Init`: `I1130 12:34:56.789012  1234 file.cc:12] `,
and with `FLAGS_log_year_in_prefix`, newer glog's default, `I20251130 ...`), as Caffe's and
Paddle's C++ lines print it."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from runwatch.diagnose import diagnose, stamp

#: a Caffe solver's lines in glog's format (the thread id padded to 5, glog's `setw(5)`), its
#: CUDA allocation failing in a CHECK: glog's fatal line
CAFFE = (
    "I{d} 12:34:56.789012  1234 solver.cpp:218] Iteration 20 (1.2 iter/s, 16.6s/20 iters), "
    "loss = 0.693\n"
    "F{d} 12:35:06.000001  1234 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)"
    "  out of memory\n"
    "*** Check failure stack trace: ***\n"
)


@pytest.mark.parametrize(("day", "year"), [("1130", 2026), ("20251130", 2025)])
def test_glog_s_own_prefix_is_a_line_s_time(tmp_path: Path, day: str, year: int) -> None:
    path = tmp_path / "caffe.log"
    path.write_text(CAFFE.format(d=day))
    found = diagnose([path], day=date(2026, 11, 30))
    (failed,) = [a for a in found.alerts if a.rule == "component_failed" and a.state == "firing"]
    # (what the stack's end decides is placed just after its line: 1 ms)
    at = datetime(year, 11, 30, 12, 35, 6, 1, tzinfo=UTC).timestamp()
    assert failed.since == pytest.approx(at, abs=0.01)
    assert found.untimed == []


def test_kubectl_s_time_after_a_long_pod_name_is_the_line_s(tmp_path: Path) -> None:
    """`kubectl logs --prefix --timestamps`: the pod's and container's names before the
    collector's time may be longer than where a line's own time is looked for; the time after
    them is the line's all the same."""
    pod = "[pod/pytorchjob-llama-finetune-master-0/pytorch] "
    path = tmp_path / "pod.log"
    path.write_text(
        f"{pod}2024-12-02T05:19:57.123456789Z step: 1, loss: 1.2, lr: 1e-5\n"
        f"{pod}2024-12-02T05:29:57.123456789Z step: 2, loss: nan, lr: 1e-5\n"
    )
    found = diagnose([path], day=date(2024, 12, 2))
    (nan,) = [a for a in found.alerts if a.rule == "non_finite_metric"]
    at = datetime(2024, 12, 2, 5, 29, 57, 123456, tzinfo=UTC).timestamp()
    assert nan.since == pytest.approx(at, abs=0.01)
    assert found.untimed == []


def test_a_date_in_a_message_is_not_the_line_s_time() -> None:
    """A logger's own time at the line's start is its time, not a date its message quotes
    within the first 40 characters (glog's, vLLM's)."""
    glog = "I1202 05:19:57.123456 1234 a.cc:12] 2023-01-01 00:00:00 checkpoint restored"
    at = datetime(2024, 12, 2, 5, 19, 57, 123456, tzinfo=UTC).timestamp()
    assert stamp(glog, 2024, 0.0) == pytest.approx(at, abs=1e-3)
    vllm = "INFO 12-02 05:19:57 [api.py:1] 2023-01-01 00:00:00 restored"
    assert stamp(vllm, 2024, 0.0) == pytest.approx(at - 0.123456, abs=1e-3)
