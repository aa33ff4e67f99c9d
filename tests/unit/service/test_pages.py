"""serve's pages without a browser: what a job can put on them is text (in HTML and SVG, in
text and attributes), the filters, the sign-in with its cookie, the form token, and the
headers that forbid scripts. The pages are called through the HTTP front's WSGI app, over a
service fed the sandbox-hang incident and a job whose every free text carries markup
(tests/markup_job.py); the browser test (tests/e2e/test_pages_browser.py) loads them."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

import pytest
from markup_job import (
    ERROR,
    FRAME,
    LABELS,
    METRIC,
    PHASE,
    RANKS_RUN,
    RUN,
    SCRIPT,
    TRAJ,
    markup_job,
    no_markup_of_the_job,
    ranks_job,
)

from harness.page_scenario import ScenarioServe, scenario_events
from runwatch.service import page_incident, pages
from runwatch.service.http import App
from runwatch.service.markup import esc

UNTIL = 1773508000.0  # the sandbox hang's fourth hung step, its incident open
SANDBOX = "grpo-qwen2.5-7b-sandbox"
TOKEN = "s3cret-token"

pytestmark = pytest.mark.slow  # a service fed two hours of an incident: `make test`


@pytest.fixture(scope="module")
def scenario() -> Iterator[ScenarioServe]:
    events = scenario_events(["sandbox_hang"], until=UNTIL)
    events += markup_job(UNTIL - 700) + ranks_job(UNTIL - 700)
    with ScenarioServe(sorted(events, key=lambda e: e["ts"]), http=False) as served:
        yield served


class Client:
    """Requests to the WSGI app, as a browser would send them (its cookie kept)."""

    def __init__(self, app: App) -> None:
        self.app, self.cookie = app, ""

    def __call__(
        self, method: str, path: str, form: dict[str, str] | None = None, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        body = urlencode(form or {}).encode()
        path, _, query = path.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method, "PATH_INFO": unquote(path).encode().decode("latin-1"),
            "QUERY_STRING": query, "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body), "HTTP_HOST": "127.0.0.1:8787",
            "HTTP_COOKIE": self.cookie, **{f"HTTP_{k.upper()}": v for k, v in headers.items()},
        }  # fmt: skip
        got: dict[str, Any] = {}

        def start_response(status: str, head: list[tuple[str, str]]) -> None:
            got["status"], got["headers"] = int(status.split()[0]), head

        out = b"".join(self.app(environ, start_response)).decode()
        head = dict(got["headers"])
        for name, value in got["headers"]:
            if name == "Set-Cookie":
                self.cookie = value.split(";")[0]
        return got["status"], head, out


# -- the pages through the HTTP front ---------------------------------------------------------


def test_the_runs_page_is_a_table_of_the_runs_with_their_alerts_and_roots(
    scenario: ScenarioServe,
) -> None:
    status, head, page = Client(App(scenario.service, None))("GET", "/")
    assert status == 200
    assert head["Content-Type"] == "text/html; charset=utf-8"
    csp = head["Content-Security-Policy"]
    assert "default-src 'none'" in csp
    # no script but the page's own reload, by a nonce that is new with every answer
    nonce = re.fullmatch(r".*; script-src 'nonce-([\w-]{20,})'", csp)
    assert nonce is not None, csp
    assert page.count("<script") == 1
    assert f'<script nonce="{nonce[1]}" data-every="5">' in page
    assert (
        nonce[1]
        not in Client(App(scenario.service, None))("GET", "/")[1]["Content-Security-Policy"]
    )
    assert "unsafe" not in csp
    assert "'self'" not in csp.split("script-src")[1]
    assert head["X-Frame-Options"] == "DENY"
    assert '<table id="runs">' in page
    assert "<pre" not in page
    row = page[page.index(f'href="/ui/runs/{SANDBOX}"') :].split("</tr>")[0]
    assert "FIRING 3" in row
    assert "3 / 400" in row
    assert "inference_idle_with_pending" in row
    # two incidents open: the growing gap, and the fourth hang with its frozen bar
    assert f'href="/ui/incidents/{quote(f"incident|{SANDBOX}|4", safe="")}"' in row
    assert "#5 inference_idle_with_pending" in row
    assert '<meta http-equiv="refresh"' in page
    no_markup_of_the_job(page)
    for key, value in LABELS.items():
        assert esc(f"{key}={value}") in page


def test_filtered_by_label_and_state(scenario: ScenarioServe) -> None:
    get = Client(App(scenario.service, None))
    _, _, page = get("GET", "/?" + urlencode({"label": "team=reasoning", "state": "firing"}))
    assert SANDBOX in page
    assert f"/ui/runs/{RUN}" not in page
    _, _, page = get("GET", "/?" + urlencode({"label": f"team={SCRIPT}"}))
    assert f"/ui/runs/{RUN}" in page
    assert f"/ui/runs/{SANDBOX}" not in page
    no_markup_of_the_job(page)


def test_the_job_pages_show_its_markup_as_text(scenario: ScenarioServe) -> None:
    get = Client(App(scenario.service, None))
    status, _, run_page = get("GET", f"/ui/runs/{RUN}")
    assert status == 200
    no_markup_of_the_job(run_page)
    assert esc(ERROR) in run_page
    for text in (METRIC, TRAJ, PHASE):  # the steps' timing, the slowest trajectories
        assert esc(text) in run_page, text
    assert "<svg" in run_page
    incident = f"incident|{RUN}|1"
    status, _, incident_page = get("GET", "/ui/incidents/" + quote(incident, safe=""))
    assert status == 200
    no_markup_of_the_job(incident_page)
    assert "Root cause" in incident_page
    assert esc(ERROR) in incident_page


def test_the_incident_page_names_its_root_and_symptoms(scenario: ScenarioServe) -> None:
    get = Client(App(scenario.service, None))
    status, _, page = get("GET", "/ui/incidents/" + quote(f"incident|{SANDBOX}|5", safe=""))
    assert status == 200
    root = page[page.index("Root cause") : page.index("Symptoms")]
    assert "inference_idle_with_pending" in root
    assert "the last one (s4-t511) has sat in sandbox" in root
    assert "stuck_progress [Rollout]" in page[page.index("Symptoms") :]
    assert get("GET", "/ui/incidents/incident%7Cnope%7C1")[0] == 404
    assert get("GET", "/ui/incidents/nope")[0] == 404


def test_the_incident_page_shows_its_evidence_the_stacks_grouped(scenario: ScenarioServe) -> None:
    get = Client(App(scenario.service, None))
    status, _, page = get("GET", "/ui/incidents/" + quote(f"incident|{RANKS_RUN}|1", safe=""))
    assert status == 200
    assert "ranks_stalled" in page[page.index("Root cause") : page.index("Symptoms")]
    evidence = page[page.index("<h2>Evidence</h2>") : page.index("<h2>Transitions</h2>")]
    groups = re.findall(r'<div class="group"><b>([^<]*)</b>', evidence)
    # the two ranks in one stack are one group, the larger first
    assert groups == ["ranks 1, 2 (trainer@node-1/101, trainer@node-2/102)",
                      "ranks 0 (trainer@node-0/100)"]  # fmt: skip
    stacks = re.findall(r'<pre class="stack">([^<]*)</pre>', evidence)
    assert stacks[1].splitlines()[0].startswith(esc(FRAME))  # innermost first, as text
    no_markup_of_the_job(page)
    assert get("GET", f"/ui/runs/{SANDBOX}-not")[0] == 404


def test_with_a_token_the_page_asks_once_and_keeps_a_strict_http_only_cookie(
    scenario: ScenarioServe,
) -> None:
    browser = Client(App(scenario.service, TOKEN))
    status, _, page = browser("GET", "/?state=firing")
    assert status == 401
    assert 'type="password"' in page
    assert SANDBOX not in page
    assert "Content-Security-Policy" in browser("GET", "/")[1]
    status, _, page = browser("POST", "/ui/login", {"token": "wrong", "next": "/"})
    assert status == 401
    assert "wrong token" in page
    status, head, _ = browser("POST", "/ui/login", {"token": TOKEN, "next": "/?state=firing"})
    assert status == 303
    assert head["Location"] == "/?state=firing"
    cookie = SimpleCookie(head["Set-Cookie"])["runwatch_session"]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Strict"
    assert cookie["path"] == "/"
    assert TOKEN not in cookie.value
    status, _, page = browser("GET", "/")
    assert status == 200
    assert SANDBOX in page
    # the API does not take the page's cookie: it wants the bearer token
    assert browser("GET", "/v1/runs")[0] == 401


def test_sign_in_sends_nowhere_but_a_page_of_ours(scenario: ScenarioServe) -> None:
    browser = Client(App(scenario.service, TOKEN))
    for nxt in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
        status, head, _ = browser("POST", "/ui/login", {"token": TOKEN, "next": nxt})
        assert (status, head["Location"]) == (303, "/")


def test_a_form_needs_the_session_its_form_token_and_our_origin(scenario: ScenarioServe) -> None:
    app = App(scenario.service, TOKEN)
    browser = Client(app)
    browser("POST", "/ui/login", {"token": TOKEN, "next": "/"})
    _, _, page = browser("GET", "/")
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert csrf is not None
    stranger = Client(app)
    assert stranger("POST", "/ui/logout", {"csrf": csrf.group(1)})[0] == 401
    assert browser("POST", "/ui/logout", {"csrf": "0" * 64})[0] == 403
    assert browser("POST", "/ui/logout", {"csrf": csrf.group(1)}, origin="http://evil")[0] == 403
    status, head, _ = browser(
        "POST", "/ui/logout", {"csrf": csrf.group(1)}, origin="http://127.0.0.1:8787"
    )
    assert status == 303
    assert "Max-Age=0" in head["Set-Cookie"]


def test_the_run_page_shows_the_steps_and_idle_gaps_from_the_history(
    scenario: ScenarioServe,
) -> None:
    get = Client(App(scenario.service, None))
    deadline = time.monotonic() + 60  # the history is written a second or so behind: until
    # it holds the fourth gap (the one growing now), the page shows less
    while (page := get("GET", f"/ui/runs/{SANDBOX}")[2]).count('class="idle"') < 4:
        assert time.monotonic() < deadline, page[-2000:]
        time.sleep(0.1)
    steps = page[page.index('<table id="steps">') :].split("</table>")[0]
    idle = re.findall(r'<td class="idle-gap">([^<]*)</td>', steps)
    assert idle == ["20m", "21m", "26m", "25m"]  # the published gaps, and step 4's so far
    assert steps.count("<tr>") == 5  # the header and steps 1-4
    assert "running" in steps.split("<tr>")[-1]
    assert "s4-t511" in page  # the slowest trajectories: the hung one
    incidents = page[page.index('<table id="incidents">') :].split("</table>")[0]
    assert incidents.count("<tr>") == 6  # the header and incidents 1-5, as runwatch show
    assert "<td>open</td><td>inference_idle_with_pending</td><td>stuck_progress</td>" in incidents
    assert "pending, last in sandbox" in page


def test_silences_set_and_removed_from_the_page(scenario: ScenarioServe, tmp_path: Path) -> None:
    browser = Client(App(scenario.service, None, silences=tmp_path / "ledger.sqlite"))
    _, _, page = browser("GET", "/ui/silences")
    assert "no silences in force" in page
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert csrf is not None
    form = {"csrf": csrf[1], "run": RUN, "rule": "", "for": "90 minutes", "comment": SCRIPT}
    status, _, page = browser("POST", "/ui/silences", form)
    assert status == 400
    assert "is not a duration" in page
    status, head, _ = browser("POST", "/ui/silences", {**form, "for": "1h30m"})
    assert status == 303
    status, _, page = browser("GET", head["Location"])
    assert "silence 1 set" in page
    row = page[page.index('<tr class="silence">') :].split("</tr>")[0]
    assert RUN in row
    assert "every rule" in row
    no_markup_of_the_job(page)
    assert esc(SCRIPT) in row
    status, head, _ = browser("POST", "/ui/silences/1/remove", {"csrf": csrf[1]})
    assert (status, head["Location"]) == (303, "/ui/silences?removed=1")
    assert "no silences in force" in browser("GET", "/ui/silences")[2]
    assert browser("POST", "/ui/silences/1/remove", {"csrf": csrf[1]})[0] == 404
    # without a ledger (no --slack-config) the page says why there are none
    _, _, page = Client(App(scenario.service, None))("GET", "/ui/silences")
    assert "no Slack notifier" in page


def test_resume_from_the_run_page(scenario: ScenarioServe) -> None:
    browser = Client(App(scenario.service, None))
    _, _, page = browser("GET", f"/ui/runs/{RUN}")
    assert f'action="/ui/runs/{RUN}/resume"' in page
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert csrf is not None
    form = {"csrf": csrf[1], "reason": "checked: the sandbox is back"}
    status, head, _ = browser("POST", f"/ui/runs/{RUN}/resume", form)
    assert (status, head["Location"]) == (303, f"/ui/runs/{RUN}")
    _, _, page = browser("GET", f"/ui/runs/{RUN}")
    assert "resume</button>" not in page  # every firing alert lifted
    assert "by runwatch page" in page


def test_a_run_gone_from_the_live_state_is_shown_from_the_history(
    scenario: ScenarioServe,
) -> None:
    t0, src = scenario.clock.now, {"component": "rollout", "host": "node-8", "pid": 8}
    events = [("run.started", {"labels": {"team": "gone"}}),
              ("component.failed", {"error": "OSError: sandbox pool gone", "how": "exception"}),
              ("run.finished", {"status": "failed"})]  # fmt: skip
    scenario.feed(
        [{"v": 1, "id": f"gone-{i}", "ts": t0 + i, "run": "gone-run", "kind": kind, "src": src,
          **fields} for i, (kind, fields) in enumerate(events)]
    )  # fmt: skip
    scenario.wait_for_history()
    assert scenario.service.evict(scenario.clock.now, keep_finished_s=0) == 1
    get = Client(App(scenario.service, None))
    status, _, page = get("GET", "/ui/runs/gone-run")
    assert status == 200
    assert '<span class="badge failed">failed</span>' in page
    assert "component_failed" in page
    timeline = through_api(scenario, "/v1/history/runs/gone-run")
    incident = page_incident.incident_from_history("incident|gone-run|1", timeline, t0 + 10)
    assert incident is not None
    assert "OSError: sandbox pool gone" in incident
    assert "From the history" in incident
    assert page_incident.incident_from_history("incident|gone-run|9", timeline, t0) is None


def through_api(scenario: ScenarioServe, path: str) -> Any:
    status, answer = pages.through(App(scenario.service, None).answer, None)("GET", path, b"")
    assert status == 200, answer
    return answer


def test_pages_with_forms_to_fill_in_carry_no_script(scenario: ScenarioServe) -> None:
    """The silences and the sign-in do not reload themselves: no script, none allowed."""
    for app, path in ((App(scenario.service, None), "/ui/silences"),
                      (App(scenario.service, TOKEN), "/")):  # fmt: skip
        status, head, page = Client(app)("GET", path)
        assert status in (200, 401)
        assert "<script" not in page
        assert "script-src" not in head["Content-Security-Policy"]  # default-src 'none'
