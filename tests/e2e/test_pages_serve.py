"""`runwatch serve` itself (the command, with a token file) fed what `runwatch scenarios
sandbox_hang` writes: its first line names the page, `GET /` asks for the token and then
answers a page naming the run, and the run's page shows its steps and the GPU-idle gaps
from the history. (Posted at once, the recorded two hours reach the rules in a second, so
no alert fires here: tests/e2e/test_pages_browser.py replays them on their own clock.)"""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from runwatch.dev.launch import ServeProcess

pytestmark = pytest.mark.slow

RUN = "grpo-qwen2.5-7b-sandbox"
TOKEN = "serve-page-token"
#: the published gaps, 20 -> 21 -> 26 minutes, and the 99 the fourth step sat idle
GAPS = ["20m", "21m", "26m", "99m"]


def request(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode()
    finally:
        conn.close()


def test_serve_fed_the_sandbox_hang_shows_the_run_and_its_idle_gaps(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "runwatch.cli", "incidents", "sandbox_hang", "--out",
                    str(tmp_path)], check=True, capture_output=True, timeout=120)  # fmt: skip
    lines = (tmp_path / "sandbox_hang.jsonl").read_bytes().splitlines()
    (tmp_path / "token").write_text(TOKEN)
    args = ["--token-file", str(tmp_path / "token")]
    with ServeProcess(tmp_path / "h.duckdb", args=args, token=TOKEN) as serve:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        for i in range(0, len(lines), 2000):
            status, _, said = request(serve.port, "POST", "/v1/events",
                                      b"\n".join(lines[i : i + 2000]), bearer)  # fmt: skip
            assert status == 200, said
        assert f"its page: {serve.url}/" in serve.output()
        status, _, page = request(serve.port, "GET", "/")
        assert status == 401
        assert 'type="password"' in page
        assert RUN not in page
        status, head, _ = request(
            serve.port, "POST", "/ui/login", urlencode({"token": TOKEN, "next": "/"}).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"},
        )  # fmt: skip
        assert status == 303
        cookie = {"Cookie": head["Set-Cookie"].split(";")[0]}
        status, head, page = request(serve.port, "GET", "/", headers=cookie)
        assert status == 200
        assert head["Content-Type"].startswith("text/html")
        assert f'<a href="/ui/runs/{RUN}">{RUN}</a>' in page
        deadline = time.monotonic() + 60  # the history is written a second or so behind
        while True:
            status, _, page = request(serve.port, "GET", f"/ui/runs/{RUN}", headers=cookie)
            assert status == 200
            gaps = re.findall(r'<td class="idle-gap">([^<]*)</td>', page)
            if gaps == GAPS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert gaps == GAPS, page[-3000:]
    assert page.count('class="idle"') == 4  # the picture: the gaps, and the hang at step 4
    # its axis: the events' own times (14:00 to 18:20 UTC that day), not when they arrived
    ticks = re.findall(r'class="ticklabel">([^<]*)</text>', page)
    assert ticks == ["15:00", "16:00", "17:00", "18:00", "UTC"]
