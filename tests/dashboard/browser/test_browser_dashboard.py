"""The dashboard in a real browser: Debian's chromium driven by Playwright against a real
``prunegate dashboard`` server on 127.0.0.1, over a demo-like store.

Skipped (with the reason) only when /usr/bin/chromium is absent outside CI; in CI (``CI=true``)
a missing browser fails. Screenshots land in tests/artifacts/ (gitignored).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.browser.chromium import click_until, dashboard_server, require_chromium, settle
from tests.dashboard_fixtures import (
    HOSTILE,
    HOSTILE_NAME,
    demo_store,
    gated_session,
    orphan_session,
    recording,
)
from tests.paths import ARTIFACTS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A demo-like store and a real ``prunegate dashboard`` serving it on a free local port."""
    require_chromium()
    path = tmp_path_factory.mktemp("browser") / "store"
    info = demo_store(path, per_file=2)
    with recording(path) as provider:  # written last: the most recent session, named with HTML
        gated_session(provider)
        orphan_session(provider, name=HOSTILE_NAME)
    with dashboard_server(path, tmp_path_factory.mktemp("logs")) as (base, proc):
        yield {"base": base, "info": info, "path": path, "proc": proc}


def wait_for_url(pg: Any, part: str, timeout: float = 15.0) -> None:
    def address() -> str:  # the address bar (history.replaceState can run ahead of Playwright's pg.url)
        return str(pg.evaluate("location.href"))

    deadline = time.monotonic() + timeout
    while part not in address() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert part in address(), f"expected {part!r} in {address()}"


def open_page(pg: Any, server: dict[str, Any], path: str, charts: int = 0) -> None:
    pg.goto(server["base"] + path)
    settle(pg, charts=charts)


def assert_literal_hostile_text(pg: Any, where: str, expect: str) -> None:
    """``expect`` (recorded HTML) is visible as literal text; nothing it holds became markup."""
    assert pg.dialogs == [], f"{where}: a dialog fired: {pg.dialogs}"
    shown = pg.get_by_text(expect, exact=False)
    deadline = time.monotonic() + 15  # a page that refreshes itself (Live) may be mid-rerun: wait for it
    while not any(shown.nth(i).is_visible() for i in range(shown.count())):
        assert time.monotonic() < deadline, f"{where}: {expect!r} is not visible as text"
        pg.wait_for_timeout(250)
    assert pg.locator("b", has_text="bold").count() == 0, f"{where}: a <b> element was created from recorded text"
    assert pg.locator("script", has_text="alert(1)").count() == 0, f"{where}: a <script> element was created"


def pick_option(pg: Any, label: str, option_text: str) -> None:
    """Choose an option of the Streamlit selectbox labelled ``label``."""
    pg.get_by_role("combobox", name=label, exact=True).click()
    pg.get_by_role("option").filter(has_text=option_text).first.click()
    settle(pg)


# ----------------------------------------------------------------------------- tests
def test_browser_opens_a_violation_and_shows_its_causal_eviction(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/sessions")
    assert page.get_by_role("heading", name="Sessions").is_visible()
    click_until(page, page.get_by_role("link", name="Violations").first, lambda: "/violations" in page.url,
                "open the Violations page", shows=page.get_by_role("heading", name="Violations"))
    assert page.get_by_role("heading", name="Violations").is_visible()
    pick_option(page, "Violation", "s-orphan · step 8 · orphan_tool_result")
    settle(page, charts=2)
    assert page.get_by_text("orphan_tool_result at step 8 of session s-orphan").is_visible()
    assert page.get_by_role("heading", name="Causal eviction").is_visible()
    cause = page.get_by_text("Caused by prunegate.prune at step 5 (budget check #1): policy salience, ungated, "
                             "evicted m3")
    assert cause.is_visible()
    assert page.get_by_text("before the prune (step 4)").count() > 0  # the context before/after charts
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "violation-causal-eviction.png"), full_page=True)
    # and the link to the replay at the prune's step
    click_until(page, page.get_by_role("link", name="Open in replay at step 5"), lambda: "/replay" in page.url,
                "open the replay at the prune")
    wait_for_url(page, "step=5")
    assert page.get_by_role("heading", name="Replay").is_visible()
    page.screenshot(path=str(ARTIFACTS / "replay-at-prune.png"), full_page=True)


def test_browser_renders_recorded_html_as_text_on_every_page(server: dict[str, Any], page: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    # Sessions: search the hostile name; the picker shows it literally
    open_page(page, server, "/sessions")
    page.get_by_label("Search sessions", exact=True).fill("bold")
    page.get_by_label("Search sessions", exact=True).press("Enter")
    settle(page)
    assert_literal_hostile_text(page, "sessions", HOSTILE_NAME)
    page.screenshot(path=str(ARTIFACTS / "hostile-sessions.png"), full_page=True)

    # Replay: the session's name and the tool result holding the script, as text
    open_page(page, server, "/replay?session=s-orphan&step=7", charts=2)
    assert_literal_hostile_text(page, "replay", HOSTILE_NAME)
    assert_literal_hostile_text(page, "replay content", "<script>alert(1)</script> and <b>bold</b>")
    page.screenshot(path=str(ARTIFACTS / "hostile-replay.png"), full_page=True)

    # Violations: the evicted turn's recorded content
    open_page(page, server, "/violations?session=s-orphan", charts=2)
    assert_literal_hostile_text(page, "violations", HOSTILE)
    page.screenshot(path=str(ARTIFACTS / "hostile-violations.png"), full_page=True)

    # Compare: recorded session names in the picker and the chart labels
    open_page(page, server, "/compare", charts=3)
    assert_literal_hostile_text(page, "compare", "trip <b>bold</b>")
    page.screenshot(path=str(ARTIFACTS / "hostile-compare.png"), full_page=True)

    # Live: the most recent session (named with HTML) is followed by default
    open_page(page, server, "/live", charts=1)
    assert_literal_hostile_text(page, "live", HOSTILE_NAME)
    page.screenshot(path=str(ARTIFACTS / "hostile-live.png"), full_page=True)
    assert page.dialogs == []


def test_browser_replay_steps_and_plays(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/replay?session=s-gated&step=0", charts=2)
    click_until(page, page.get_by_role("button", name="Next deferral"), lambda: "step=5" in page.url,
                "jump to the next deferral")
    open_page(page, server, "/replay?session=s-gated&step=6", charts=2)
    switch = page.get_by_role("switch", name="Play")  # the input is hidden; its label takes the click
    for _ in range(4):  # not click_until: its settle() would wait for Play to finish
        page.get_by_text("Play", exact=True).click()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (switch.is_checked() or "step=6" not in page.url):
            time.sleep(0.1)
        if switch.is_checked() or "step=6" not in page.url:
            break
    thumb = page.locator('[data-testid="stSliderThumbValue"]')
    seen: set[str] = set()
    deadline = time.monotonic() + 60  # Play reaches the last step, then switches itself off
    while time.monotonic() < deadline and (switch.is_checked() or thumb.inner_text().strip() != "10"):
        shown = thumb.inner_text().strip()
        if shown not in ("6", "10") and page.url.endswith(f"step={shown}"):
            seen.add(shown)  # mid-play, the address bar shows the step on screen
        time.sleep(0.1)
    assert thumb.inner_text().strip() == "10", f"Play stopped at step {thumb.inner_text()} ({page.url})"
    assert not switch.is_checked()
    wait_for_url(page, "step=10", timeout=5)  # the URL you copy is the step you see
    assert seen, "while playing, the URL never showed the step on screen"
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "replay-played.png"), full_page=True)


# ----------------------------------------------------------------------------- replay: why a request broke
EVICTED_STROKE = "stroke: rgb(213, 94, 0)"  # charts.EVICTED_COLOR #D55E00
VIOLATING_STROKE = "stroke: rgb(0, 0, 0)"  # charts.VIOLATING_COLOR


def _multi_unit_ungated_violation(path: Path) -> dict[str, Any]:
    """From the store: a violation caused by an ungated prune that took messages from several units,
    with the units each pruned message was in just before (read with context_at, message by message)."""
    from tracer import queries
    from tracer.store import Store

    with Store(path).reader() as r:
        found = queries.violations(r)
        for rec in found[found["prune_gated"].eq(False) & found["prune_seq"].notna()].to_dict("records"):
            before = queries.context_at(r, rec["session_id"], int(rec["prune_seq"]) - 1)
            unit_of = dict(zip(before["message_id"], before["unit_id"], strict=True))
            units = sorted({unit_of[m] for m in rec["pruned_ids"] if m in unit_of})
            if len(units) >= 2 and rec["code"] == "orphan_tool_result" and rec["message_ids"]:
                now = queries.context_at(r, rec["session_id"], int(rec["seq"]))
                bad = sorted(set(now.loc[now["message_id"].isin(list(rec["message_ids"])), "unit_id"]))
                root = queries.session_root(r, rec["session_id"])
                return {**rec, "units": units, "violating": bad, "root": root,
                        "now_units": queries.units_at(r, rec["session_id"], int(rec["seq"]))}
    raise AssertionError("the demo store holds no ungated prune that evicted several units and caused a violation")


def _chart(pg: Any, title_prefix: str) -> Any:
    charts = pg.locator('[data-testid="stPlotlyChart"]').filter(
        has=pg.locator(".gtitle", has_text=title_prefix))
    assert charts.count() >= 1, f"no chart titled {title_prefix!r}"
    return charts.first


def _drawn(locator: Any) -> int:
    """How many of these SVG shapes have an area (legend placeholders draw an empty path)."""
    return int(locator.evaluate_all("els => els.filter(e => { const b = e.getBBox(); "
                                    "return b.width > 0 && b.height > 0; }).length"))


def _cells(pg: Any, wanting: str | None = None) -> list[str]:
    """Every cell of every table on the page, as the grid exposes them (its accessible table); with
    ``wanting``, once a cell says it (tables render one after another), else what is there after 20 s."""
    deadline = time.monotonic() + 20
    cells: list[str] = []
    while time.monotonic() < deadline:
        cells = pg.locator('[data-testid="stDataFrame"] td').all_inner_texts()
        if cells and (wanting is None or wanting in cells):
            return cells
        time.sleep(0.5)
    return cells


def test_browser_replay_shows_why_a_request_broke(server: dict[str, Any], page: Any) -> None:
    v = _multi_unit_ungated_violation(server["path"])
    sid, seq, pseq = v["session_id"], int(v["seq"]), int(v["prune_seq"])
    open_page(page, server, f"/replay?session={sid}&step={seq}", charts=4)
    assert page.get_by_role("heading", name="Why this request broke").is_visible()
    assert page.get_by_text(f"violation(s) at step {seq}", exact=False).first.is_visible()
    # the complete causal eviction: every evicted unit named and outlined before the prune
    line = page.get_by_text(re.compile(r"^Evicted \d+ message\(s\) in \d+ unit\(s\)")).filter(
        has_text=v["units"][0])
    text = line.first.inner_text()
    assert f"in {len(v['units'])} unit(s)" in text or all(u in text for u in v["units"]), text
    for unit in v["units"]:
        assert re.search(rf"(^|[:;] ){re.escape(unit)} \(", text), f"{unit} missing from {text!r}"
    before = _chart(page, f"before the eviction (step {pseq - 1})")
    outlined = _drawn(before.locator(f'.point path[style*="{EVICTED_STROKE}"]'))
    assert outlined == len(v["units"]), f"{outlined} outlined, expected {v['units']}"
    assert page.get_by_text(f"policy {v['policy']}, ungated, reason over_budget", exact=False).first.is_visible()
    # the violating unit marked on the context at this step
    marked = page.get_by_text("Violating unit(s) at this step, outlined in black:", exact=False)
    assert marked.is_visible()
    for unit in v["violating"]:
        assert unit in marked.inner_text()
    main = _chart(page, "tokens in context")
    assert _drawn(main.locator(f'.point path[style*="{VIOLATING_STROKE}"]')) >= len(v["violating"])
    # labelled segments and a legend naming colours, hatching and outlines
    labels = main.locator(".bartext").evaluate_all("els => els.map(e => e.textContent)")
    units = v["now_units"]
    biggest = units.sort_values("tokens").iloc[-1]
    assert any(t.startswith(str(biggest["unit_id"])) and t.endswith(f"{int(biggest['tokens']):,} tok")
               for t in labels), labels
    legend = main.locator(".legendtext").evaluate_all("els => els.map(e => e.textContent)")
    assert {"user", "assistant", "violating unit", "pinned (never pruned)"} <= set(legend), legend
    # two step buttons that say which way they go; no literal None in any table
    assert page.get_by_role("button", name="◀ previous step").is_visible()
    assert page.get_by_role("button", name="next step ▶").is_visible()
    assert page.get_by_role("button", name="step", exact=True).count() == 0
    cells = _cells(page)
    assert cells and "None" not in [c.strip() for c in cells], [c for c in cells if c.strip() == "None"][:5]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "replay-why.png"), full_page=True)
    # the same step under the gate, one click away
    link = page.get_by_role("link", name=re.compile(r"^Same step under the gate"))
    assert link.is_visible()
    click_until(page, link, lambda: f"session={sid}" not in page.url and "step=" in page.url,
                "open the same step under the gate")
    settle(page, charts=2)
    assert page.get_by_text("salience · gated", exact=False).first.is_visible()


def test_browser_violations_outline_every_evicted_unit(server: dict[str, Any], page: Any) -> None:
    v = _multi_unit_ungated_violation(server["path"])
    open_page(page, server, f"/violations?session={v['session_id']}&violation={v['span_id']}", charts=2)
    before = _chart(page, f"before the prune (step {int(v['prune_seq']) - 1})")
    assert _drawn(before.locator(f'.point path[style*="{EVICTED_STROKE}"]')) == len(v["units"])
    cells = _cells(page, "pruned units")
    assert "pruned units" in cells, cells
    i = cells.index("pruned units")
    assert all(u in cells[i + 1] for u in v["units"]), cells[i + 1]


# ----------------------------------------------------------------------------- navigation and sessions
def _metric(pg: Any, label: str) -> str:
    box = pg.locator('[data-testid="stMetric"]').filter(has=pg.get_by_text(label, exact=True))
    return box.locator('[data-testid="stMetricValue"]').first.inner_text().strip()


def _store_counts(path: Path) -> dict[str, Any]:
    """What the sessions page should say, read back from the store with plain SQL."""
    from tracer.store import Store

    with Store(path).reader() as r:
        con = r.con

        def ids(sql: str, params: dict[str, Any] | None = None) -> set[str]:
            return {str(x[0]) for x in con.execute(sql, params or {}).fetchall()}

        return {
            "all": ids("SELECT DISTINCT session_id FROM spans WHERE session_id IS NOT NULL"),
            "recorded": ids("SELECT session_id FROM spans WHERE name = 'prunegate.session' "
                            "AND attributes->>'prunegate.session.source' <> 'replay'"),
            "orphan_code": ids("SELECT DISTINCT session_id FROM spans WHERE name = 'prunegate.violation' "
                               "AND attributes->>'prunegate.violation.code' = 'orphan_tool_result'"),
            "hotel": ids("SELECT DISTINCT session_id FROM spans WHERE name = 'prunegate.message' "
                         "AND contains(lower(attributes->>'prunegate.message.content'), 'hotel avenida')"),
        }


def test_browser_every_page_has_a_path(server: dict[str, Any], page: Any) -> None:
    for path, heading in (("/sessions", "Sessions"), ("/replay?session=s-gated&step=5", "Replay"),
                          ("/violations", "Violations"), ("/compare", "Compare policies"), ("/live", "Live"),
                          ("/annotations", "Annotations"),
                          ("/", "prunegate")):
        open_page(page, server, path)
        assert page.get_by_role("heading", name=heading, exact=True).is_visible(), path
        assert page.get_by_text("Page not found").count() == 0, path
    # a session at a step is a link
    open_page(page, server, "/replay?session=s-gated&step=5", charts=2)
    assert page.locator('[data-testid="stSliderThumbValue"]').inner_text().strip() == "5"
    # a violation is a link
    from tracer import queries
    from tracer.store import Store

    with Store(server["path"]).reader() as r:
        v = queries.violations(r, session_id="s-orphan")
    one = v[v["code"] == "orphan_tool_result"].iloc[0]
    open_page(page, server, f"/violations?violation={one['span_id']}", charts=2)
    assert page.get_by_text(f"orphan_tool_result at step {int(one['seq'])} of session s-orphan").is_visible()


def _inotify_watches(pid: int) -> int:
    """Files and directories the process watches with inotify (its fdinfo lists one line per watch)."""
    n = 0
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            n += sum(line.startswith("inotify wd:") for line in fd.read_text().splitlines())
        except FileNotFoundError:  # a descriptor closed while we read
            continue
    return n


def test_browser_server_watches_no_source_file(server: dict[str, Any], page: Any) -> None:
    """No Streamlit file watcher (dashboard.__main__.DEFAULTS): after every page run it re-resolved
    every imported module's path on the server's event loop, and it watched the app's files."""
    for path in ("/sessions", "/compare", "/"):
        open_page(page, server, path)
    prunegate = server["proc"].pid
    children = [int(c) for t in Path(f"/proc/{prunegate}/task").iterdir()
                for c in (t / "children").read_text().split()]
    assert len(children) == 1, children  # prunegate dashboard -> python -m dashboard
    assert _inotify_watches(children[0]) == 0


def test_browser_sessions_search_filters_and_pages(server: dict[str, Any], page: Any) -> None:
    want = _store_counts(server["path"])
    open_page(page, server, "/sessions")
    assert _metric(page, "Matching sessions") == f"{len(want['all']):,}"
    assert _metric(page, "● Recorded") == f"{len(want['recorded']):,}"
    assert _metric(page, "↻ Replays") == f"{len(want['all']) - len(want['recorded']):,}"
    # search message text: the URL keeps it
    box = page.get_by_label("Search sessions", exact=True)
    box.fill("Hotel Avenida")
    box.press("Enter")
    wait_for_url(page, "q=Hotel")
    settle(page)
    assert _metric(page, "Matching sessions") == f"{len(want['hotel']):,}"
    assert set(_cells(page)) & want["hotel"] == want["hotel"]
    # search a violation code
    open_page(page, server, "/sessions?q=orphan_tool_result")
    assert _metric(page, "Matching sessions") == f"{len(want['orphan_code']):,}"
    # recorded traffic only: every row says so at a glance
    open_page(page, server, "/sessions?kind=recorded")
    assert _metric(page, "Matching sessions") == f"{len(want['recorded']):,}"
    kinds = [c for c in _cells(page) if c in ("● recorded", "↻ replay")]
    assert kinds and set(kinds) == {"● recorded"}
    # paging: 10 per page
    open_page(page, server, "/sessions?size=10")
    total = len(want["all"])
    assert page.get_by_text(f"Showing 1–10 of {total:,} (page 1 of {-(-total // 10)})").is_visible()
    shown = page.get_by_text(f"Showing 11–20 of {total:,} (page 2 of {-(-total // 10)})")
    click_until(page, page.get_by_role("button", name="next page ▶"), lambda: "page=2" in page.evaluate("location.href"),
                "next page", shows=shown)
    assert shown.is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sessions-paged.png"), full_page=True)


# ----------------------------------------------------------------------------- compare
def _replay_count(path: Path) -> int:
    from tracer.store import Store

    with Store(path).reader() as r:
        return int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans WHERE name = 'prunegate.session' "
                                 "AND attributes->>'prunegate.session.source' = 'replay'").fetchall()[0][0])


def _selected(pg: Any, label: str) -> str:
    box = pg.locator('[data-testid="stSelectbox"]').filter(has=pg.get_by_text(label, exact=True)).first
    values = box.locator("input").evaluate_all("els => els.map(e => e.value)")
    return " ".join([box.inner_text(), *values])


def test_browser_compare_results_read_at_a_glance_and_link(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/compare", charts=3)
    assert "recency · gated" in _selected(page, "Baseline arm")  # not the alphabetically first arm
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".legendtitletext"))
    chart = chart.filter(has_text="arm − baseline").first
    legend, plot = chart.locator(".legend").bounding_box(), chart.locator(".barlayer").first.bounding_box()
    assert legend and plot and legend["y"] + legend["height"] <= plot["y"] + 1, (legend, plot)  # above, not over
    fills = chart.locator(".trace.bars").evaluate_all(
        "els => els.map(t => (t.querySelector('.point path') || {style: {}}).style.fill)")
    assert len(fills) >= 2 and len(set(fills)) == len(fills), fills  # one distinct colour per series
    # the comparison is a link: change the metric, reopen the URL elsewhere
    pick_option(page, "Metric", "invalid_requests")
    wait_for_url(page, "metric=invalid_requests")
    url = page.evaluate("location.href")
    other = page.context.new_page()
    other.goto(url)
    settle(other, charts=3)
    assert "invalid_requests" in _selected(other, "Metric")
    assert "recency · gated" in _selected(other, "Baseline arm")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare-results.png"), full_page=True)


def test_browser_compare_default_run_answers_and_downloads(server: dict[str, Any], page: Any) -> None:
    from tracer import queries
    from tracer.store import Store

    with Store(server["path"]).reader() as r:
        recorded = queries.sessions(r, exclude_sources=("replay",), complete=True, summary=False, order="started",
                                    limit=2000)
        peaks = queries.session_metrics(r, session_ids=list(recorded["session_id"][:5]))["peak_tokens"]
    before = _replay_count(server["path"])
    open_page(page, server, "/compare", charts=3)
    click_until(page, page.get_by_role("tab", name="Run a comparison"),
                lambda: page.get_by_text("Default budget", exact=False).count() > 0, "open the run tab")
    budget = int(page.get_by_label("Budget (tokens; 0: 60% of each session)").input_value().replace(",", ""))
    assert 0 < budget < int(peaks.min()), (budget, list(peaks))
    assert page.get_by_text(f"Default budget {budget:,} tokens", exact=False).is_visible()
    assert page.get_by_text("recorded into the store as a new session", exact=False).first.is_visible()
    page.get_by_role("button", name="Run comparison").click()
    page.get_by_text("and recorded them into the store as new sessions", exact=False).or_(
        page.get_by_text("The comparison failed", exact=False)).first.wait_for(timeout=120_000)
    settle(page)
    success = page.get_by_text("and recorded them into the store as new sessions", exact=False)
    assert success.is_visible()
    # it ran in a status box with a progress bar (collapsed once complete, its label says what ran)
    assert page.locator('[data-testid="stExpander"]').filter(has_text=re.compile(r"Replayed \d+ sessions")).count() == 1
    assert page.locator('[data-testid="stProgress"]').count() >= 1
    # a meaningful answer: the gate-less arms break requests at this budget, the gated ones do not
    lines = page.get_by_text(re.compile(r"· (gated|ungated): \d+ invalid requests")).all_inner_texts()
    ungated = [int(re.search(r"ungated: (\d+) invalid", t).group(1)) for t in lines if "· ungated:" in t]
    gated = [int(re.search(r"gated: (\d+) invalid", t).group(1)) for t in lines if "· gated:" in t]
    assert ungated and sum(ungated) > 0 and gated == [0] * len(gated), lines
    assert page.get_by_text(f"Depends on: budget {budget:,} tokens", exact=False).is_visible()
    assert _replay_count(server["path"]) - before == len(lines) * min(5, len(recorded))  # what it said it recorded
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download CSV").first.click()
    rows = Path(dl.value.path()).read_text().strip().splitlines()
    assert len(rows) - 1 == len(lines) * min(5, len(recorded))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare-run.png"), full_page=True)
    # the run saved: reopened from its URL, the same lines without re-running (no new replay)
    runs_before = _replay_count(server["path"])
    title = page.get_by_label("Title", exact=True).last
    deadline = time.monotonic() + 20  # a re-run can replace the input under a fill: fill until it holds
    while title.input_value() != "default run" and time.monotonic() < deadline:
        title.fill("default run")
        settle(page)
    title.press("Tab")
    page.get_by_role("button", name="Save this comparison").last.click()
    page.get_by_role("button", name="Open the saved comparison").wait_for(timeout=30_000)
    assert page.get_by_text("Saved as “default run”", exact=False).is_visible()
    click_until(page, page.get_by_role("button", name="Open the saved comparison"),
                lambda: "saved=" in page.evaluate("location.href"), "open the saved run",
                shows=page.get_by_role("heading", name="default run"))
    assert page.get_by_role("heading", name="default run").is_visible()
    for line in lines:
        assert page.get_by_text(line, exact=True).is_visible(), line
    assert _replay_count(server["path"]) == runs_before
    open_page(page, server, "/compare", charts=3)
    click_until(page, page.get_by_role("tab", name="Run a comparison"),
                lambda: page.get_by_text("Default budget", exact=False).count() > 0, "open the run tab again")
    # a failed run clears the previous success
    page.get_by_label("Policy parameters (optional)", exact=True).fill("nosuchpolicy@x=1")
    page.get_by_role("button", name="Run comparison").click()
    page.get_by_text("The comparison failed:", exact=False).first.wait_for(timeout=60_000)
    settle(page)
    assert page.get_by_text("and recorded them into the store as new sessions", exact=False).count() == 0


# ----------------------------------------------------------------------------- annotations, saved comparisons
def test_browser_annotates_a_violation_lists_and_filters_by_its_label(server: dict[str, Any], page: Any) -> None:
    from tracer import queries
    from tracer.store import Store

    with Store(server["path"]).reader() as r:
        v = queries.violations(r, session_id="s-orphan")
    one = v[v["code"] == "orphan_tool_result"].iloc[0]
    step = int(one["seq"])
    open_page(page, server, f"/replay?session=s-orphan&step={step}", charts=2)
    page.get_by_role("heading", name="Annotations").scroll_into_view_if_needed()
    pick_option(page, "On", f"the violation at step {step}")
    page.get_by_label("Label", exact=True).fill("needs-review")
    page.get_by_label("Note", exact=True).fill("partner evicted: <b>bold</b> <script>alert(1)</script>")
    page.get_by_role("button", name="Save annotation").click()
    page.get_by_text("Saved the annotation", exact=False).wait_for(timeout=30_000)
    settle(page)
    with Store(server["path"]).reader() as r:  # read back from the store: on the violation's span
        stored = queries.annotation_list(r, labels=["needs-review"])
    assert list(stored["span_id"]) == [one["span_id"]] and list(stored["session_id"]) == ["s-orphan"]
    assert page.get_by_text("Labels: needs-review", exact=False).is_visible()  # the page shows it at once
    assert "needs-review" in _cells(page, "needs-review")
    # listed on the Annotations page, the note as text
    open_page(page, server, "/annotations?label=needs-review")
    assert page.get_by_text("1 annotations labelled needs-review").is_visible()
    assert "partner evicted: <b>bold</b> <script>alert(1)</script>" in _cells(page, "partner evicted: <b>bold</b> <script>alert(1)</script>")
    assert page.dialogs == [] and page.locator("b", has_text="bold").count() == 0
    # the Sessions page filters by it, and the address bar says so
    open_page(page, server, "/sessions")
    page.get_by_role("combobox", name="Annotation label").click()
    page.get_by_role("option").filter(has_text="needs-review").first.click()
    settle(page)
    wait_for_url(page, "label=needs-review")
    assert _metric(page, "Matching sessions") == "1"
    assert "s-orphan" in _cells(page, "s-orphan")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sessions-by-label.png"), full_page=True)


def test_browser_saves_a_comparison_and_reopens_it_from_its_url(server: dict[str, Any], page: Any) -> None:
    from tracer import queries
    from tracer.store import Store

    open_page(page, server, "/compare?metric=prunes", charts=3)
    page.get_by_role("heading", name="Save").scroll_into_view_if_needed()
    page.get_by_label("Title", exact=True).first.fill("prunes per arm")
    page.get_by_role("button", name="Save this comparison").first.click()
    page.get_by_text("Saved as “prunes per arm”", exact=False).wait_for(timeout=30_000)
    with Store(server["path"]).reader() as r:
        saved = queries.saved_comparisons(r)
        ident = str(saved.loc[saved["title"] == "prunes per arm", "id"].iloc[0])
        metrics = queries.session_metrics(r)
    summary = queries.arm_summary(metrics[metrics["source"] == "replay"], "prunes")
    # listed on the page
    open_page(page, server, "/compare", charts=3)
    click_until(page, page.get_by_text("Saved comparisons"), lambda: "prunes per arm" in _cells(page),
                "open the list of saved comparisons")
    # a new page opens the URL: the stored numbers, the same the store gives now
    other = page.context.new_page()
    other.goto(server["base"] + f"/compare?saved={ident}")
    settle(other)
    assert other.get_by_role("heading", name="prunes per arm").is_visible()
    for rec in summary.to_dict("records"):
        line = f"{rec['arm']}: mean prunes {rec['mean']:.4g} (95% CI"
        assert other.get_by_text(line, exact=False).is_visible(), line
    ARTIFACTS.mkdir(exist_ok=True)
    other.screenshot(path=str(ARTIFACTS / "compare-saved.png"), full_page=True)
    click_until(other, other.get_by_role("button", name="◀ all comparisons"),
                lambda: "saved=" not in other.evaluate("location.href"), "back to all comparisons",
                shows=other.get_by_role("tab", name="Run a comparison"))
    assert other.get_by_role("tab", name="Run a comparison").is_visible()
