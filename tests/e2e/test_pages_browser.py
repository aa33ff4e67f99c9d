"""serve's pages in a real browser: Debian's headless Chromium, driven by Selenium, against
serve's HTTP front over a service fed the sandbox-hang incident (to its fourth hung step,
its incident open) and a job whose labels, progress name and console error carry markup.
One browser for the module; every wait is on a condition, never a fixed sleep."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from markup_job import FRAME, RANKS_RUN, RUN, TEXTS, markup_job, ranks_job

from harness.browser import Browser
from harness.page_scenario import ScenarioServe, scenario_events
from runwatch.service.page_layout import REFRESH_JS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
UNTIL = 1773508000.0  # the sandbox hang's fourth hung step: incident 4 open
SANDBOX = "grpo-qwen2.5-7b-sandbox"
TOKEN = "page-test-token"
WAIT = 60.0  # generous: a loaded 2-core machine


@pytest.fixture(scope="module")
def served() -> Iterator[ScenarioServe]:
    events = scenario_events(["sandbox_hang"], until=UNTIL)
    events += markup_job(UNTIL - 700) + ranks_job(UNTIL - 700)
    with ScenarioServe(sorted(events, key=lambda e: e["ts"]), token=TOKEN) as serve:
        yield serve


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    subprocess.run([ROOT / "scripts" / "ensure_chromium.sh"], check=True, timeout=900)
    with Browser() as b:
        yield b


def wait_for(driver: Any, what: Callable[[Any], Any], message: str) -> Any:
    """Until `what` holds; an element found just before the page reloads itself is asked
    again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        driver, WAIT, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
    )
    return wait.until(what, message)


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def sign_in(driver: Any, token: str) -> None:
    field = wait_for(driver, lambda d: css(d, "input[name=token]"), "no sign-in form")[0]
    field.send_keys(token)
    field.submit()


def open_page(browser: Browser, served: ScenarioServe, path: str) -> Any:
    """Load `path`, signing in first if the page asks; wait until it is one of ours."""
    driver = browser.driver
    driver.get(served.url + path)
    wait_for(driver, lambda d: css(d, "header .brand"), f"{path}: not one of the pages")
    if css(driver, "input[name=token]"):
        sign_in(driver, TOKEN)
        wait_for(driver, lambda d: not css(d, "input[name=token]"), "still asked to sign in")
    return driver


def test_the_page_asks_for_the_token_once(browser: Browser, served: ScenarioServe) -> None:
    driver = browser.driver
    driver.delete_all_cookies()
    driver.get(served.url + "/?state=firing")
    sign_in(driver, "not-the-token")
    wait_for(driver, lambda d: "wrong token" in d.page_source, "a wrong token was taken")
    sign_in(driver, TOKEN)
    wait_for(driver, lambda d: css(d, "table#runs"), "the runs after signing in")
    assert driver.current_url.endswith("/?state=firing")  # back where it asked
    (cookie,) = driver.get_cookies()
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"]
    driver.get(served.url + "/ui/runs/" + SANDBOX)  # the cookie is enough from now on
    wait_for(driver, lambda d: css(d, "svg.timeline"), "the run's page")
    assert not css(driver, "input[name=token]")


def test_the_runs_filtered_with_their_alerts_and_incident_roots(
    browser: Browser, served: ScenarioServe
) -> None:
    driver = open_page(browser, served, "/")
    rows = {r.find_element("css selector", "td a").text: r for r in css(driver, "tr.run")}
    assert set(rows) == {SANDBOX, RUN, RANKS_RUN}
    sandbox = rows[SANDBOX].text
    assert "FIRING 3" in sandbox
    assert "3 / 400" in sandbox
    assert "#4 idle_gap_growing" in sandbox  # the open incidents' roots
    assert "#5 inference_idle_with_pending" in sandbox
    label = css(driver, "input[name=label]")[0]
    label.send_keys("team=reasoning")
    label.submit()
    wait_for(driver, lambda d: len(css(d, "tr.run")) == 1, "filtered to one run")
    assert css(driver, "tr.run td a")[0].text == SANDBOX
    assert "label=team%3Dreasoning" in driver.current_url


def test_the_incident_page_says_its_root_cause(browser: Browser, served: ScenarioServe) -> None:
    driver = open_page(browser, served, "/")
    css(driver, f"tr.run a[href*='incident%7C{SANDBOX}%7C5']")[0].click()
    wait_for(driver, lambda d: "Incident #5" in d.find_element("tag name", "h1").text, "#5")
    root = css(driver, ".root")[0].text
    assert "511 of 512 trajectories done, the last one (s4-t511) has sat in sandbox" in root
    assert "stuck_progress [Rollout]" in driver.find_element("tag name", "main").text
    css(driver, "h1 a")[0].click()  # to the run
    wait_for(driver, lambda d: css(d, "svg.timeline"), "the run's page from its incident")
    assert SANDBOX in driver.find_element("tag name", "h1").text


def test_the_run_page_draws_its_steps_idle_gaps_and_alerts(
    browser: Browser, served: ScenarioServe
) -> None:
    driver = open_page(browser, served, "/ui/runs/" + SANDBOX)
    names = [t.text for t in css(driver, "svg.timeline text.rowname")]
    assert names[:2] == ["steps", "GPU idle, work waiting"]
    assert "inference_idle_with_pending" in names
    assert len(css(driver, "svg.timeline rect.step")) == 4  # steps 1-3, and 4 running
    # the GPU sat idle while the last trajectory waited in the sandbox: at every step
    assert len(css(driver, "svg.timeline rect.idle")) == 4
    # one row per alert: the four times the sandbox hung are four spans on one row
    assert len(css(driver, "svg.timeline rect.alert.sev-critical")) == 4
    assert css(driver, "svg.timeline")[0].size["width"] > 600
    gaps = [td.text for td in css(driver, "table#steps td.idle-gap")]
    assert gaps == ["20m", "21m", "26m", "25m"]  # the published 20 -> 21 -> 26 minutes
    assert "s4-t511" in css(driver, "table#slowest")[0].text


def test_markup_from_a_job_is_text_on_every_page(browser: Browser, served: ScenarioServe) -> None:
    pages = ("/", f"/ui/runs/{RUN}", f"/ui/incidents/incident%7C{RUN}%7C1",
             f"/ui/incidents/incident%7C{RANKS_RUN}%7C1")  # fmt: skip
    for path in pages:
        driver = open_page(browser, served, path)
        assert css(driver, "img, iframe, object, embed") == [], path
        # no script but the page's own reload
        scripts = driver.execute_script("return [...document.scripts].map(s => s.text)")
        assert scripts in ([], [REFRESH_JS]), (path, scripts)
        assert css(driver, "svg[onload], svg svg") == [], path
        assert driver.execute_script("return typeof window.__pwned") == "undefined", path
        text = driver.find_element("tag name", "main").text
        if path == "/":
            for shown in TEXTS:
                assert shown in text, (path, shown)
        if RANKS_RUN in path:  # the evidence: a stack frame's function, as the process said
            assert css(driver, "pre.stack")[1].text.startswith(FRAME)
            assert "ranks 1, 2 (" in css(driver, ".evidence .group")[0].text  # grouped
    # in the picture too: the stuck bar's row, its whole name on hover
    driver = open_page(browser, served, f"/ui/runs/{RUN}")
    titles = driver.execute_script(
        "return [...document.querySelectorAll('svg.timeline title')].map(t => t.textContent)"
    )
    assert any(t.startswith(f"stuck_progress [{TEXTS[-1]}]") for t in titles), titles
    # and a long name wraps: the summaries keep room to be read, the table fits the page
    widths = driver.execute_script(
        "return [document.querySelector('main').clientWidth,"
        " document.querySelector('table.transitions').offsetWidth,"
        " ...[...document.querySelectorAll('table.transitions td.summary')]"
        ".map(td => td.offsetWidth)]"
    )
    main, table, *summaries = widths
    assert table <= main, widths
    assert len(summaries) == 3
    assert min(summaries) >= 0.3 * table, widths


def test_the_runs_page_refreshes_itself(browser: Browser, served: ScenarioServe) -> None:
    driver = open_page(browser, served, "/")
    assert "late-run" not in driver.page_source
    start = served.clock.now
    src = {"component": "trainer", "host": "node-7", "pid": 7}
    served.feed(
        [{"v": 1, "id": f"late-{i}", "ts": start + i, "run": "late-run", "src": src,
          "kind": "run.started" if i == 0 else "heartbeat"} for i in range(3)]
    )  # fmt: skip
    wait_for(driver, lambda d: "late-run" in d.page_source, "the page did not refresh itself")


def test_a_form_being_filled_in_is_not_reloaded_away(
    browser: Browser, served: ScenarioServe
) -> None:
    driver = open_page(browser, served, "/")
    label = css(driver, "input[name=label]")[0]
    label.send_keys("team=rea")
    driver.execute_script("document.activeElement.blur()")  # typed, then looked away

    def held(d: Any) -> int:
        return int(d.execute_script("return document.documentElement.dataset.refreshHeld || 0"))

    wait_for(driver, lambda d: held(d) >= 1, "the page did not hold its reload")
    assert css(driver, "input[name=label]")[0].get_attribute("value") == "team=rea"
    label.clear()
    driver.execute_script("document.activeElement.blur()")  # left as it came: reloads again
    wait_for(driver, lambda d: held(d) == 0, "the page did not reload once the form was left")


def test_a_silence_set_and_removed_from_the_page(browser: Browser, served: ScenarioServe) -> None:
    driver = open_page(browser, served, "/ui/silences")
    assert "no silences in force" in driver.page_source
    form = css(driver, "form#add-silence")[0]
    form.find_element("name", "run").send_keys(SANDBOX)
    form.find_element("name", "rule").send_keys("stuck_progress")
    form.find_element("name", "comment").send_keys("known: the sandbox pool is down")
    form.find_element("css selector", "button").click()
    wait_for(driver, lambda d: "silence 1 set" in d.page_source, "the silence was not set")
    (row,) = css(driver, "tr.silence")
    assert SANDBOX in row.text
    assert "stuck_progress" in row.text
    assert "known: the sandbox pool is down" in row.text
    row.find_element("css selector", "button").click()
    wait_for(driver, lambda d: "silence 1 removed" in d.page_source, "not removed")
    assert css(driver, "tr.silence") == []
