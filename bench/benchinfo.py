"""One line saying where and when a benchmark ran: figures mean little without it.

Benchmarks run as `python bench/<name>.py`, so this module imports as `benchinfo`.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime


def machine() -> str:
    """CPUs, CPU model, Python, date and load average, e.g. for the first line of a report."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or "?"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"machine: {os.cpu_count()} CPUs ({cpu}); Python {platform.python_version()} "
        f"({platform.python_implementation()}); {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average {load}"
    )
