"""Regenerate the dashboard screenshots in docs/img/ (referenced by docs/dashboard.md).

Builds a demo-like store in a temporary directory (sessions from data/sessions replayed under three
arms through the real replay engine, plus the scripted sessions of the tests), serves it with
``prunegate dashboard`` on a free 127.0.0.1 port and photographs, in Debian's /usr/bin/chromium
driven by Playwright (the browser tests' helpers) every page: Start, the Replay page at a violation
caused by an ungated prune that evicted several units (annotated; its conversation, then its trace
view), Sessions, Violations, Annotations, Live, and Compare (results, the default run, that run
saved and reopened from its URL, and the Frontier of the sweep the run stored).

    .venv/bin/python scripts/screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))



def build(path: Path) -> None:
    from tests.dashboard_fixtures import demo_store, gated_session, orphan_session, recording

    demo_store(path, per_file=2)
    with recording(path) as provider:
        gated_session(provider)
        orphan_session(provider)


def violation_to_show(path: Path) -> tuple[str, int]:
    """A violation whose ungated cause evicted messages from the most units (session, step)."""
    from tracer import queries
    from tracer.queries import explain
    from tracer.store import Store

    best: tuple[int, str, int] | None = None
    with Store(path).reader() as r:
        found = queries.violations(r)
        for rec in found[found["prune_gated"].eq(False) & found["prune_seq"].notna()].to_dict("records"):
            before = queries.units_at(r, rec["session_id"], int(rec["prune_seq"]) - 1)
            units = len(explain.evicted_units(before, rec["pruned_ids"]))
            if rec["code"] == "orphan_tool_result" and (best is None or units > best[0]):
                best = (units, str(rec["session_id"]), int(rec["seq"]))
    if best is None:
        raise SystemExit("no ungated violation in the demo store")
    return best[1], best[2]


def wait(page: Any, charts: int = 0) -> None:
    """Streamlit idle and ``charts`` Plotly charts drawn (the tests' wait), then Plotly's transitions."""
    from tests.dashboard.browser.chromium import settle

    settle(page, timeout=60, charts=charts)
    time.sleep(1.0)


def annotate_violation(store: Path, sid: str, step: int) -> None:
    """A reviewer's annotation on the violation shown, so the Replay page shows one."""
    from tracer.contract import names as sn
    from tracer.queries.writes import annotate
    from tracer.store import Store

    with Store(store).reader() as r:
        span = r.query("SELECT span_id FROM spans WHERE session_id = ? AND seq = ? AND name = ? LIMIT 1",
                       [sid, step, sn.VIOLATION])[0]["span_id"]
    annotate(Store(store), sid, span_id=span, label="needs-review",
             note="the ungated prune split the tool-call unit: the result outlived its call", author="docs")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    from tests.dashboard.browser.chromium import CHROMIUM, CHROMIUM_ARGS, dashboard_server

    names = ("start", "replay", "replay-trace", "sessions", "violations", "annotations", "live", "compare",
             "compare-run", "compare-saved", "compare-frontier")
    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        store = Path(tmp) / "store"
        build(store)
        sid, step = violation_to_show(store)
        annotate_violation(store, sid, step)
        with dashboard_server(store, Path(tmp)) as (base, _), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 4400})  # Streamlit scrolls inside: a tall window
            page.goto(f"{base}/replay?session={sid}&step={step}")
            wait(page, charts=4)
            page.screenshot(path=str(out / "replay.png"), full_page=True)  # down to the annotations
            page.goto(f"{base}/replay?session={sid}&step={step}&view=Trace")
            wait(page, charts=5)
            page.screenshot(path=str(out / "replay-trace.png"), full_page=True)
            page.set_viewport_size({"width": 1500, "height": 3000})
            page.goto(f"{base}/")
            wait(page)
            page.screenshot(path=str(out / "start.png"), full_page=True)
            page.goto(f"{base}/violations?session={sid}")
            wait(page, charts=2)
            page.screenshot(path=str(out / "violations.png"), full_page=True)
            page.goto(f"{base}/live")
            wait(page)
            page.screenshot(path=str(out / "live.png"), full_page=True)
            page.goto(f"{base}/sessions?q=&kind=replay&gate=ungated&violations=1")
            wait(page)
            page.screenshot(path=str(out / "sessions.png"), full_page=True)
            page.goto(f"{base}/annotations")
            wait(page)
            page.screenshot(path=str(out / "annotations.png"), full_page=True)
            page.goto(f"{base}/compare?metric=invalid_requests")
            wait(page, charts=3)
            page.screenshot(path=str(out / "compare.png"), full_page=True)
            page.get_by_role("tab", name="Run a comparison").click()
            wait(page)
            page.get_by_role("button", name="Run comparison").click()
            page.get_by_text("and recorded them into the store as new sessions", exact=False).wait_for(timeout=180_000)
            wait(page)
            page.screenshot(path=str(out / "compare-run.png"), full_page=True)
            page.get_by_label("Title", exact=True).last.fill("recency vs salience, default run")
            page.get_by_role("button", name="Save this comparison").last.click()
            page.get_by_role("button", name="Open the saved comparison").click()
            page.wait_for_url("**saved=*", timeout=60_000)
            wait(page)
            page.screenshot(path=str(out / "compare-saved.png"), full_page=True)
            page.goto(f"{base}/compare?tab=Frontier")  # the run above was stored as a sweep
            wait(page, charts=1)
            page.screenshot(path=str(out / "compare-frontier.png"), full_page=True)
            browser.close()
    for name in names:
        print(out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
