"""The web UI in a real headless Chromium against a real service (uvicorn on 127.0.0.1 port 0).

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and selenium (the
``dev`` extra).  Without them the browser tests skip, unless ``ADLREC_REQUIRE_BROWSER=1`` (set by
``.ci/run``) turns the skip into a failure, so CI cannot pass without running them.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import httpx
import pytest

from adlrec.service import create_app
from tests.service_helpers import LiveServer, server_with_breakable_store, service_settings

AUTH = {"Authorization": "Bearer s3cret"}
STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0, 100.0]
FLAT = [80.0, 95.0, 100.0, 100.0, 100.0, 100.0]
RISING = [10.0, 30.0, 50.0, 70.0, 90.0, 100.0, 100.0, 100.0]
CHROMIUM = os.environ.get("ADLREC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ADLREC_CHROMEDRIVER", "/usr/bin/chromedriver")


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            return f"{path} not found (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser():
    missing = _browser_missing()
    if missing:
        if os.environ.get("ADLREC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"ADLREC_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()


@pytest.fixture
def service(tmp_path):
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield srv, http


def register(http, node, job_id, curve):
    r = http.post("/jobs", json={"job_id": job_id, "node": node, "curve": curve}, headers=AUTH)
    assert r.status_code == 201, r.text


def recompute(http):
    r = http.post("/plans/recompute", headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()["plans"]


def open_with_jobs(browser, srv, http, node, ids, refresh=3600):
    """Register ``ids`` on ``node``, plan, and open the page until every one has its row."""
    for job_id in ids:
        register(http, node, job_id, STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh={refresh}")
    wait_for(browser, lambda d: set(ids) <= set(rows(d)), f"the jobs {', '.join(ids)}")


def wait_for(browser, predicate, what, timeout=20):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout, poll_frequency=0.1).until(
        lambda d: predicate(d), message=f"the page never showed {what}"
    )


def rows(browser):
    """The job rows of every node card, read in one script (the page re-renders under the test)."""
    return browser.execute_script(
        """
        const out = {};
        for (const tr of document.querySelectorAll("article.node tr[data-job]")) {
          const cells = tr.querySelectorAll("td");
          out[tr.dataset.job] = {
            node: tr.closest("article").dataset.node,
            workers: Number(cells[2].textContent),
            why: cells[cells.length - 1].textContent,
          };
        }
        return out;
        """
    )


def text(browser, selector):
    """``textContent`` of the first match (None if none), read in one script."""
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.textContent;", selector
    )


def attr(browser, selector, name):
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.getAttribute(arguments[1]);", selector, name
    )


def texts(browser, selector, attribute=None):
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.textContent);",
        selector,
        attribute,
    )


def test_root_sends_to_the_ui_and_the_ui_is_served(service):
    srv, http = service
    r = http.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
    page = http.get("/ui/")
    assert page.status_code == 200 and "<title>adlrec" in page.text
    # the headers docs/service.md names: no sniffing a type; no framing by another page (clickjacking), no
    # plugin, no <base> sending the page's relative addresses (its API) elsewhere
    assert page.headers["x-content-type-options"] == "nosniff"
    policy = {d.split()[0]: d.split()[1:] for d in page.headers["content-security-policy"].split("; ")}
    assert {k: policy.get(k) for k in ("frame-ancestors", "object-src", "base-uri")} == {
        "frame-ancestors": ["'none'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
    }, policy
    assert http.get("/ui/app.js").status_code == 200
    assert "/ui" not in str(http.get("/openapi.json").json()["paths"])  # the API documents only the API


def test_the_wheel_carries_the_web_ui_and_the_service_finds_it_there(tmp_path):
    # a service installed from a wheel (not run from a checkout) serves the UI with no setting
    import subprocess
    import sys
    import zipfile

    root = Path(__file__).parents[2]
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ there
    for d in ("adlrec", "webapp"):
        shutil.copytree(root / d, src / d, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(root / f, src / f)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("adlrec-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {f"adlrec/webapp/{f.name}" for f in (root / "webapp").iterdir()} <= names
        z.extractall(tmp_path / "site")
    found = subprocess.run(
        [sys.executable, "-c", "from adlrec.config import Settings; print(Settings().resolved_webapp_dir)"],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        cwd=tmp_path,  # not the checkout, whose adlrec/ would come first
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(found) == tmp_path / "site" / "adlrec" / "webapp" and (Path(found) / "index.html").is_file()


def test_without_webapp_folder_the_api_still_serves(tmp_path, caplog):
    settings = service_settings(tmp_path, service_webapp_dir=tmp_path / "nowhere")
    with caplog.at_level("WARNING"), LiveServer(create_app(settings)) as srv:
        assert httpx.get(f"{srv.url}/ui/").status_code == 404
        assert httpx.get(f"{srv.url}/health").status_code == 200
    assert any(
        "web UI not served" in r.getMessage() and "ADLREC_SERVICE_WEBAPP_DIR" in r.getMessage() for r in caplog.records
    )


def test_nodes_show_the_plan_its_reasons_and_follow_changes(service, browser):
    srv, http = service
    assert http.put("/nodes/gpu-a", json={"cores": 6, "memory_mb": 8000}, headers=AUTH).status_code == 200
    register(http, "gpu-a", "resnet", STEEP)
    register(http, "gpu-a", "bert", FLAT)
    (plan,) = recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=1")
    wait_for(browser, lambda d: len(rows(d)) == 2, "two job rows")
    shown = rows(browser)
    assert {k: v["workers"] for k, v in shown.items()} == plan["workers"]
    assert all(shown[k]["why"] == plan["reasons"][k] for k in shown)
    assert "policy optimal" in text(browser, "#status")
    assert attr(browser, "article[data-node='gpu-a'] .cores", "aria-label") == f"{plan['cores_used']} of 6 cores used"

    # a third job arrives, one finishes: the page follows on its own
    register(http, "gpu-a", "audio", RISING)
    assert http.post("/jobs/bert/finish", headers=AUTH).status_code == 200
    (second,) = recompute(http)
    wait_for(browser, lambda d: set(rows(d)) == {"resnet", "audio"}, "the new job and not the finished one")
    wait_for(browser, lambda d: {k: v["workers"] for k, v in rows(d).items()} == second["workers"], "the new plan")
    browser.get(f"{srv.url}/ui/?refresh=1#job/bert")  # an ended job keeps its page
    wait_for(browser, lambda d: "finished" in (text(d, "#job-detail .meta") or ""), "the finished job's page")
    assert "in no plan" in text(browser, "#job-detail .meta") and "plan:" not in text(browser, "#job-detail .meta")
    assert text(browser, "#job .why") == "in no plan: the job has finished" and not texts(
        browser, "#job .assigned-label"
    )
    wait_for(browser, lambda d: len(texts(d, "#history-table tr[data-plan]")) == 2, "both plans in the history")
    assert texts(browser, "#history-table tr[data-plan]", "data-plan") == [str(second["plan_id"]), str(plan["plan_id"])]
    columns = texts(browser, "#history-chart svg rect")
    assert len(columns) == sum(1 for w in plan["workers"].values() if w) + sum(
        1 for w in second["workers"].values() if w
    )


def test_job_page_draws_its_curve_measurements_and_assignment(service, browser):
    srv, http = service
    register(http, "gpu-b", "vit", RISING)
    (plan,) = recompute(http)
    r = http.post("/jobs/vit/heartbeat", json={"throughput": 42.0, "workers": 2, "data_wait": 0.25}, headers=AUTH)
    assert r.status_code == 200, r.text
    browser.get(f"{srv.url}/ui/?refresh=1#job/vit")
    wait_for(browser, lambda d: texts(d, "#job circle.measured"), "the measured point")
    job = http.get("/jobs/vit").json()
    assert len(attr(browser, "#job polyline.used", "points").split()) == len(job["curve"])
    assert text(browser, "#job .assigned-label") == f"plan: {plan['workers']['vit']} workers"
    assert text(browser, "#job-title") == "Job vit"
    point = texts(browser, "#job table.points tbody tr td")
    assert point[:2] == ["2", "42"] and point[-1] == "25%"
    # the y axis of a peak of 100 steps by 20 to 120; four steps of any top had ticks at 62.5 and 187.5 under 250
    assert texts(browser, "#job svg text.tick[text-anchor='end']") == ["0", "20", "40", "60", "80", "100", "120"]

    browser.get(f"{srv.url}/ui/?refresh=1#job/nosuchjob")
    wait_for(browser, lambda d: "knows no job nosuchjob" in (text(d, "#job-detail") or ""), "the unknown job")

    # a job no plan holds yet (the page said "null" there)
    assert http.put("/nodes/tiny", json={"cores": 1, "memory_mb": 1024}, headers=AUTH).status_code == 200
    register(http, "tiny", "orphan", RISING)
    browser.get(f"{srv.url}/ui/?refresh=1#job/orphan")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job orphan" and text(d, "#job .why"), "the job's page")
    assert text(browser, "#job .why") == "not in a plan yet"
    assert "null" not in text(browser, "#job-detail")
    # two main processes on a 1-core node: no plan fits, and every job gets its minimum (it kept no plan at all)
    register(http, "tiny", "orphan2", RISING)
    recompute(http)
    wait_for(browser, lambda d: "minimum" in (text(d, "#job .why") or ""), "the minimum plan")
    assert (
        text(browser, "#job .why")
        == "why: 0 workers, 10% of its peak; no plan fits the node, so every job gets its minimum"
    )
    # and its node's card says why no plan fits (it said so only in the service's log)
    assert text(browser, '[data-node="tiny"] .problem') == (
        "no plan fits: 1 core cannot hold the jobs' 2 main processes and 0 minimum workers"
    )
    # the minimum plan uses 2 cores of 1: the bar's key names no "free: -1 cores"
    assert texts(browser, '[data-node="tiny"] .bar-key .key') == ["training processes: 2 cores"]


def test_jobs_get_colours_of_their_own_and_the_refresh_is_at_most_a_day(service, browser):
    srv, http = service
    ids = ["j0", "j57", "j1", "j2"]  # j0 and j57 had one colour: a hash of the id, modulo 360 hues
    for job_id in ids:
        register(http, "gpu-col", job_id, STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3000000")  # past 2^31 ms a browser refreshes at once, again and again
    wait_for(browser, lambda d: set(ids) <= set(rows(d)), "the four jobs")
    swatches = texts(browser, "article[data-node='gpu-col'] td.job .swatch", "style")
    assert len(swatches) == 4 and len(set(swatches)) == 4, swatches
    assert text(browser, "#every") == "86400"


def _lab(rgb):
    """CIELAB of an sRGB colour (D65): a distance of about 2.3 is the least the eye tells apart."""

    def linear(u):
        u /= 255
        return ((u + 0.055) / 1.055) ** 2.4 if u > 0.04045 else u / 12.92

    r, g, b = map(linear, rgb)
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)  # fmt: skip
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _swatch_rgb(browser, ids):
    return browser.execute_script(
        """return arguments[0].map(id => getComputedStyle(document.querySelector(`tr[data-job="${id}"] .swatch`))
             .backgroundColor.match(/\\d+/g).slice(0, 3).map(Number));""",
        ids,
    )


def test_the_jobs_of_a_node_get_colours_that_differ_to_the_eye(service, browser):
    # hues of a hash of the id gave demo-image and demo-audio greens 28 degrees apart (139, 111), one lightness:
    # two jobs of one node's bar, the same colour to the eye; j7 and j9 hues 1 degree apart, j5 and j7 5.9 apart
    ids = ["demo-text", "demo-image", "demo-audio", *(f"j{i}" for i in range(1, 10))]
    open_with_jobs(browser, *service, "gpu-eye", ids)
    labs = dict(zip(ids, map(_lab, _swatch_rgb(browser, ids)), strict=True))
    closest = min(
        (sum((x - y) ** 2 for x, y in zip(labs[a], labs[b], strict=True)) ** 0.5, a, b)
        for i, a in enumerate(ids)
        for b in ids[i + 1 :]
    )
    assert closest[0] > 25, closest


def test_a_job_keeps_its_colour_while_the_page_is_open_and_a_newcomer_takes_a_free_one(service, browser):
    # j1 and j2 draw the same colour from their ids: the one registered first keeps it, the other takes the next
    srv, http = service
    open_with_jobs(browser, srv, http, "gpu-keep", ["j2"], refresh=1)
    first = swatch_of(browser, "j2")
    register(http, "gpu-keep", "j1", STEEP)
    recompute(http)
    wait_for(browser, lambda d: "j1" in rows(d), "the newcomer")
    assert swatch_of(browser, "j2") == first
    second = swatch_of(browser, "j1")
    assert second != first
    browser.refresh()  # a reload: given again in the order the jobs registered
    wait_for(browser, lambda d: {"j1", "j2"} <= set(rows(d)), "both jobs after the reload")
    assert (swatch_of(browser, "j2"), swatch_of(browser, "j1")) == (first, second)
    assert http.post("/jobs/j2/finish", headers=AUTH).status_code == 200
    recompute(http)
    wait_for(browser, lambda d: "j2" not in rows(d), "the first job's end")
    assert swatch_of(browser, "j1") == second  # the colour j2 left free is not taken from under the eye
    browser.refresh()  # nor at a reload: the plans read still name j2, registered first
    wait_for(browser, lambda d: "j1" in rows(d), "the job after the reload")
    assert swatch_of(browser, "j1") == second


def test_a_stopped_service_is_reported_and_the_last_view_kept(tmp_path, browser):
    settings = service_settings(tmp_path)
    srv = LiveServer(create_app(settings)).__enter__()
    try:
        with httpx.Client(base_url=srv.url, timeout=10) as http:
            register(http, "gpu-c", "gone", STEEP)
            recompute(http)
        browser.get(f"{srv.url}/ui/?refresh=1")
        wait_for(browser, lambda d: "gone" in rows(d), "the job")
    finally:
        srv.__exit__(None, None, None)
    wait_for(browser, lambda d: d.execute_script("return !document.getElementById('error').hidden"), "the error banner")
    error = text(browser, "#error")
    assert error.startswith("cannot read the service") and "showing what was read at" in error
    assert "gone" in rows(browser)


@pytest.mark.parametrize(
    "fragment",
    [
        "%E0%A4%A",  # not percent-decodable: decodeURIComponent threw, and the whole page said "no node yet"
        "a%20b",  # not a job id the API accepts
        "x" * 200,  # longer than an id may be: the API's 422 failed the whole refresh
        "..",  # resolves to the service's root (an HTML page) when put in a path
        ".",  # resolves to GET /jobs/ (a list)
    ],
)
def test_a_bad_job_in_the_address_leaves_the_rest_of_the_page_working(service, browser, fragment):
    srv, http = service
    register(http, "gpu-d", "fine", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=1#job/{fragment}")
    wait_for(browser, lambda d: "fine" in rows(d), "the node's job")
    wait_for(browser, lambda d: "knows no job" in (text(d, "#job-detail") or ""), "that no such job exists")
    assert browser.execute_script("return document.getElementById('error').hidden"), text(browser, "#error")


def test_picking_a_job_brings_its_page_into_view_and_focus(service, browser):
    srv, http = service
    for i in range(16):  # enough node cards that the job's page, drawn below them, starts below the window
        register(http, f"node-{i:02d}", f"job-{i:02d}", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: len(rows(d)) == 16, "the sixteen jobs")
    browser.find_element("css selector", "tr[data-job='job-00'] a.job-link").click()
    wait_for(browser, lambda d: text(d, "#job-title") == "Job job-00", "the job's page")
    in_view = """const r = document.getElementById('job-title').getBoundingClientRect();
                 return r.top > -2 && r.bottom <= window.innerHeight;"""
    wait_for(browser, lambda d: d.execute_script(in_view), "the job's page in the window")
    assert browser.execute_script("return document.activeElement.id") == "job-title"
    # and so does an address that names a job, opened as is
    browser.get("about:blank")
    browser.get(f"{srv.url}/ui/?refresh=3600#job/job-15")
    wait_for(browser, lambda d: text(d, "#job-title") == "Job job-15" and d.execute_script(in_view), "job-15 in view")


# fetch, wrapped in the page: requests for /jobs/slow wait for window.__release(); __pending counts requests whose
# answer the page has not read yet (it drops to 0 only after the page's code that awaited the last answer has run)
HOLD_SLOW = """
window.__pending = 0;
const plain = window.fetch;
window.fetch = async (url, opts) => {
  window.__pending++;
  try {
    if (String(url).includes("/jobs/slow")) await new Promise((go) => { window.__release = go; });
    const r = await plain(url, opts);
    if (!r.ok) { window.__pending--; return r; }
    const json = r.json.bind(r);
    r.json = () => json().finally(() => { window.__pending--; });
    return r;
  } catch (err) { window.__pending--; throw err; }
};
"""


def test_a_refresh_that_answers_late_does_not_draw_over_a_newer_one(service, browser):
    srv, http = service
    register(http, "gpu-e", "slow", STEEP)
    register(http, "gpu-e", "fast", FLAT)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: set(rows(d)) == {"slow", "fast"}, "both jobs")
    browser.execute_script(HOLD_SLOW)
    browser.execute_script("location.hash = '#job/slow'")  # this refresh waits for its job's answer...
    wait_for(browser, lambda d: d.execute_script("return typeof window.__release === 'function'"), "the held request")
    browser.execute_script("location.hash = '#job/fast'")  # ... while the user picks another job
    wait_for(browser, lambda d: text(d, "#job-title") == "Job fast", "the job picked last")
    browser.execute_script("window.__release()")
    wait_for(browser, lambda d: d.execute_script("return window.__pending === 0"), "the held refresh's end")
    assert text(browser, "#job-title") == "Job fast"  # the older refresh's job ("Job slow") was drawn over it
    assert browser.execute_script("return location.hash") == "#job/fast"


# fetch, wrapped in the page: the next request for /model waits for window.__fail(), then fails as a network error
# does; the requests after it go through
FAIL_NEXT_MODEL_READ = """
const plainFetch = window.fetch;
let armed = true;
window.fetch = (url, opts) => {
  if (armed && String(url).endsWith("/model")) {
    armed = false;
    return new Promise((_, fail) => { window.__fail = () => fail(new TypeError("Failed to fetch")); });
  }
  return plainFetch(url, opts);
};
"""


def test_a_refresh_that_fails_after_a_newer_one_was_drawn_raises_no_banner(service, browser):
    # the failed read is older than what the page shows: "cannot read the service" over a page just read is wrong
    srv, http = service
    register(http, "gpu-e", "one", STEEP)
    register(http, "gpu-e", "two", FLAT)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: set(rows(d)) == {"one", "two"}, "both jobs")
    browser.execute_script(FAIL_NEXT_MODEL_READ)
    browser.execute_script("location.hash = '#job/one'")  # this refresh's read of /model hangs...
    wait_for(browser, lambda d: d.execute_script("return typeof window.__fail === 'function'"), "the held request")
    browser.execute_script("location.hash = '#job/two'")  # ... while a newer one reads everything and is drawn
    wait_for(browser, lambda d: text(d, "#job-title") == "Job two", "the job picked last")
    # the failure runs to the end of its refresh in microtasks, long before a timer of 100 ms fires
    browser.execute_async_script("window.__fail(); setTimeout(arguments[0], 100)")
    assert browser.execute_script("return document.getElementById('error').hidden"), text(browser, "#error")
    assert text(browser, "#job-title") == "Job two"


def test_a_changed_ui_file_is_read_again_not_taken_from_the_browser_cache(tmp_path, browser):
    # an upgraded service with last month's app.js still in the browser: without Cache-Control the browser may
    # reuse a file whose Last-Modified is old for a tenth of its age (days), against the new service's API
    webapp = tmp_path / "webapp"
    shutil.copytree(Path(__file__).parents[2] / "webapp", webapp)
    month_ago = time.time() - 30 * 86400
    for f in webapp.iterdir():
        os.utime(f, (month_ago, month_ago))
    settings = service_settings(tmp_path, service_webapp_dir=webapp)
    with LiveServer(create_app(settings)) as srv:
        assert httpx.get(f"{srv.url}/ui/app.js").headers["cache-control"] == "no-cache"
        browser.get(f"{srv.url}/ui/?refresh=3600")
        wait_for(browser, lambda d: "policy" in (text(d, "#status") or ""), "the page read the service")
        app = webapp / "app.js"
        app.write_text(app.read_text() + "\nwindow.__newApp = true;\n")
        os.utime(app, (month_ago + 3600, month_ago + 3600))  # another Last-Modified and ETag, still old
        browser.get("about:blank")
        browser.get(f"{srv.url}/ui/?refresh=3600")
        wait_for(browser, lambda d: "policy" in (text(d, "#status") or ""), "the page read the service again")
        assert browser.execute_script("return window.__newApp === true"), "the browser ran its cached app.js"


def test_the_page_and_what_it_links_to_work_offline_or_say_they_need_the_internet(service, browser):
    srv, http = service
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: "policy" in (text(d, "#status") or ""), "the page read the service")
    # a service no job came to yet says so, not that every node is idle
    assert text(browser, "#node-list") == "no node yet: jobs appear here when they register"
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(u.startswith(f"{srv.url}/") for u in loaded), loaded
    links = texts(browser, "header a, footer a", "href")
    assert links, "the page links to the API's description"
    footer = text(browser, "footer")
    for href in links:
        r = http.get(httpx.URL(f"{srv.url}/ui/").join(href))
        assert r.status_code == 200, href
        # FastAPI's /docs page loads Swagger UI from a CDN: offline it is blank
        outside = re.findall(r"""(?:src|href)=["'](https?://[^"']+)""", r.text)
        assert not outside or "internet" in footer, (href, outside)


# run before the page's own script: the delay of every setInterval it starts, in window.__every
RECORD_TIMERS = """
window.__every = [];
const plainInterval = window.setInterval;
window.setInterval = (run, ms, ...args) => { window.__every.push(ms); return plainInterval(run, ms, ...args); };
"""


@pytest.mark.parametrize(
    ("asked", "every"),
    [("-1", "5"), ("-86400", "5"), ("0", "5"), ("abc", "5"), ("", "5"), ("NaN", "5"), ("0.2", "1"), ("2", "2")],
)
def test_a_refresh_that_is_not_a_positive_number_of_seconds_is_the_default(service, browser, asked, every):
    srv, http = service
    # the page's timers, recorded: what the footer says is what the page does
    timers = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_TIMERS})
    try:
        browser.get(f"{srv.url}/ui/?refresh={asked}")
        wait_for(browser, lambda d: "policy" in (text(d, "#status") or ""), "the page read the service")
        assert text(browser, "#every") == every  # -1 was taken as 1 s: a typo made the page poll every second
        assert browser.execute_script("return window.__every") == [int(every) * 1000]
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": timers["identifier"]})


def test_the_page_may_load_and_run_only_what_the_service_serves(service, browser):
    # defence in depth behind "every value is put in the page as text": a Content-Security-Policy lets the page
    # load scripts, styles, images and API answers from the service only, so markup that got in anyway (or a
    # CDN added by mistake) can neither run nor reach another host, and the page keeps working offline
    srv, http = service
    open_with_jobs(browser, srv, http, "gpu-f", ["csp"])
    # the page itself runs under the policy: its script drew the table and its style attributes still apply
    swatch = "getComputedStyle(document.querySelector('td.job .swatch')).backgroundColor"
    assert browser.execute_script(f"return {swatch}") not in ("rgba(0, 0, 0, 0)", "transparent")
    browser.execute_script(
        """window.__blocked = [];
           document.addEventListener("securitypolicyviolation", (e) => window.__blocked.push(e.blockedURI));
           const img = document.createElement("img"); img.src = "http://192.0.2.1/pixel.png"; document.body.append(img);
           const s = document.createElement("script"); s.textContent = "window.__ran = true"; document.body.append(s);"""
    )
    wait_for(browser, lambda d: d.execute_script("return window.__blocked.length") >= 2, "both refused by the policy")
    assert browser.execute_script("return window.__ran === undefined")
    assert "http://192.0.2.1/pixel.png" in browser.execute_script("return window.__blocked")
    # nor may it send a request to another host (here another loopback address: nothing leaves the machine)
    browser.execute_script('fetch("http://127.0.0.2:9/elsewhere").catch(() => {})')
    wait_for(browser, lambda d: d.execute_script("return window.__blocked.length") >= 3, "the request refused")
    assert "http://127.0.0.2:9/elsewhere" in browser.execute_script("return window.__blocked")


def test_the_job_title_takes_focus_without_a_focus_ring(service, browser):
    # the title is focused for the keyboard and screen readers, not clicked: a ring round a heading looked broken
    srv, http = service
    register(http, "gpu-g", "ring", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600#job/ring")
    wait_for(browser, lambda d: d.execute_script("return document.activeElement.id") == "job-title", "the focus")
    assert browser.execute_script("return getComputedStyle(document.activeElement).outlineStyle") == "none"


def test_on_a_phone_the_charts_text_stays_readable(service, browser):
    # a chart's text scales with the chart: squeezed to a 375 px screen, its 11 px ticks were under 6 px
    srv, http = service
    register(http, "gpu-h", "phone", RISING)
    recompute(http)
    assert http.post("/jobs/phone/heartbeat", json={"throughput": 30.0, "workers": 1}, headers=AUTH).status_code == 200
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 375, "height": 800, "deviceScaleFactor": 1, "mobile": True}
    )
    try:
        browser.get(f"{srv.url}/ui/?refresh=3600#job/phone")
        wait_for(
            browser, lambda d: texts(d, "#job .chart .tick") and texts(d, "#history-chart svg rect"), "both charts"
        )
        heights = browser.execute_script(
            "return [...document.querySelectorAll('.chart .tick')].map(e => e.getBoundingClientRect().height)"
        )
        assert min(heights) >= 9, heights
        # the chart scrolls sideways inside its own box; the page does not
        assert browser.execute_script("const e = document.documentElement; return e.scrollWidth <= e.clientWidth")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_before_the_first_read_the_page_does_not_say_there_is_no_node(service, browser):
    # the page is served but a read it cannot do without fails (here /model is blocked; /health, which reads the
    # store, may fail alone now): the node list said "no node yet", as if the service had none, beside the banner
    # that it cannot be read
    srv, http = service
    register(http, "gpu-i", "hidden", STEEP)
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": [f"{srv.url}/model"]})
    try:
        browser.get(f"{srv.url}/ui/?refresh=3600")
        wait_for(browser, lambda d: d.execute_script("return !document.getElementById('error').hidden"), "the banner")
        assert "no node" not in text(browser, "#node-list")
        assert "not read yet" in text(browser, "#node-list")
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        browser.execute_cdp_cmd("Network.disable", {})


def test_while_the_first_read_is_under_way_the_page_shows_no_empty_box(service, browser):
    # a slow service: until its first answer the page showed an empty red error box and an empty "Job" section
    srv, http = service
    hold = browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument", {"source": "window.fetch = () => new Promise(() => {});"}
    )
    try:
        browser.get(f"{srv.url}/ui/?refresh=3600")
        wait_for(browser, lambda d: d.execute_script("return document.readyState") == "complete", "the page")
        assert text(browser, "#node-list") == "not read yet"
        shown = "return ['error', 'job'].map(id => document.getElementById(id).checkVisibility())"
        assert browser.execute_script(shown) == [False, False]
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": hold["identifier"]})


def test_a_point_measured_past_the_curves_end_is_drawn_where_it_was_measured(service, browser):
    # a job that runs with more workers than its curve covers: its point was drawn at the curve's last count
    # (clamped to the axis), as if measured there
    srv, http = service
    register(http, "gpu-j", "beyond", [10.0, 20.0, 30.0, 40.0])
    r = http.post("/jobs/beyond/heartbeat", json={"throughput": 55.0, "workers": 10}, headers=AUTH)
    assert r.status_code == 200, r.text
    browser.get(f"{srv.url}/ui/?refresh=3600#job/beyond")
    wait_for(browser, lambda d: texts(d, "#job svg > circle.measured"), "the measured point")
    last_x = float(attr(browser, "#job polyline.used", "points").split()[-1].split(",")[0])
    cx = float(attr(browser, "#job svg > circle.measured", "cx"))
    assert cx > last_x, (cx, last_x)
    # the axis reaches the count it was measured at, each count labelled (up to 16 of them)
    assert texts(browser, "#job .chart text.tick[text-anchor='middle']") == [str(w) for w in range(11)]
    # the curve predicts nothing at 10 workers: its table says so with a dash (not "NaN")
    assert texts(browser, "#job table.points tbody td")[:3] == ["10", "55", "–"]


def test_the_plans_chart_opens_on_a_node_with_active_jobs(service, browser):
    # it opened on the first node with any plan: on a long-running service, one whose jobs ended long ago
    srv, http = service
    register(http, "a-idle", "gone", STEEP)
    recompute(http)
    assert http.post("/jobs/gone/finish", headers=AUTH).status_code == 200
    register(http, "b-busy", "here", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: texts(d, "#history-chart .legend"), "the plans chart")
    assert text(browser, "#history-chart .legend").startswith("b-busy:")
    # and its menu shows the node the chart draws, not the first in the list
    menu = "const s = document.getElementById('history-node'); return [s.value, s.checkVisibility()]"
    assert browser.execute_script(menu) == ["b-busy", True]


def visible(browser, selector):
    """How many matches are shown (a closed <details> hides what it holds)."""
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].filter(e => e.checkVisibility()).length", selector
    )


def test_nodes_without_an_active_job_are_counted_below_the_others_in_a_closed_box(service, browser):
    # every node whose jobs had all ended stayed listed among the current ones, as long as the service ran
    srv, http = service
    register(http, "a-old", "done", STEEP)
    recompute(http)
    assert http.post("/jobs/done/finish", headers=AUTH).status_code == 200
    assert http.put("/nodes/c-spare", json={"cores": 4, "memory_mb": 4000}, headers=AUTH).status_code == 200
    register(http, "b-live", "live", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=1")
    wait_for(browser, lambda d: "live" in rows(d), "the active job")
    assert texts(browser, "#node-list > article.node", "data-node") == ["b-live"]
    assert text(browser, "#node-list details.idle summary") == "2 nodes without an active job"
    assert texts(browser, "#node-list details.idle article.node", "data-node") == ["a-old", "c-spare"]
    assert visible(browser, "details.idle article.node") == 0  # out of the way until asked for
    browser.find_element("css selector", "details.idle summary").click()
    wait_for(browser, lambda d: visible(d, "details.idle article.node") == 2, "the idle nodes once opened")
    # a refresh that redraws the list keeps the box open
    register(http, "b-live", "more", STEEP)
    recompute(http)
    wait_for(browser, lambda d: "more" in rows(d), "the new job")
    assert visible(browser, "details.idle article.node") == 2
    # and the keyboard's focus stays on the box's toggle, clicked above (the redraw replaced it: focus was lost)
    assert browser.execute_script("return document.activeElement.tagName") == "SUMMARY"
    # and when the last active job ends, its node joins the others there
    for job_id in ("live", "more"):
        assert http.post(f"/jobs/{job_id}/finish", headers=AUTH).status_code == 200
    wait_for(browser, lambda d: text(d, "details.idle summary") == "3 nodes without an active job", "three idle nodes")
    assert text(browser, "#node-list > p.empty") == "no active job on any node"
    assert http.get("/nodes").json()[0]["name"] == "a-old"  # the API still lists every node, as before


def test_a_store_that_is_down_leaves_what_memory_holds_on_the_page_and_says_what_is_missing(tmp_path, browser):
    # the job store's database stops answering (here its folder is removed and its pooled connections dropped,
    # as a restarted database server drops them): /health, /nodes and /plans answered 500 and the page showed
    # only "cannot read the service", though the service still held the active jobs and every node's plan
    with server_with_breakable_store(tmp_path) as (srv, http, break_store):
        register(http, "gpu-s", "kept", STEEP)
        register(http, "gpu-s", "also", FLAT)
        register(http, "gpu-s", "gone", RISING)
        assert http.post("/jobs/gone/finish", headers=AUTH).status_code == 200
        (plan,) = recompute(http)
        break_store()
        r = http.get("/nodes")
        assert r.status_code == 503 and "job store is unavailable" in r.json()["detail"], r.text

        browser.get(f"{srv.url}/ui/?refresh=1#job/kept")
        wait_for(browser, lambda d: {k: v["workers"] for k, v in rows(d).items()} == plan["workers"], "the plan")
        wait_for(browser, lambda d: d.execute_script("return !document.getElementById('error').hidden"), "banner")
        assert text(browser, "#error").startswith(
            "cannot read the service's health, the nodes' budgets, the plan history (HTTP 503: the job store is "
            "unavailable (its database did not answer); the service's log says why); the rest is current"
        ), text(browser, "#error")
        assert "cores and memory unknown" in text(browser, "article[data-node='gpu-s'] h3 .meta")
        assert not texts(browser, "article[data-node='gpu-s'] .cores")  # no bar of a budget not known
        assert text(browser, "#history-table tbody") == "the plan history cannot be read now"
        # an active job's page is drawn from memory; an ended one's needs the store
        wait_for(browser, lambda d: texts(d, "#job polyline.used"), "the active job's curve")
        assert text(browser, "#job .assigned-label") == f"plan: {plan['workers']['kept']} workers"
        browser.get(f"{srv.url}/ui/?refresh=1#job/gone")
        wait_for(browser, lambda d: "cannot be read now" in (text(d, "#job-detail") or ""), "the ended job")
        assert "the plan history, the job gone (HTTP 503: the job store is unavailable" in text(browser, "#error")
        assert "kept" in rows(browser)


def swatch_of(browser, job_id):
    return attr(browser, f"article.node tr[data-job='{job_id}'] .swatch", "style")


def test_a_jobs_colour_stays_the_same_across_reloads_whatever_other_jobs_come(service, browser):
    # colours were given in the order jobs were first drawn: after a reload that drew another job first (a new
    # node sorted before it) a job took that job's colour, and its own went to the newcomer
    srv, http = service
    register(http, "m-node", "target", STEEP)
    recompute(http)
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: "target" in rows(d) and texts(d, "#history-chart .legend .swatch"), "the job")
    before = swatch_of(browser, "target")
    assert attr(browser, "#history-chart .legend .swatch", "style") == before  # the same colour in the chart
    register(http, "a-node", "newcomer", FLAT)
    recompute(http)
    browser.refresh()
    wait_for(browser, lambda d: {"target", "newcomer"} <= set(rows(d)), "both jobs after the reload")
    assert swatch_of(browser, "target") == before
    assert swatch_of(browser, "newcomer") != before
    browser.get("about:blank")
    browser.get(f"{srv.url}/ui/?refresh=3600#job/newcomer")  # another page of it, opened anew
    wait_for(browser, lambda d: "target" in rows(d), "the job again")
    assert swatch_of(browser, "target") == before


def test_a_refresh_reads_every_nodes_plan_in_one_request(service, browser):
    # each refresh asked GET /nodes/{name}/plan once per node with a plan
    srv, http = service
    for i in range(3):
        register(http, f"p-node-{i}", f"p-job-{i}", STEEP)
    plans = {p["node"]: p for p in recompute(http)}
    browser.get(f"{srv.url}/ui/?refresh=3600")
    wait_for(browser, lambda d: len(rows(d)) == 3, "the three jobs")
    assert {k: v["workers"] for k, v in rows(browser).items()} == {
        f"p-job-{i}": plans[f"p-node-{i}"]["workers"][f"p-job-{i}"] for i in range(3)
    }
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert f"{srv.url}/plans/current" in loaded, loaded
    assert not [u for u in loaded if re.search(r"/nodes/[^/]+/plan$", u)], loaded


def test_a_job_of_ranks_shows_the_whole_jobs_plan_and_each_ranks_counts(service, browser):
    srv, http = service
    assert http.put("/nodes/gpu-r", json={"cores": 8, "memory_mb": 8000}, headers=AUTH).status_code == 200
    body = {"job_id": "ddp", "node": "gpu-r", "curve": STEEP, "ranks": 2}
    assert http.post("/jobs", json=body, headers=AUTH).status_code == 201
    (plan,) = recompute(http)
    assert plan["workers"] == {"ddp": 6}
    r = http.post("/jobs/ddp/heartbeat", json={"throughput": 100.0, "workers": 3}, headers=AUTH)
    assert r.json()["workers"] == 3
    browser.get(f"{srv.url}/ui/?refresh=1#job/ddp")
    row = "article[data-node='gpu-r'] tr[data-job='ddp'] td"
    wait_for(browser, lambda d: len(texts(d, row)) > 7 and texts(d, row)[3] == "2 × 3", "the ranked job's row")
    cells = texts(browser, row)
    # GPUs, the plan's total and its share a rank, what each rank runs and measured, the job against its peak
    assert cells[1:7] == ["2 (2 ranks)", "6 (2 × 3)", "2 × 3", "2 × 100", "200", "100%"]
    wait_for(browser, lambda d: text(d, "#job .assigned-label"), "the job's chart")
    assert text(browser, "#job .assigned-label") == "plan: 3 workers a rank"
    meta = text(browser, "#job-detail .meta")
    assert "2 ranks stepping together" in meta and "running with 3 a rank" in meta
    assert "samples/s of one rank" in texts(browser, "#job text.axis")
