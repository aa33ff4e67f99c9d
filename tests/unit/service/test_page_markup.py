"""The pages' markup without a server: what a job can put on them is text (in HTML and SVG,
text and attributes), the timeline picture's spans, and the runs filter (label, state)."""

from __future__ import annotations

import re

import pytest
from markup_job import ATTR, ERROR, PROGRESS, SCRIPT, no_markup_of_the_job

from runwatch.service import page_svg
from runwatch.service.markup import Markup, esc, h
from runwatch.service.page_views import MAX_ROWS, RunFilter, run_view, runs_view

# -- markup -----------------------------------------------------------------------------------


def test_text_and_attributes_are_escaped_and_markup_is_not() -> None:
    made = h("a", ATTR, SCRIPT, h("b", "x"), None, href=f"/r{ATTR}", title=None, hidden=True)
    assert made == (
        '<a href="/r&quot;&gt;&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" hidden>'
        "&quot;&gt;&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;"
        "&lt;script&gt;window.__pwned=2&lt;/script&gt;<b>x</b></a>"
    )
    assert esc(Markup("<b>")) == "<b>"
    assert h("input", value="'") == '<input value="&#x27;">'


def test_the_timeline_picture_escapes_a_subject_in_text_and_title() -> None:
    spans = page_svg.alert_spans(
        [
            {"ts": 100.0, "rule": "stuck_progress", "subject": PROGRESS, "state": "firing",
             "severity": "warning", "summary": ERROR},
            {"ts": 160.0, "rule": "stuck_progress", "subject": PROGRESS, "state": "resolved"},
            {"ts": 170.0, "rule": "stuck_progress", "subject": PROGRESS, "state": "firing",
             "severity": "warning", "summary": "again"},
        ]
    )  # fmt: skip
    assert [(s.start, s.end) for s in spans] == [(100.0, 160.0), (170.0, None)]
    svg = page_svg.timeline(
        90.0, 200.0, [{"step": 1, "start_ts": 95.0, "end_ts": 150.0}],
        [{"start_ts": 120.0, "end_ts": 140.0, "seconds": 20.0}], spans,
    )  # fmt: skip
    no_markup_of_the_job(svg.replace("<svg viewBox", ""))
    assert esc(PROGRESS) in svg  # the whole name, in the row's <title>
    assert svg.count('class="alert sev-warning"') == 2  # one row, two spans
    assert svg.count('class="idle"') == 1


# -- filters ----------------------------------------------------------------------------------

RUNS = [
    {"run": "a", "status": "running", "labels": {"team": "rl", "gpu": "h100"}, "firing_count": 1},
    {"run": "b", "status": "running", "labels": {"team": "rl"}, "firing_count": 0},
    {"run": "c", "status": "failed", "labels": {"team": "infra", "gpu": "a100"}},
]


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ({}, "abc"),
        ({"label": ["team=rl"]}, "ab"),
        ({"label": ["gpu"]}, "ac"),
        ({"label": ["team=rl, gpu"]}, "a"),
        ({"label": ["team=rl", "gpu=h100"]}, "a"),
        ({"label": ["team=nobody"]}, ""),
        ({"state": ["firing"]}, "a"),
        ({"state": ["quiet"]}, "b"),
        ({"state": ["failed"]}, "c"),
        ({"state": ["running"], "label": ["team=rl"]}, "ab"),
    ],
)
def test_the_runs_filter(query: dict[str, list[str]], kept: str) -> None:
    flt = RunFilter.from_query(query)
    assert "".join(r["run"] for r in RUNS if flt.keeps(r)) == kept
    page = runs_view(RUNS, [], [], [], flt, 0.0)
    assert len(re.findall(r'<tr class="run">', page)) == len(kept)


def test_the_runs_page_lists_the_latest_runs_and_counts_the_rest() -> None:
    many = [{"run": f"r{i}", "status": "running", "last_ts": float(i)} for i in range(MAX_ROWS + 7)]
    page = runs_view(many, [], [], [], RunFilter(), 0.0)
    assert page.count('<tr class="run">') == MAX_ROWS
    assert f'href="/ui/runs/r{MAX_ROWS + 6}"' in page  # the newest first
    assert 'href="/ui/runs/r0"' not in page
    assert "and 7 more, seen longer ago" in page


def test_a_long_run_lists_its_latest_steps() -> None:
    steps = [{"step": i, "start_ts": 100.0 * i, "end_ts": 100.0 * i + 90, "duration_s": 90.0}
             for i in range(1, 131)]  # fmt: skip
    run = {"run": "long-run", "step": 130, "events": 1000, "last_ts": 13100.0}
    page = run_view(run, [], {"steps": steps}, now=13100.0)
    table = page[page.index('<table id="steps">') :].split("</table>")[0]
    rows = re.findall(r'<td class="num">(\d+)</td>', table)
    assert rows == [str(i) for i in range(81, 131)]  # the latest 50, oldest first
    assert "the 80 steps before these are on the picture" in table
    assert page.count('class="step step') == 130  # the picture: every step


@pytest.mark.parametrize(("status", "said"),
                         [("running", "running"), ("killed", "unfinished"),
                          ("failed", "unfinished"), ("ok", "unfinished")])  # fmt: skip
def test_an_open_step_is_running_only_while_its_run_is(status: str, said: str) -> None:
    """As `runwatch show` says it (tests/unit/commands/test_show_text.py): a killed job's
    last step is not still running, in the steps table, the picture or the runs table."""
    steps = [{"step": 1, "start_ts": 100.0, "end_ts": 190.0, "duration_s": 90.0},
             {"step": 2, "start_ts": 190.0, "end_ts": None, "duration_s": None}]  # fmt: skip
    run = {"run": "my-job", "status": status, "step": 1, "events": 38, "last_ts": 215.0}
    page = run_view(run, [], {"steps": steps}, now=300.0)
    table = page[page.index('<table id="steps">') :].split("</table>")[0]
    open_row = table.split('<td class="num">2</td>')[1].split("</tr>")[0]
    other = ({"running", "unfinished"} - {said}).pop()
    assert f"<td>{said}</td>" in open_row
    assert other not in open_row
    assert f"step 2: {said}" in page  # the picture
    assert f"step 2: {other}" not in page
    runs = runs_view([run], [], [], [], RunFilter(), 300.0)
    listed = runs[runs.index('<table id="runs">') :].split("</table>")[0]
    assert f'class="badge {status}">{status}<' in listed
    assert ("running" in listed) == (status == "running")


def test_the_time_axis_labels_stay_clear_of_its_name() -> None:
    """A tick just after the picture's start would print its time over the axis's "UTC"."""
    for start in (1773500399.0, 1773500395.5, 1773500400.0):  # a tick at 1s, 4.5s, 0s in
        svg = page_svg.timeline(start, start + 45.0)
        labels = re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)" '
                            r'class="ticklabel">([^<]*)</text>', svg)  # fmt: skip
        utc = [float(x) for x, _, text in labels if text == "UTC"]
        assert utc == [page_svg.LEFT - 8]
        for x, anchor, text in labels:
            if text != "UTC":
                assert anchor == "middle"
                # about 6.6 px a character at the labels' 11 px: half of it left of x
                assert float(x) - 3.3 * len(text) >= page_svg.LEFT - 4, (start, text, x)


def test_alert_transitions_newest_first_whatever_order_they_came_in() -> None:
    def alert(ts: float, run: str) -> dict[str, object]:
        return {"ts": ts, "run": run, "rule": "zero_reward", "state": "firing",
                "severity": "critical", "summary": f"at {ts:g}"}  # fmt: skip

    # the service's order: one run's transitions, then another's with earlier times
    came = [alert(120.0, "a"), alert(130.0, "a"), alert(100.0, "b"), alert(125.0, "b")]
    page = runs_view([{"run": "a"}, {"run": "b"}], [], [], came, RunFilter(), 200.0)
    assert re.findall(r'class="summary">at (\d+)<', page) == ["130", "125", "120", "100"]
