"""The web UI as a user sees it: layout, numbers and charts, in a real headless Chromium against a real
service (the fixtures and helpers of ``test_webapp.py``)."""

from __future__ import annotations

import httpx
import pytest

from adlrec.service import create_app
from tests.integration import test_webapp
from tests.integration.test_webapp import AUTH, STEEP, attr, recompute, register, rows, text, texts, wait_for
from tests.service_helpers import LiveServer, ManualClock

browser = test_webapp.browser  # the fixtures: one Chromium for this module, a fresh service per test
service = test_webapp.service

LONG_JOB = "j" * 128  # the longest id the API takes, and nothing to break it at
LONG_NODE = "n" * 128


def sideways(browser):
    """How far the page scrolls sideways (0: it fits the window)."""
    return browser.execute_script(
        "const e = document.documentElement; return Math.max(0, e.scrollWidth - e.clientWidth);"
    )


def boxes(browser, selector):
    """Each match's box in its SVG's own units (getBBox): the chart's coordinates, whatever it is scaled to."""
    return browser.execute_script(
        """return [...document.querySelectorAll(arguments[0])].map(e => {
             const b = e.getBBox(); return {x: b.x, y: b.y, right: b.x + b.width, bottom: b.y + b.height, text: e.textContent};
           });""",
        selector,
    )


def test_long_ids_and_node_names_wrap_and_the_page_never_scrolls_sideways(service, browser):
    srv, http = service
    assert http.put(f"/nodes/{LONG_NODE}", json={"cores": 8, "memory_mb": 8000}, headers=AUTH).status_code == 200
    assert http.put("/nodes/one", json={"cores": 1, "memory_mb": 1024}, headers=AUTH).status_code == 200
    register(http, LONG_NODE, LONG_JOB, STEEP)
    register(http, LONG_NODE, "short", STEEP)
    register(http, "one", "solo", [10.0, 20.0])
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=60#job/{LONG_JOB}")
    wait_for(browser, lambda d: LONG_JOB in rows(d) and (text(d, "#job-title") or "").endswith(LONG_JOB), "the job")
    wait_for(browser, lambda d: texts(d, "#history-table tr[data-plan]"), "the plan history")
    # the id's cell kept `white-space: nowrap`: the table, and the page, were about 2,600 px wide
    assert sideways(browser) == 0
    # and on a wide screen the ids wrap in their cells: no table needs scrolling inside its box to show its last column
    wide = "return [...document.querySelectorAll('.scroll')].filter(e => e.scrollWidth > e.clientWidth).length"
    assert browser.execute_script(wide) == 0
    # a phone: the tables scroll inside their own boxes, the page does not
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 375, "height": 800, "deviceScaleFactor": 1, "mobile": True}
    )
    try:
        browser.refresh()
        wait_for(browser, lambda d: LONG_JOB in rows(d) and texts(d, "#history-table tr[data-plan]"), "the page again")
        assert browser.execute_script("return innerWidth") == 375
        assert sideways(browser) == 0
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    # one core is "1 core" (it said "1 cores")
    assert " · 1 core · " in text(browser, "article[data-node='one'] h3 .meta")


def test_small_and_huge_throughputs_and_a_curve_of_one_point_are_drawn_readably(service, browser):
    srv, http = service
    assert http.put("/nodes/gpu-n", json={"cores": 16, "memory_mb": 16000}, headers=AUTH).status_code == 200
    register(http, "gpu-n", "tiny", [0.001, 0.002, 0.003, 0.0031])
    r = http.post(
        "/jobs",
        json={"job_id": "huge", "node": "gpu-n", "curve": [1e6, 5e7, 1e8, 1e9], "min_workers": 3},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    register(http, "gpu-n", "one", [7.05])
    recompute(http)
    r = http.post("/jobs/tiny/heartbeat", json={"throughput": 0.0025, "workers": 2}, headers=AUTH)
    assert r.status_code == 200, r.text

    browser.get(f"{srv.url}/ui/?refresh=60#job/tiny")
    wait_for(browser, lambda d: texts(d, "#job circle.measured"), "the tiny job's measured point")
    measured_cell = "article.node tr[data-job='tiny'] td:nth-child(5)"
    assert text(browser, measured_cell) == "0.0025"  # was "0"
    assert texts(browser, "#job table.points tbody td")[1] == "0.0025"
    # the y axis of a curve under 1 sample/s: its ticks read "0, 0, 1, 1, 1" over a flat line
    y_ticks = texts(browser, "#job svg text.tick[text-anchor='end']")
    assert 5 <= len(y_ticks) <= 7 and len(set(y_ticks)) == len(y_ticks), y_ticks  # 4 to 6 steps
    used = [
        float(p.split(",")[1])
        for p in browser.execute_script(
            "return document.querySelector('#job polyline.used').getAttribute('points')"
        ).split()
    ]
    assert max(used) - min(used) > 100  # the curve spans the plot (of 212 units), not a line at its foot

    browser.get(f"{srv.url}/ui/?refresh=60#job/huge")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job huge" and texts(d, "#job .assigned-label"), "the job")
    # every label inside the 620-unit-wide chart: '1,200,000,000' ran past its left edge, and the plan's
    # label past its right one when the plan is the curve's last count
    for label in boxes(browser, "#job svg text:not([transform])"):  # getBBox ignores the rotation of the y title
        assert label["x"] >= 0 and label["right"] <= 620, label
    (legend,) = boxes(browser, "#job svg g.legend")
    top_gridline = min(b["y"] for b in boxes(browser, "#job svg line.grid"))
    assert legend["bottom"] <= top_gridline  # the legend sat on the plot, over the rising curve

    browser.get(f"{srv.url}/ui/?refresh=60#job/one")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job one", "the job")
    # a curve of one point: the polyline has no length, so nothing was drawn at all
    wait_for(browser, lambda d: texts(d, "#job circle.used-dot"), "the curve's one point")
    # a top of 7.4 (5% over the peak): four steps of 2 (three of 2.5 reach lower, but too few lines to read by)
    assert texts(browser, "#job svg text.tick[text-anchor='end']") == ["0", "2", "4", "6", "8"]


def read_at(browser):
    """The status line's 'read at' clock: it changes with every refresh that read the service."""
    return (text(browser, "#status") or "").rpartition("read at ")[2]


def next_refresh(browser, times=2):
    """Wait for the page to refresh `times` more times (the status line is redrawn by every refresh)."""
    for _ in range(times):
        before = read_at(browser)
        wait_for(browser, lambda d, before=before: read_at(d) not in ("", before), "a refresh")


def test_a_refresh_keeps_focus_selection_and_the_node_menu(service, browser):
    srv, http = service
    register(http, "gpu-f", "alpha", STEEP)
    register(http, "gpu-f", "beta", STEEP)
    register(http, "gpu-g", "gamma", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=1")
    wait_for(browser, lambda d: set(rows(d)) == {"alpha", "beta", "gamma"}, "the three jobs")
    menu = "return document.querySelector('#history-pick:not([hidden]) select, #history-chart select')"
    wait_for(browser, lambda d: d.execute_script(menu), "the node menu")

    # a text selection in a node card outlives refreshes that read nothing new (each one cleared it)
    browser.execute_script(
        """const r = document.createRange(); r.selectNodeContents(document.querySelector("[data-node='gpu-f'] h3"));
           getSelection().removeAllRanges(); getSelection().addRange(r);"""
    )
    browser.execute_script(menu.replace("return ", "window.__menu = "))
    next_refresh(browser)
    assert browser.execute_script("return getSelection().toString()").startswith("gpu-f")
    # the keyboard's focus on a job's link outlives a refresh that redraws its card (it fell back to the page)
    browser.execute_script("document.querySelector(\"[data-node='gpu-f'] tr[data-job='beta'] a\").focus()")
    r = http.post("/jobs/beta/heartbeat", json={"throughput": 77.0, "workers": 2}, headers=AUTH)
    assert r.status_code == 200, r.text
    beta_measured = "[data-node='gpu-f'] tr[data-job='beta'] td:nth-child(5)"
    wait_for(browser, lambda d: text(d, beta_measured) == "77", "the new measurement")
    focused = browser.execute_script(
        "const e = document.activeElement; return [e.tagName, e.getAttribute('href'), e.closest('[data-node]')?.dataset.node]"
    )
    assert focused == ["A", "#job/beta", "gpu-f"]
    # the node menu of the history chart is the same element after a redraw (drawn anew, an open menu closed)
    register(http, "gpu-f", "delta", STEEP)
    (plan,) = recompute(http)
    wait_for(browser, lambda d: str(plan["plan_id"]) in texts(d, "#history-table tr[data-plan]", "data-plan"), "it")
    assert browser.execute_script("return window.__menu.isConnected")


def test_times_not_of_today_carry_their_date(tmp_path, browser):
    # a plan stored at noon UTC on 15 January 2027 (the same date in any time zone within 11 hours of UTC)
    settings = test_webapp.service_settings(tmp_path)
    clock = ManualClock(1_800_014_400.0)
    with LiveServer(create_app(settings, clock=clock)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        register(http, "gpu-h", "old", STEEP)
        recompute(http)
        browser.get(f"{srv.url}/ui/?refresh=60")
        wait_for(browser, lambda d: texts(d, "#history-table tr[data-plan]"), "the plan")
        # it said "at 12:00:00" as if of this morning
        assert "15 Jan 2027" in text(browser, "[data-node='gpu-h'] h3 .meta")
        assert "15 Jan 2027" in texts(browser, "#history-table tr[data-plan] td")[2]


def test_the_picked_job_and_a_lost_service_are_told_without_colour(service, browser):
    srv, http = service
    register(http, "gpu-i", "mine", STEEP)
    register(http, "gpu-i", "other", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=60#job/mine")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job mine" and rows(d), "the job")
    # the picked job's row was only tinted: a screen reader is told it is the current one
    current = "return [...document.querySelectorAll('tr[aria-current=true]')].map(e => e.dataset.job)"
    assert browser.execute_script(current) == ["mine"]
    # and seen: its row is tinted, the others not
    tint = "return [...arguments].map(id => getComputedStyle(document.querySelector(`tr[data-job='${id}']`)).backgroundColor)"
    mine, other = browser.execute_script(tint, "mine", "other")
    assert mine != other and other == "rgba(0, 0, 0, 0)", (mine, other)
    # picking another job moves the mark to its row (the nodes' cards, unchanged, were not drawn again)
    browser.execute_script("location.hash = '#job/other'")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job other", "the other job's page")
    assert browser.execute_script(current) == ["other"]
    # the banner that says the service cannot be read is announced when it appears
    assert browser.execute_script("return document.getElementById('error').getAttribute('role')") == "alert"


def test_a_job_no_plan_holds_is_not_said_to_have_a_plan(service, browser):
    srv, http = service
    register(http, "tiny", "stray", [10.0, 20.0, 30.0])  # no recompute yet (the debounce is an hour)
    told = http.get("/jobs/stray").json()["assignment"]
    assert told["plan_id"] is None and told["workers"] == 2
    body = {"job_id": "stray-ddp", "node": "tiny", "curve": [10.0, 20.0, 30.0], "ranks": 2}
    assert http.post("/jobs", json=body, headers=AUTH).status_code == 201
    each = http.get("/jobs/stray-ddp").json()["assignment"]["workers"]
    assert each > 0
    register(http, "tiny", "zero", [0.0, 0.0, 0.0])  # a curve with no peak: no share of it
    browser.get(f"{srv.url}/ui/?refresh=60#job/stray")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job stray" and texts(d, "#job .assigned-label"), "the job")
    # it said "plan: 2 workers" above "not in a plan yet", and drew "plan: 2 workers" on the chart
    meta = text(browser, "#job-detail .meta")
    assert "plan: 2 workers" not in meta and "no plan yet: told 2 workers" in meta, meta
    assert text(browser, "#job .why") == "not in a plan yet"
    assert text(browser, "#job .assigned-label") == "told (no plan): 2 workers"
    # at the curve's last count the longer label still ends inside the chart
    (label,) = boxes(browser, "#job .assigned-label")
    assert label["right"] <= 620, label
    # a job of 2 ranks no plan holds: its row counts the whole job's told workers, as a plan's count does
    cells = texts(browser, "article.node tr[data-job='stray-ddp'] td")
    assert cells[2] == f"{2 * each} (2 × {each})" and cells[-1] == "not in a plan yet", cells
    assert cells[3:5] == ["–", "–"], cells  # it has not said what it runs with, nor measured anything
    assert texts(browser, "article.node tr[data-job='zero'] td")[5:7] == ["0", "–"]
    assert text(browser, "#history-table tbody") == "no plan yet"  # no plan at all: the table says so
    # told 8 of a curve that ends at 10: the label, written right of the line, would run past the chart's edge
    body = {"job_id": "near", "node": "tiny", "curve": [10.0 * w for w in range(1, 12)], "requested_workers": 8}
    assert http.post("/jobs", json=body, headers=AUTH).status_code == 201
    browser.get(f"{srv.url}/ui/?refresh=60#job/near")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job near" and texts(d, "#job .assigned-label"), "its page")
    assert text(browser, "#job .assigned-label") == "told (no plan): 8 workers"
    (label,) = boxes(browser, "#job .assigned-label")
    assert 0 <= label["x"] and label["right"] <= 620, label


@pytest.mark.parametrize("job_id", ["constructor", "toString"])
def test_a_job_named_like_an_object_property_and_not_yet_planned_is_not_in_a_plan(service, browser, job_id):
    # `id in plan.workers` is true of every object's inherited names: the page read the job's count, expected
    # samples/s and reason from Object.prototype (a function's source, 'NaN%') instead of 'not in a plan yet'
    srv, http = service
    register(http, "gpu-p", "base", STEEP)
    recompute(http)
    register(http, "gpu-p", job_id, STEEP)  # arrives after the plan: no recompute yet (the test service's is hourly)
    told = http.get(f"/jobs/{job_id}").json()["assignment"]
    assert told["plan_id"] is None
    browser.get(f"{srv.url}/ui/?refresh=60#job/{job_id}")
    wait_for(browser, lambda d: job_id in rows(d) and text(d, "#job .why"), "the job")
    row = rows(browser)[job_id]
    assert row["workers"] == told["workers"] and row["why"] == "not in a plan yet", row
    cells = texts(browser, f"article.node tr[data-job='{job_id}'] td")
    assert "function" not in " ".join(cells) and "NaN" not in " ".join(cells), cells
    assert text(browser, "#job .why") == "not in a plan yet"
    assert "function" not in text(browser, "#job-detail")


def test_why_the_model_is_the_fallback_is_text_and_a_job_page_has_its_title(service, browser):
    srv, http = service
    register(http, "gpu-t", "titled", STEEP)
    recompute(http)
    note = http.get("/model").json()["note"]
    assert note  # no registered model in the test's store: the note says why
    browser.get(f"{srv.url}/ui/?refresh=60")
    wait_for(browser, lambda d: "titled" in rows(d), "the job")
    # the note was only a tooltip (title attribute): no keyboard, touch screen or screen reader got to it
    assert note in text(browser, "#status")
    assert browser.title == "adlrec: loader workers per job"
    browser.execute_script("location.hash = '#job/titled'")
    wait_for(browser, lambda d: d.title == "Job titled · adlrec", "the job's page's title")
    browser.execute_script("location.hash = ''")
    wait_for(browser, lambda d: d.title == "adlrec: loader workers per job", "the page's own title again")


def test_the_node_bars_greys_have_keys_as_each_jobs_colour_has(service, browser):
    # the grey segment (the cores the jobs' main processes use) and the light one (free cores) were named only by
    # their titles, tooltips that no keyboard, touch screen or screen reader reaches; each job's colour is keyed
    # by the swatch in its row
    srv, http = service
    assert http.put("/nodes/gpu-k", json={"cores": 16, "memory_mb": 8000}, headers=AUTH).status_code == 200
    register(http, "gpu-k", "keyed", STEEP)
    register(http, "gpu-k", "keyed2", STEEP)
    (plan,) = recompute(http)
    mains = sum(j["main_cores"] for j in http.get("/jobs?status=active").json())
    free = 16 - plan["cores_used"]
    assert free > 0  # STEEP saturates at 3 workers: the node keeps cores free
    browser.get(f"{srv.url}/ui/?refresh=60")
    wait_for(browser, lambda d: {"keyed", "keyed2"} <= set(rows(d)), "the jobs")
    card = "article[data-node='gpu-k']"
    keys = browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(k => k.textContent)", f"{card} .bar-key .key"
    )
    assert keys == [f"training processes: {mains} cores", f"free: {free} cores"]
    for cls in ("mains", "free"):
        key, seg = browser.execute_script(
            "return [...arguments].map(s => getComputedStyle(document.querySelector(s)).backgroundColor)",
            f"{card} .bar-key .swatch.{cls}",
            f"{card} .cores .seg.{cls}",
        )
        assert key == seg and key not in ("rgba(0, 0, 0, 0)", "transparent"), (cls, key, seg)
    # shown, under the bar and above the table
    assert browser.execute_script(
        """const [bar, key, table] = [...arguments].map(s => document.querySelector(s).getBoundingClientRect());
           return key.height > 0 && key.top >= bar.bottom && key.bottom <= table.top;""",
        f"{card} .cores",
        f"{card} .bar-key",
        f"{card} table.jobs",
    )


def test_a_job_that_ended_after_the_plan_keeps_a_key_for_its_segment(service, browser):
    # its segment stays in the bar until the next plan, but it has no row (and so no swatch) in the table
    srv, http = service
    assert http.put("/nodes/gpu-x", json={"cores": 16, "memory_mb": 8000}, headers=AUTH).status_code == 200
    register(http, "gpu-x", "stays", STEEP)
    register(http, "gpu-x", "leaves", STEEP)
    (plan,) = recompute(http)
    assert plan["workers"]["leaves"] > 0
    assert http.post("/jobs/leaves/finish", headers=AUTH).status_code == 200
    browser.get(f"{srv.url}/ui/?refresh=60")
    wait_for(browser, lambda d: list(rows(d)) == ["stays"], "the job still active")
    card = "article[data-node='gpu-x']"
    keys = texts(browser, f"{card} .bar-key .key")
    assert f"leaves (ended since this plan): {plan['workers']['leaves']} workers" in keys, keys
    assert not any(k.startswith("stays") for k in keys), keys  # keyed by its row's swatch
    key, seg = browser.execute_script(
        "return [...arguments].map(s => getComputedStyle(document.querySelector(s)).backgroundColor)",
        f"{card} .bar-key .key:nth-child(2) .swatch",
        f"{card} .cores .seg[title^='leaves:']",
    )
    assert key == seg, (key, seg)


def test_a_plan_that_empties_a_node_says_so_in_the_plans_chart_and_table(service, browser):
    # the node's last job ended: its plan holds no job, and the chart drew an empty column, the table an empty cell
    srv, http = service
    register(http, "gpu-e", "last", STEEP)
    (full,) = recompute(http)
    assert http.post("/jobs/last/finish", headers=AUTH).status_code == 200
    (empty,) = recompute(http)
    assert empty["workers"] == {}
    register(http, "gpu-e", "idle", [100.0, 100.0, 100.0])  # as fast without a worker as with any: it gets none
    (zero,) = recompute(http)
    assert zero["workers"] == {"idle": 0}
    browser.get(f"{srv.url}/ui/?refresh=60")
    wait_for(browser, lambda d: len(texts(d, "#history-table tr[data-plan]")) == 3, "the three plans")
    assert text(browser, f"#history-table tr[data-plan='{empty['plan_id']}'] td:last-child") == "no jobs"
    assert "last: " in text(browser, f"#history-table tr[data-plan='{full['plan_id']}'] td:last-child")
    notes = boxes(browser, "#history-chart svg .no-workers")
    assert [n["text"].split("plan #")[0] for n in notes] == ["no jobs", "0 workers"], notes
    # in the second and third (newest) columns, right of the first one's bar
    (bar,) = boxes(browser, "#history-chart svg rect")
    assert bar["right"] <= notes[0]["x"] < notes[0]["right"] <= notes[1]["x"] < notes[1]["right"] <= 620, (bar, notes)
    # one node: no menu to pick another
    assert browser.execute_script("return document.getElementById('history-pick').hidden")
    # a job given 0 workers has no part of the node's bar (a sliver of its colour said it had some)
    assert texts(browser, "article[data-node='gpu-e'] .cores .seg", "class") == ["seg mains", "seg free"]


def as_shown(x, digits=1):
    """A number of 1 or more as the page writes it: toLocaleString("en") with at most `digits` decimals."""
    shown = f"{x:,.{digits}f}"
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def chart_y(browser):
    """The curve chart's value -> y, read off its gridlines (the first at 0, the last at the top tick)."""
    grid = [float(y) for y in texts(browser, "#job svg line.grid", "y1")]
    top = float(texts(browser, "#job svg text.tick[text-anchor='end']")[-1].replace(",", ""))
    assert grid[0] > grid[-1], grid  # 0 at the foot, the top at the top
    return lambda v: grid[0] + (grid[-1] - grid[0]) * v / top


def test_the_numbers_a_user_reads_are_rounded_and_in_their_units(service, browser):
    srv, http = service
    assert http.put("/nodes/gpu-u", json={"cores": 6, "memory_mb": 8000}, headers=AUTH).status_code == 200
    assert http.put("/nodes/spare", json={"cores": 1, "memory_mb": 1024}, headers=AUTH).status_code == 200
    assert http.put("/nodes/small", json={"cores": 2, "memory_mb": 512}, headers=AUTH).status_code == 200
    register(http, "gpu-u", "steep", STEEP)
    register(http, "gpu-u", "flat", test_webapp.FLAT)
    (plan,) = recompute(http)
    assert plan["objective"] == pytest.approx(1.95)  # a plan of two decimals (one decimal rounded it to 2)
    r = http.post("/jobs/steep/heartbeat", json={"throughput": 42.46, "workers": 2, "data_wait": 0.126}, headers=AUTH)
    assert r.status_code == 200, r.text
    job = http.get("/jobs/steep").json()
    browser.get(f"{srv.url}/ui/?refresh=60#job/steep")
    wait_for(browser, lambda d: {"steep", "flat"} <= set(rows(d)) and texts(d, "#job circle.measured"), "the jobs")

    assert " · 6 cores · 7.8 GB for workers · 2 active jobs · " in text(browser, "[data-node='gpu-u'] h3 .meta")
    assert text(browser, "[data-node='spare'] h3 .meta") == " · 1 core · 1 GB for workers · 0 active jobs · no plan yet"
    assert text(browser, "[data-node='small'] h3 .meta").startswith(" · 2 cores · 512 MB for workers · ")
    assert text(browser, "[data-node='spare'] p.empty") == "no active job"
    # job, GPUs, plan, running with, measured, expected, of peak, data wait: to a tenth, a whole percent, '–' if none
    cells = texts(browser, "tr[data-job='steep'] td")[1:8]
    assert cells == ["1", str(plan["workers"]["steep"]), "2", "42.5", "100", "100%", "13%"], cells
    assert texts(browser, "tr[data-job='flat'] td")[3:8] == ["–", "–", "95", "95%", "–"]
    # the history: objective to three decimals, the cores used, and the chart's top the most workers of a plan
    history = texts(browser, f"#history-table tr[data-plan='{plan['plan_id']}'] td")
    assert history[4:6] == ["1.95", str(plan["cores_used"])], history
    assert history[6] == ", ".join(f"{job}: {w}" for job, w in plan["workers"].items()), history
    ticks = texts(browser, "#history-chart svg text.tick")
    assert ticks[0] == str(sum(plan["workers"].values()))
    assert ticks[1] == "0" and len(ticks) == 3 and ticks[2].startswith(f"#{plan['plan_id']} "), ticks  # one plan, once
    # the plan's column stacks its jobs' workers from 0 to its top, one on another
    assert all(plan["workers"].values())
    bars = sorted(boxes(browser, "#history-chart svg rect"), key=lambda b: b["y"])
    assert len(bars) == len(plan["workers"]), bars
    assert all(a["bottom"] == pytest.approx(b["y"]) for a, b in zip(bars, bars[1:], strict=False)), bars

    # the job's measured point: its row, and on the chart where 42.46 samples/s at 2 workers is
    assert texts(browser, "#job table.points tbody td") == ["2", "42.5", as_shown(job["predicted"][2]), "1", "13%"]
    y = chart_y(browser)
    for cls, values in (("used", job["curve"]), ("predicted", job["predicted"])):
        drawn = [float(p.split(",")[1]) for p in attr(browser, f"#job polyline.{cls}", "points").split()]
        assert drawn == pytest.approx([y(v) for v in values], abs=0.06), cls
    (cx, cy) = (float(attr(browser, "#job svg > circle.measured", a)) for a in ("cx", "cy"))
    assert cy == pytest.approx(y(42.46), abs=0.01)
    x_ticks = browser.execute_script(
        "return [...document.querySelectorAll('#job svg text.tick[text-anchor=middle]')].map(e => [e.textContent, +e.getAttribute('x')])"
    )
    assert cx == pytest.approx(dict(x_ticks)["2"]), x_ticks


def test_a_job_id_of_markup_and_quotes_in_the_address_is_shown_as_text(service, browser):
    # the id in '#job/<id>' is the user's (or a link's) to write: it is put in the title and the page as text
    srv, http = service
    register(http, "gpu-x", "plain", STEEP)
    recompute(http)
    bad = """<img src=x id=injected onerror="window.__ran=1"><b>bold</b>"'&amp;"""
    browser.get(f"{srv.url}/ui/?refresh=60#job/{bad}")
    wait_for(browser, lambda d: "plain" in rows(d) and "knows no job" in (text(d, "#job-detail") or ""), "the page")
    assert text(browser, "#job-title") == f"Job {bad}"
    assert text(browser, "#job-detail") == f"the service knows no job {bad}"
    assert browser.title == f"Job {bad} · adlrec"
    assert browser.execute_script("return document.querySelectorAll('#job img, #job b, #injected').length") == 0


def test_older_plans_are_read_on_asking_and_the_chart_follows_the_node_menu(service, browser):
    srv, http = service
    for i in range(31):  # one plan each, one more than a page of the history
        register(http, f"h-{i:02d}", f"hj-{i:02d}", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: len(texts(d, "#history-table tr[data-plan]")) == 30, "a page of the history")
    assert text(browser, "#history-chart .legend").startswith("h-00:")
    assert browser.execute_script("return !document.getElementById('older').hidden")
    browser.find_element("css selector", "#older").click()
    wait_for(browser, lambda d: len(texts(d, "#history-table tr[data-plan]")) == 31, "the older plan")
    assert browser.execute_script("return document.getElementById('older').hidden")  # none older
    # the node menu picks the node whose plans the chart draws
    from selenium.webdriver.support.ui import Select

    assert browser.execute_script("return !document.getElementById('history-pick').hidden")
    Select(browser.find_element("css selector", "#history-node")).select_by_value("h-07")
    wait_for(
        browser, lambda d: (text(d, "#history-chart .legend") or "").startswith("h-07:"), "the picked node's plans"
    )
    assert texts(browser, "#history-chart .legend .key") == ["hj-07"]


def test_a_node_whose_last_plan_failed_is_shown_with_its_problem_after_its_jobs_ended(service, browser):
    # no plan fit its jobs, and they ended before the next recompute: the reason stays on the node until then, and
    # its card is with the busy ones, not in the closed box of idle nodes
    srv, http = service
    assert http.put("/nodes/tiny", json={"cores": 1, "memory_mb": 1024}, headers=AUTH).status_code == 200
    register(http, "tiny", "t1", STEEP)
    register(http, "tiny", "t2", STEEP)
    recompute(http)
    for job_id in ("t1", "t2"):
        assert http.post(f"/jobs/{job_id}/finish", headers=AUTH).status_code == 200
    (node,) = http.get("/nodes").json()
    assert node["active_jobs"] == 0 and node["problem"], node
    browser.get(f"{srv.url}/ui/?refresh=60")
    wait_for(browser, lambda d: texts(d, "#node-list article.node"), "the node")
    assert text(browser, "#node-list > article[data-node='tiny'] .problem") == f"no plan fits: {node['problem']}"


def test_expected_is_what_the_plan_expected_not_what_was_measured_since(service, browser):
    # the 'expected' column is the allocator's number for the planned count, beside what the job measured since
    srv, http = service
    register(http, "gpu-m", "since", STEEP)
    (plan,) = recompute(http)
    w = plan["workers"]["since"]
    assert plan["throughput"]["since"] == 100.0
    r = http.post("/jobs/since/heartbeat", json={"throughput": 80.0, "workers": w}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert http.get("/jobs/since").json()["curve"][w] == 80.0  # the job's curve has the measurement now
    browser.get(f"{srv.url}/ui/?refresh=60")
    wait_for(browser, lambda d: "since" in rows(d), "the job")
    assert texts(browser, "tr[data-job='since'] td")[3:7] == [str(w), "80", "100", "100%"]


def test_an_ended_jobs_page_says_what_it_last_ran_with_not_that_it_is_running(service, browser):
    # a finished job's page said "running with 2" beside "finished": it runs nothing now
    srv, http = service
    register(http, "gpu-z", "done", STEEP)
    recompute(http)
    r = http.post("/jobs/done/heartbeat", json={"throughput": 42.0, "workers": 2}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert http.post("/jobs/done/finish", headers=AUTH).status_code == 200
    browser.get(f"{srv.url}/ui/?refresh=60#job/done")
    wait_for(browser, lambda d: "finished" in (text(d, "#job-detail .meta") or ""), "the finished job's page")
    meta = text(browser, "#job-detail .meta")
    assert "running with" not in meta and " · last ran with 2 · " in meta, meta
