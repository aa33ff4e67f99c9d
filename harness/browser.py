"""A headless Chromium driven by Selenium, for the page's browser test and the README's
screenshot: Debian's `chromium` and `chromedriver` (scripts/ensure_chromium.sh installs
them), never a browser fetched at run time.

Chromium is started so that it reaches nothing outside the machine (no background
networking, component updates, sync or first-run fetches, a fresh profile), and `close()`
stops what it started by pid: the driver, and the browser processes under it, each checked
gone and killed if it lingers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.exceptions import NoBrowser

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def _descendants(pid: int) -> list[int]:
    """`pid`'s children, their children, ... (from /proc), deepest last."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for path in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                kids = [int(p) for p in path.read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def _started(pid: int) -> str | None:
    """When `pid` started (its /proc start time: with the pid, one process and never a later
    one that reuses the number); None once it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


class Browser:
    """Headless Chromium at `width` x `height`; `driver` is Selenium's. `close()` it."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        # the same as scripts/ensure_chromium.sh finds: $RUNWATCH_CHROMIUM, else `chromium`
        chromium = os.environ.get("RUNWATCH_CHROMIUM") or shutil.which("chromium")
        chromedriver = os.environ.get("RUNWATCH_CHROMEDRIVER") or shutil.which("chromedriver")
        if not chromium or not chromedriver:
            raise NoBrowser(
                "chromium and chromedriver are needed (Debian: apt-get install chromium "
                "chromium-driver; scripts/ensure_chromium.sh does it), or name them in "
                "RUNWATCH_CHROMIUM and RUNWATCH_CHROMEDRIVER"
            )
        self.profile = tempfile.mkdtemp(prefix="runwatch-chromium-")
        options = Options()
        options.binary_location = chromium
        for flag in (*FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        self.service = Service(executable_path=chromedriver, log_output=os.devnull)
        self.pids: dict[int, str | None] = {}  # pid -> its start time
        try:
            self.driver: Any = webdriver.Chrome(service=self.service, options=options)
        except BaseException:
            self._stop_pids()
            shutil.rmtree(self.profile, ignore_errors=True)
            raise

    def close(self, timeout: float = 10.0) -> None:
        """Quit the browser and the driver; then every process they were, by pid."""
        self._collect()
        try:
            self.driver.quit()
        finally:
            self._stop_pids(timeout)
            shutil.rmtree(self.profile, ignore_errors=True)

    def _collect(self) -> None:
        process = getattr(self.service, "process", None)
        if process is not None:
            for pid in (process.pid, *_descendants(process.pid)):
                self.pids[pid] = _started(pid)

    def _stop_pids(self, timeout: float = 10.0) -> None:
        if not self.pids:
            self._collect()
        process = getattr(self.service, "process", None)

        def left() -> list[int]:
            return [p for p, t in self.pids.items() if t is not None and _started(p) == t]

        deadline = time.monotonic() + timeout
        while left() and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in left():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if process is not None:
            process.wait(timeout)  # reaped: the driver is our child

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
