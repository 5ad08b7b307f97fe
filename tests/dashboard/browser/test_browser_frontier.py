"""The frontier and the jump from a lost reference to its prune, in a real browser (Debian's
chromium through Playwright) against a real ``prunegate dashboard`` over a store holding a real,
traced sweep of the shipped sessions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.browser.chromium import click_until, dashboard_server, require_chromium, settle
from tests.paths import ARTIFACTS
from tracer.cli import main
from tracer.lab import sweep
from tracer.lab.recommend import recommend
from tracer.queries import list_sessions, lost_references
from tracer.store import Store
from tracer.traffic import import_paths, shipped_sessions_dir

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")
PlaywrightTimeout = playwright_api.TimeoutError


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    path = tmp_path_factory.mktemp("frontier") / "store"
    import_paths([shipped_sessions_dir()], path)
    names = sorted(r["name"] for r in list_sessions(path))[::5]
    assert main(["compare", "--store", str(path), "--policies", "recency,salience", "--budget", "1500,6000",
                 "--gated", "both", "--session", *names]) == 0
    rec = sweep.last_sweep(path)
    with dashboard_server(path, tmp_path_factory.mktemp("logs")) as (base, _):
        yield {"base": base, "path": path, "sweep": rec}


def open_frontier(pg: Any, server: dict[str, Any]) -> None:
    pg.goto(server["base"] + "/compare")
    settle(pg)
    click_until(pg, pg.get_by_role("tab", name="Frontier"),
                lambda: pg.get_by_text("Pareto frontier").count() > 0, "open the frontier tab")
    settle(pg, charts=1)


def point_of(pg: Any, trace: int, index: int) -> Any:
    """The screen position of one marker of the frontier chart (Plotly draws it under its drag layer)."""
    chart = pg.locator('[data-testid="stPlotlyChart"]').filter(has=pg.locator(".legendtext", has_text="Pareto frontier"))
    pts = chart.locator(".scatterlayer .trace").nth(trace).locator(".points path")
    box = pts.nth(index).bounding_box()
    assert box is not None, "the point is not drawn"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_the_frontier_shows_every_arm_and_a_click_opens_its_first_lost_reference(server: dict[str, Any],
                                                                                  page: Any) -> None:
    rec = server["sweep"]
    open_frontier(page, server)
    # every arm is a point (one trace per policy), the Pareto ones marked, the recommendation offered
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(
        has=page.locator(".legendtext", has_text="Pareto frontier"))
    assert chart.locator(".scatterlayer .trace .points path").count() == len(rec["arms"])
    invalid = [a for a in rec["arms"] if a["invalid_requests"]]
    assert invalid and not any(a["pareto"] for a in invalid)  # ungated arms sent 400s: shown, never optimal
    assert page.get_by_text(f"{len(invalid)} arms sent invalid requests (crosses)", exact=False).count() == 1
    best = recommend(rec, 0.95)["arm"]  # the page's default minimum
    assert best is not None
    assert page.get_by_text(f"Recommended: {best['arm']} (gated)", exact=False).count() == 1
    assert page.get_by_text(best["command"], exact=False).count() >= 1
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "frontier.png"))  # not full_page: that re-lays out the chart
    # hover: the arm's parameters
    arm = rec["arms"][0]  # recency at 1500 tokens: loses references
    assert arm["lost_references"] > 0
    x, y = point_of(page, 0, 0)
    page.mouse.move(x, y)
    hover = page.locator(".hoverlayer .hovertext")
    hover.first.wait_for(timeout=10_000)
    text = hover.first.text_content() or ""
    assert "recency budget=1500" in text and "budget 1500" in text and "retention" in text
    # click: the Replay page opens on that arm's first session with a lost reference, at that step
    want = next(r for r in arm["replays"] if r["first_lost_step"] is not None)
    for attempt in range(4):  # a click landing while Streamlit re-runs the script can be dropped
        page.mouse.click(x, y)
        try:  # Playwright's own wait: it processes the page's events while waiting (time.sleep does not)
            page.wait_for_url(re.compile(r"/replay\?"), timeout=30_000)
            break
        except PlaywrightTimeout:
            pass
        print(f"click on the frontier point: retry {attempt + 1}")  # noqa: T201 - shows in -s runs
        page.screenshot(path=str(ARTIFACTS / f"frontier-click-miss-{attempt}.png"))
        settle(page, charts=1)
        x, y = point_of(page, 0, 0)
    page.wait_for_url(re.compile(f"session={want['replay_id']}.*step={want['first_lost_step']}"
                                 f"|step={want['first_lost_step']}.*session={want['replay_id']}"), timeout=30_000)
    settle(page, charts=2)
    assert page.get_by_role("heading", name="Lost references").is_visible()
    page.screenshot(path=str(ARTIFACTS / "frontier-to-lost-reference.png"), full_page=True)

    # the jump from the lost reference to the prune that evicted its source
    with Store(server["path"]).reader() as r:
        lost = lost_references(r, want["replay_id"])
    here = lost[lost["step"] == want["first_lost_step"]]
    prune_seq = int(here["prune_seq"].dropna().iloc[0])
    jump = page.get_by_role("button", name=f"(step {prune_seq})").first
    decision = page.get_by_text(re.compile(r"\bpruned (\d+ units?|messages) \(")).first  # the decision as a sentence
    click_until(page, jump, lambda: f"step={prune_seq}" in page.url, "jump to the prune", shows=decision)
    settle(page, charts=2)
    assert decision.is_visible()  # the decision at this step
    with Store(server["path"]).reader() as r:
        [row] = r.query("SELECT name, attributes->>'prunegate.lost_references' AS n FROM spans "
                        "WHERE session_id = ? AND seq = ? AND name = 'prunegate.prune'", [want["replay_id"], prune_seq])
    assert int(row["n"]) >= 1  # the prune span says it cost references
    page.screenshot(path=str(ARTIFACTS / "lost-reference-to-prune.png"), full_page=True)
