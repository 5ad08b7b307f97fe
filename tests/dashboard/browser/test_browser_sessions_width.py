"""The Sessions table at 1,500 px (issue #29): the violations column is on screen and no policy
name is cut, asserted on the grid chromium draws.

The grid is a canvas that draws only the columns in view; its accessible table lists those columns
(the headers read here). Where each column starts and ends is read from the drawn pixels (the
grid's vertical rules across the header row), and a cell whose text was clipped has ink up to its
right rule, where a fitting one keeps the cell's padding clear.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.browser.chromium import dashboard_server, require_chromium, settle
from tests.dashboard_fixtures import demo_store, gated_session, orphan_session, recording

pytestmark = pytest.mark.browser
WIDTH = 1500
ROW = 35  # the grid's header and row height, px


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    path = tmp_path_factory.mktemp("width") / "store"
    demo_store(path, per_file=2)
    with recording(path) as provider:
        gated_session(provider)
        orphan_session(provider)
    with dashboard_server(path, tmp_path_factory.mktemp("logs")) as (base, proc):
        yield {"base": base, "path": path}


def _rules(img: Any) -> list[int]:
    """x of every vertical rule of the header row: a column of pixels darker than the header's
    background from its top to its bottom (letters are shorter than the row)."""
    w = img.width
    px = img.load()
    xs = []
    for x in range(w):
        col = [sum(px[x, y]) for y in range(4, ROW - 4)]
        top = sum(px[x, 1])
        if all(v < 3 * 245 for v in col) and max(col) - min(col) <= 24 and abs(col[0] - top) < 60:
            xs.append(x)
    merged: list[int] = []
    for x in xs:
        if merged and x - merged[-1] <= 2:
            merged[-1] = x
        else:
            merged.append(x)
    return merged


def test_sessions_page_at_1500_px_shows_violations_and_whole_policy_names(server: dict[str, Any],
                                                                         browser: Any) -> None:
    from PIL import Image

    context = browser.new_context(viewport={"width": WIDTH, "height": 1400})
    pg = context.new_page()
    try:
        pg.goto(server["base"] + "/sessions")
        settle(pg)
        grid = pg.locator('[data-testid="stDataFrame"]').first
        grid.wait_for(timeout=30_000)
        grid.locator("td").first.wait_for(state="attached", timeout=30_000)  # the grid has drawn its rows
        heads = [t.strip() for t in grid.locator("th").all_inner_texts()]
        assert "violations" in heads and "policy" in heads, f"columns drawn at {WIDTH} px: {heads}"
        policies = [t for t in grid.locator("td").all_inner_texts() if " · " in t]
        assert any("ungated" in p for p in policies) and any("gated" in p for p in policies), policies
        pg.mouse.move(0, 0)  # no hover highlight on the grid
        img = Image.open(io.BytesIO(grid.screenshot())).convert("RGB")
        rules = _rules(img)
        box = grid.bounding_box()
        assert box is not None and box["x"] + box["width"] <= WIDTH
        # left of the first rule is the row-selection column; then column i (heads[i]) runs from rule i to i + 1
        spans = list(zip(rules, rules[1:], strict=False))
        assert len(spans) > heads.index("violations"), (rules, heads)
        v0, v1 = spans[heads.index("violations")]
        assert v1 - v0 >= 40 and v1 <= img.width - 1, f"the violations column is not wholly drawn: {v0}-{v1}"
        p0, p1 = spans[heads.index("policy")]
        px = img.load()
        rows = min(len(policies), (img.height - ROW) // ROW)
        assert rows >= 3
        for r in range(rows):  # the ink of each drawn policy name stops short of the column's rule
            y0 = ROW + r * ROW
            ink = [x for x in range(p0 + 2, p1 - 1) for y in range(y0 + 8, y0 + ROW - 8) if sum(px[x, y]) < 3 * 150]
            assert ink, f"row {r}: no policy name drawn between x={p0} and x={p1}"
            assert max(ink) <= p1 - 5, f"row {r}: the policy name runs into the column's edge (cut) at x={max(ink)}/{p1}"
    finally:
        context.close()
