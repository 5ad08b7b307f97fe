"""The dashboard reads as words, in a real browser (Debian's chromium, Playwright, a real server):
tables without "None" and with words for column names, no request leaving the machine, a
violation's mark not hiding its prune's, a colour and pattern per arm, compare tables at 3
significant digits with a verdict and no total for a share, tabs in the URL, annotation
targets without span ids, the event log opening at the current step, the conversation and the
trace view of a replay.

What each test checks is read from the page (the grid's own cells, Plotly's figure data, the
address bar) and compared with the store where the store has the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.browser.chromium import click_until, dashboard_server, require_chromium, settle
from tests.dashboard_fixtures import demo_store, gated_session, orphan_session, recording
from tests.paths import ARTIFACTS

pytestmark = pytest.mark.browser
HEX_ID = re.compile(r"\b[0-9a-f]{16}\b")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    path = tmp_path_factory.mktemp("readable") / "store"
    info = demo_store(path, per_file=2)
    with recording(path) as provider:
        gated_session(provider)
        orphan_session(provider)
    with dashboard_server(path, tmp_path_factory.mktemp("logs")) as (base, proc):
        yield {"base": base, "info": info, "path": path, "proc": proc}


def open_page(pg: Any, server: dict[str, Any], path: str, charts: int = 0) -> None:
    pg.goto(server["base"] + path)
    settle(pg, timeout=120, charts=charts)


def grid(pg: Any, key: str) -> dict[str, list[str]]:
    """The header and cells of the table with widget key ``key``, as the grid renders them (its
    accessible table lists the columns drawn on screen)."""
    where = f".st-key-table-{key}"
    pg.locator(where).scroll_into_view_if_needed(timeout=90_000)
    pg.wait_for_selector(f"{where} th", state="attached", timeout=90_000)
    pg.wait_for_selector(f"{where} td", state="attached", timeout=90_000)
    return pg.evaluate("""(where) => {
        const header = Array.from(document.querySelectorAll(`${where} th`));
        const cols = header.map(e => e.getAttribute("aria-colindex"));
        const rows = Array.from(document.querySelectorAll(`${where} tbody tr`)).map(tr => cols.map(c => {
            const td = tr.querySelector(`td[aria-colindex="${c}"]`); return td ? td.textContent : ""; }));
        return {header: header.map(e => e.textContent), rows: rows,
                cells: Array.from(document.querySelectorAll(`${where} td`)).map(e => e.textContent)}; }""", where)


def figure(pg: Any, key: str) -> list[dict[str, Any]]:
    """The traces of the Plotly chart with key ``key``, as Plotly holds them."""
    pg.wait_for_selector(f".st-key-{key} .js-plotly-plot", timeout=90_000)
    return pg.evaluate("""(key) => document.querySelector(`.st-key-${key} .js-plotly-plot`).data.map(t => ({
        name: t.name, x: t.x, y: t.y, marker: t.marker}))""", key)


def test_no_page_asks_the_internet_for_anything(server: dict[str, Any], page: Any) -> None:
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(server["base"]) or r.url.startswith("data:")
            else outside.append(r.url))
    for path in ("/", "/sessions", "/replay?session=s-orphan&step=5", "/violations", "/compare", "/annotations"):
        open_page(page, server, path)
        page.wait_for_timeout(500)
    assert outside == [], f"requests left the machine: {sorted(set(outside))}"


def test_violations_tables_show_no_none(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/violations?session=s-orphan", charts=2)
    for key in ("violations_table", "violations_facts", "violations_partners"):
        table = grid(page, key)
        assert "None" not in table["cells"], (key, table["cells"][:30])
        assert all("_" not in h for h in table["header"]), (key, table["header"])


def test_a_violation_mark_never_hides_the_prune_mark(server: dict[str, Any], page: Any) -> None:
    from tracer import queries
    from tracer.store import Store

    with Store(server["path"]).reader() as r:
        found = queries.violations(r)
    both = found[found["prune_seq"] == found["seq"]]  # a violation at the step of the prune that caused it
    rec = (both if not both.empty else found[found["prune_seq"].notna()]).iloc[0]
    open_page(page, server, f"/replay?session={rec['session_id']}&step={int(rec['seq'])}", charts=2)
    traces = {t["name"]: t for t in figure(page, "replay_token_chart")}
    prune = next(t for n, t in traces.items() if n.startswith("prune"))
    violation = next(t for n, t in traces.items() if n.startswith("violation"))
    assert prune["name"] == "prune (units evicted)" and "provider would refuse" in violation["name"]
    at_prune = dict(zip(prune["x"], prune["y"], strict=True))
    for x, y in zip(violation["x"], violation["y"], strict=True):
        if x in at_prune:
            assert y > at_prune[x], f"the violation at step {x} is drawn on the prune's mark"
    line = traces["context tokens"]
    for x, y in zip(violation["x"], violation["y"], strict=True):  # every ✖ sits above the line at its step
        at = max((lx for lx in line["x"] if lx <= x), default=line["x"][0])
        assert y > line["y"][line["x"].index(at)], f"the violation at step {x} is drawn on the line"
    title = page.evaluate("() => document.querySelector('.st-key-replay_token_chart .js-plotly-plot')"
                          ".layout.xaxis.title.text")
    assert "prunegate." not in title


def test_every_arm_has_its_own_colour_and_pattern(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/compare", charts=2)
    [bars] = figure(page, "compare_bars")
    pairs = list(zip(bars["x"], bars["marker"]["color"], bars["marker"]["pattern"]["shape"], strict=True))
    assert len({(c, p) for _, c, p in pairs}) == len(pairs), pairs
    for arm, _, pattern in pairs:  # the pattern says the gate
        assert (pattern == "/") == arm.endswith("ungated"), pairs


def test_compare_tables_give_a_verdict_and_no_total_for_a_share(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/compare?metric=retention", charts=2)
    summary = grid(page, "compare_summary")
    assert "total" not in summary["header"] and "mean" in summary["header"], summary["header"]
    numbers = [c for c in summary["cells"] if re.fullmatch(r"-?\d[\d,]*\.\d+", c)]
    assert all(len(c.replace("-", "").replace(",", "").replace(".", "").lstrip("0")) <= 3 for c in numbers), numbers
    diffs = grid(page, "compare_diff_summary")
    assert "verdict" in diffs["header"], diffs["header"]
    verdicts = [r[diffs["header"].index("verdict")] for r in diffs["rows"]]
    assert verdicts and all(re.fullmatch(r"(better|worse) \((higher|lower)\)|no clear difference|too few sessions",
                                         v) for v in verdicts), verdicts
    assert page.get_by_text("For retention, higher is better.").is_visible()


def test_the_compare_tab_is_in_the_url(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/compare")
    click_until(page, page.get_by_role("tab", name="Frontier"),
                lambda: "tab=Frontier" in page.evaluate("location.href"), "open the frontier tab")
    link = page.evaluate("location.href")
    page.goto(link)
    settle(page, timeout=120)
    selected = page.get_by_role("tab", selected=True)
    assert selected.inner_text().strip() == "Frontier", f"{link} opened {selected.inner_text()}"


def test_annotation_targets_read_without_span_ids(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/replay?session=s-orphan&step=5", charts=2)
    picker = page.get_by_role("combobox", name="On", exact=True)
    picker.scroll_into_view_if_needed()
    picker.click()
    page.get_by_role("option").first.wait_for(timeout=60_000)
    options = page.get_by_role("option").all_inner_texts()
    assert len(options) >= 2 and any("decision at step 5" in o for o in options), options
    assert not [o for o in options if HEX_ID.search(o)], options


def test_event_log_opens_at_the_current_step(server: dict[str, Any], page: Any) -> None:
    res = max(server["info"]["results"], key=lambda r: r.prunes)
    from tracer import queries
    from tracer.store import Store

    with Store(server["path"]).reader() as r:
        lo, hi = queries.session_bounds(r, res.replay_id)
    step = (lo + hi) // 2
    open_page(page, server, f"/replay?session={res.replay_id}&step={step}", charts=2)
    log = grid(page, "replay_events")
    width = len(log["header"])
    steps = [int(s) for s in log["cells"][log["header"].index("step")::width]]
    first_here = next(i for i, s in enumerate(steps) if s >= step)
    assert first_here <= 3, f"step {step} is row {first_here} of the event log: {steps[:12]}"


def test_replay_shows_the_conversation_in_the_providers_shape_and_the_trace(server: dict[str, Any],
                                                                          page: Any) -> None:
    from tracer import queries
    from tracer.store import Store

    with Store(server["path"]).reader() as r:
        roots = r.con.execute(
            "SELECT session_id FROM spans WHERE name = 'prunegate.session' AND source = 'replay' "
            "AND attributes->>'prunegate.provider' = 'openai' ORDER BY session_id").fetchall()
        sid = roots[0][0]
        lo, hi = queries.session_bounds(r, sid)
        tree = queries.span_tree(r, sid)
    open_page(page, server, f"/replay?session={sid}&step={hi}", charts=2)
    page.get_by_text("Raw (as sent to the provider)").click()
    settle(page, timeout=120)
    raw = "\n".join(page.locator('.st-key-replay_thread_box [data-testid="stCode"]').all_inner_texts())
    assert '"role": "assistant"' in raw and '"type": "tool_use"' not in raw, raw[:1500]
    if '"tool_calls"' in raw:  # OpenAI as OpenAI: calls as functions with JSON arguments, results as tool messages
        assert '"type": "function"' in raw and '"role": "tool"' in raw and '"tool_call_id"' in raw
    page.screenshot(path=str(ARTIFACTS / "replay-conversation.png"), full_page=True)
    click_until(page, page.get_by_role("tab", name="Trace"), lambda: "view=Trace" in page.evaluate("location.href"),
                "open the trace view")
    bars = figure(page, "replay_trace_chart")[0]
    assert len(bars["y"]) == min(400, len(tree))
    table = grid(page, "replay_trace_table")
    assert {"span", "step", "duration (ms)", "status"} <= set(table["header"]), table["header"]
    assert table["cells"][table["header"].index("span")] == "session"
    page.screenshot(path=str(ARTIFACTS / "replay-trace.png"), full_page=True)
