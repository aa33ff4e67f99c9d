"""`make docs`: the screenshots of serve's pages in the README and docs/serve.md, taken by the
browser test's tooling (headless Chromium through Selenium) over serve's HTTP front fed the
bundled scenarios on their own clock, at the moment the sandbox hang's fourth step hangs.

    python -m harness.docs.screenshot docs/images
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.browser import Browser
from harness.page_scenario import ScenarioServe, scenario_events

#: the runs on the page, as they stood at `UNTIL`
SCENARIOS = ("sandbox_hang", "zero_reward", "orchestrator_dies", "rank_divergence",
             "healthy_long_steps")  # fmt: skip
UNTIL = 1773508000.0  # 2026-03-14 17:06:40Z: the sandbox hang's fourth hung step
RUN = "grpo-qwen2.5-7b-sandbox"
#: file -> (page, window height): the runs; one run's timeline
SHOTS = {"serve-page.png": ("/", 760), "serve-run.png": (f"/ui/runs/{RUN}", 900)}


def take(out: Path, width: int = 1280) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    made = []
    with ScenarioServe(scenario_events(SCENARIOS, until=UNTIL)) as served:
        for name, (path, height) in SHOTS.items():
            with Browser(width, height) as browser:
                browser.driver.get(served.url + path)
                browser.driver.find_element("css selector", "main h1")  # loaded
                browser.driver.save_screenshot(str(out / name))
            made.append(out / name)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder for the PNG files")
    for path in take(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
