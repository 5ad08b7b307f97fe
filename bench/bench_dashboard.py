"""How fast does the dashboard show one replay step of a large session?

Generates a session of about 5,000 messages and 50,000 spans (a synthetic agent run of 1,000 turns
with parallel tool calls whose results stream in 6 deltas, replayed under the gate with a small
budget so it prunes and defers throughout) into a temporary store through the real replay engine,
observer and store pipeline. Then, side by side in this run, it times:

- one replay step (context as units, messages in context, event log, decision): cold (the
  session read from a fresh store snapshot first, as on the first step the page shows) and warm
  (the session already read and cached, as on every next step);
- "which messages are in context at step k" in DuckDB over the extracted events, next to a
  Python loop over the session's message spans computing only the ids, as a baseline;
- reading the session once (root, extracted tables, token series, markers, bounds);
- one AppTest run of the replay page at that step (cold Streamlit caches), end to end;
- with ``--browser``: a jump to the next prune/deferral in Debian's chromium against a real
  ``prunegate dashboard`` server, from the click to the page fully drawn;
all at a middle and at the last step (the most events to scan), on the uncompacted store (Parquet
segments) and again after compaction into spans.duckdb. The target is 1.5 s per step.

Then the Sessions page at ``--sessions`` sessions (default 10,000): a demo-like set of real
sessions (recorded ones imported from data/sessions, each replayed under three arms through the
real replay engine) is cloned in DuckDB, with new session, trace and span ids, until the store
holds that many sessions; it times the page's query (first page, cold reader) and a full AppTest
run of the page with cold caches (first render), then a filter (policy + ungated + violations),
a search over message text / tools / decisions / violation codes, and a later page, each as the
page's rerun after the widget change. The goal is under 1 s each.

    .venv/bin/python bench/bench_dashboard.py [--turns 1000] [--stream 6] [--repeat 5] [--store DIR] [--browser]
                                              [--sessions 10000] [--skip-steps] [--baseline DIR]

``--pages`` (alone): every page and the key interactions in chromium against a real server, at
``--scales`` sessions (default 100 and 10,000; the stores are built once and kept under
~/.cache/prunegate/bench), ``-n`` rounds each, p50 / p95 side by side (docs/dashboard.md, "Speed"):

    flock /tmp/prunegate-bench.lock .venv/bin/python bench/bench_dashboard.py --pages --scales 100,10000 -n 5

``--baseline DIR`` (a checkout of another commit) also runs that commit's Replay page and this
one's taking turns on the same compacted store, and prints the medians and their ratio: under a
shared machine's load, the honest way to say whether a change made the page slower.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tracer import queries  # noqa: E402
from tracer.lab.replay import ReplaySpec, replay_session  # noqa: E402
from tracer.store import ENV_STORE, Store  # noqa: E402
from tracer.traffic.importers import conversation_from_body  # noqa: E402
from tracer.traffic.recorded import close_provider, store_tracer_provider  # noqa: E402

TARGET_S = 1.5
WORDS = "flight hotel Lisbon Porto museum ticket price seat window aisle breakfast river tram castle".split()


def long_body(turns: int, seed: int = 0) -> dict[str, Any]:
    """An Anthropic request body of ``turns`` user/assistant turns, 1-3 parallel calls each."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    msgs: list[dict[str, Any]] = []
    for t in range(turns):
        msgs.append({"role": "user", "content": f"turn {t}: " + text(30)})
        calls = [{"type": "tool_use", "id": f"toolu_{t}_{j}", "name": rng.choice(["search_flights", "get_weather",
                                                                                   "book_hotel"]),
                  "input": {"q": text(3)}} for j in range(rng.randint(1, 3))]
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": text(10)}, *calls]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c["id"], "content": text(50)}
                                                 for c in calls]})
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": text(20)}]})
    return {"model": "claude-bench", "max_tokens": 1024, "system": "You are a bench agent.", "messages": msgs}


def generate(store: Path, turns: int, stream: int) -> str:
    """Replay the long conversation into ``store``; returns the replay's session id."""
    conv = conversation_from_body(long_body(turns), "anthropic", name=f"bench-{turns}-turns", file="bench")
    provider = store_tracer_provider(store)
    try:
        result = replay_session(conv, ReplaySpec("recency", gated=True, stream_results=stream, budget=6000),
                                tracer_provider=provider, capture_content=True)
    finally:
        close_provider(provider)
    assert result.replay_id is not None
    return result.replay_id


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median seconds of ``repeat`` calls (after one warm-up), and the last result."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def session_bundle(store: Store, sid: str) -> dict[str, Any]:
    """What the page reads once per session (and again only when the store changes): the root,
    the extracted tables, bounds, token series, markers, budget (dashboard.components.data._bundle)."""
    with store.reader() as r:
        root = queries.session_root(r, sid)
        tables = queries.session_tables(r, sid)
    return {"tables": tables, "bounds": queries.bounds_from_tables(tables),
            "series": queries.series_from_tables(tables), "markers": queries.markers_from_tables(tables),
            "budget": queries.budget_from_tables(tables, root)}


def step_cold(store: Store, sid: str, seq: int) -> dict[str, Any]:
    """One replay step from nothing: read the session, then compute the step."""
    return queries.step_from_tables(session_bundle(store, sid)["tables"], seq)


def step_warm(tables: dict[str, Any], seq: int) -> dict[str, Any]:
    """One replay step once the session is read (every next step on the page): context as
    messages and units, event log and decision, by DuckDB over the extracted tables."""
    return queries.step_from_tables(tables, seq)


def python_loop_context(store: Store, sid: str, seq: int) -> set[str]:
    """Baseline: fetch the session's message spans up to ``seq`` and replay them in Python."""
    with store.reader() as r:
        rows = r.con.execute(
            "SELECT attributes FROM spans WHERE session_id = $sid AND name = 'prunegate.message' AND seq <= $seq "
            "ORDER BY seq, start_time_ns", {"sid": sid, "seq": seq}).fetchall()
    present: set[str] = set()
    for (attrs,) in rows:
        a = json.loads(attrs)
        if a["prunegate.event"] == "remove":
            present.discard(a["prunegate.message.id"])
        else:
            present.add(a["prunegate.message.id"])
    return present


def cold_apptest(store: Path, page: str, params: dict[str, str] | None = None) -> tuple[Any, float]:
    """An AppTest of the dashboard page ``views/<page>.py`` over ``store``, run once with cold caches
    (first render): the AppTest and the run's seconds."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ[ENV_STORE] = str(store)
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
    at.run()  # registers the pages
    at.switch_page(f"views/{page}.py")
    for k, v in (params or {}).items():
        at.query_params[k] = v
    st.cache_data.clear()
    st.cache_resource.clear()
    t0 = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"the {page} page failed: {at.exception[0].value}")
    return at, elapsed


def apptest_step(store: Path, sid: str, seq: int) -> float:
    """One cold AppTest run of the replay page at ``seq``; seconds."""
    return cold_apptest(store, "replay", {"session": sid, "step": str(seq)})[1]


def apptest_in(checkout: Path, store: Path, sid: str, seq: int) -> tuple[float, float]:
    """:func:`apptest_step` run by ``checkout``'s own copy of this benchmark and dashboard (another
    commit's tree), in a fresh process; (wall seconds of the page run, CPU seconds of the process)."""
    import subprocess

    code = ("import sys, time; from pathlib import Path; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/bench']; "
            "import bench_dashboard as b; c = time.process_time(); "
            "w = b.apptest_step(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])); print(w, time.process_time() - c)")
    done = subprocess.run([sys.executable, "-c", code, str(checkout), str(store), sid, str(seq)], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(checkout)}, check=False)
    if done.returncode:
        raise RuntimeError(f"{checkout}: the replay page run failed: {done.stderr[-1500:]}")
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def against_baseline(baseline: Path, store: Path, sid: str, seq: int, repeat: int) -> list[tuple[str, float]]:
    """The Replay page at ``seq``, this checkout and ``baseline`` taking turns (so both see the same
    load): medians of wall and CPU time, and their ratios."""
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for _ in range(repeat):
        theirs.append(apptest_in(baseline, store, sid, seq))
        ours.append(apptest_in(REPO, store, sid, seq))
    med = {k: statistics.median(v) for k, v in (
        ("ours_wall", [w for w, _ in ours]), ("ours_cpu", [c for _, c in ours]),
        ("base_wall", [w for w, _ in theirs]), ("base_cpu", [c for _, c in theirs]))}
    print(f"  replay page at step {seq}, {repeat} turns each: this checkout {med['ours_wall']:.3f} s "
          f"(process CPU {med['ours_cpu']:.2f} s), baseline {baseline} {med['base_wall']:.3f} s "
          f"(CPU {med['base_cpu']:.2f} s): wall ratio {med['ours_wall'] / med['base_wall']:.2f}, "
          f"CPU ratio {med['ours_cpu'] / med['base_cpu']:.2f}")
    return [("compacted: AppTest replay page run, this checkout (median, turns)", med["ours_wall"]),
            ("compacted: AppTest replay page run, baseline (median, turns)", med["base_wall"])]


def page_in(checkout: Path, sessions: int, page: str) -> float:
    """A cold AppTest run of the dashboard page ``page`` (``views/<page>.py``; the Replay page at the
    bench's session and step) by ``checkout``'s own copy of this benchmark and dashboard, in a fresh
    process, over that checkout's own store of ``sessions`` sessions (:func:`scale_store`); seconds."""
    import subprocess

    code = ("import sys; from pathlib import Path; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/bench']; "
            "import bench_dashboard as b; s = b.scale_store(int(sys.argv[2])); sid, step = b._pick_session(s); "
            "p = {'session': sid, 'step': str(step)} if sys.argv[3] == 'replay' else {}; "
            "print(b.cold_apptest(s, sys.argv[3], p)[1])")
    done = subprocess.run([sys.executable, "-c", code, str(checkout), str(sessions), page], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(checkout)}, check=False)
    if done.returncode:
        raise RuntimeError(f"{checkout}: the {page} page run failed: {done.stderr[-1500:]}")
    return float(done.stdout.split()[-1])  # after any progress output


def pages_against_baseline(baseline: Path, sessions: int, pages: Sequence[str], repeat: int) -> int:
    """Cold AppTest runs of ``pages``, this checkout and ``baseline`` (another commit's tree) taking
    turns, each in a fresh process over its own store: medians side by side and their ratio (the
    server's share of a first visit, robust to the load a browser figure moves with)."""
    print(f"| page (cold AppTest run, {sessions:,} sessions) | baseline median | this checkout median | ratio | n |")
    print("|---|---|---|---|---|")
    for page in pages:
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(repeat):
            theirs.append(page_in(baseline, sessions, page))
            ours.append(page_in(REPO, sessions, page))
        a, b = statistics.median(theirs), statistics.median(ours)
        print(f"| {page} | {a:.2f} s | {b:.2f} s | {b / a:.2f} | {repeat} |", flush=True)
    with open("/proc/loadavg") as f:
        print("load average (1, 5, 15 min) at the end:", " ".join(f.read().split()[:3]))
    return 0


def browser_steps(store_dir: Path, sid: str, seq: int, clicks: int = 4) -> list[float]:
    """Seconds from a "Next prune/deferral" click to the page fully drawn, in Debian's chromium
    against a real ``prunegate dashboard`` server (``--browser``; the browser tests' server and chromium)."""
    from playwright.sync_api import sync_playwright

    from tests.dashboard.browser.chromium import CHROMIUM, CHROMIUM_ARGS, dashboard_server

    out: list[float] = []
    idle = '[data-testid="stApp"][data-test-script-state="notRunning"]'
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-logs-") as logs, \
            dashboard_server(store_dir, Path(logs)) as (base, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1500})
        page.goto(f"{base}/replay?session={sid}&step={seq}")
        page.wait_for_selector(idle, timeout=120_000)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=120_000)
        time.sleep(2)
        for i in range(clicks):
            thumb = page.locator('[data-testid="stSliderThumbValue"]').inner_text()
            t0 = time.perf_counter()
            page.get_by_role("button", name="Next prune" if i % 2 == 0 else "Next deferral").click()
            page.wait_for_function("b => document.querySelector('[data-testid=stSliderThumbValue]')"
                                   ".innerText != b", arg=thumb, timeout=60_000)
            page.wait_for_selector(idle, timeout=60_000)
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            out.append(time.perf_counter() - t0)
            time.sleep(0.5)
        browser.close()
    return out


def measure(store_dir: Path, sid: str, repeat: int, label: str) -> list[tuple[str, float]]:
    store = Store(store_dir)
    with store.reader() as r:
        bounds = queries.session_bounds(r, sid)
        tables = queries.session_tables(r, sid)
    assert bounds is not None
    lo, hi = bounds
    rows = []
    for name, seq in (("middle", (lo + hi) // 2), ("last", hi)):
        cold_s, out = timed(lambda seq=seq: step_cold(store, sid, seq), repeat)
        warm_s, _ = timed(lambda seq=seq: step_warm(tables, seq), repeat)
        ctx_s, ctx = timed(lambda seq=seq: queries.step_from_tables(tables, seq)["messages"], repeat)
        py_s, present = timed(lambda seq=seq: python_loop_context(store, sid, seq), repeat)
        assert present == set(ctx["message_id"]), "DuckDB and the Python loop disagree"
        app_s = apptest_step(store_dir, sid, seq)
        print(f"  [{label}] step {seq} ({name}): {len(out['messages']):,} messages / {len(out['units']):,} units "
              f"in context")
        rows += [
            (f"{label}: step, cold (read the session, then the step), {name}", cold_s),
            (f"{label}: step, warm (session already read), {name}", warm_s),
            (f"{label}: context in DuckDB over extracted events, {name}", ctx_s),
            (f"{label}: context ids by a Python loop over spans, {name}", py_s),
            (f"{label}: AppTest replay page run, cold caches, {name}", app_s),
        ]
    s_s, _ = timed(lambda: session_bundle(store, sid), repeat)
    rows.append((f"{label}: read the session (root, tables, series, markers)", s_s))
    return rows


# ----------------------------------------------------------------------------- the sessions page at scale
def template_store(path: Path) -> int:
    """A demo-like store of real sessions (imported, each replayed under three arms); returns how many."""
    sys.path.insert(0, str(REPO))
    from tests.dashboard_fixtures import demo_store

    demo_store(path, per_file=3)
    with Store(path).reader() as r:
        return int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans").fetchall()[0][0])


def clone_sessions(template: Path, target: Path, sessions: int) -> int:
    """Copy the template's spans into ``target`` until it holds ``sessions`` sessions: every copy
    gets new session ids (and its replays point at the copy of their recording), new trace and
    span ids, and start times one second later per copy. Returns the number of spans written."""
    import duckdb

    from tracer.store.schema import ARROW_SCHEMA, PROMOTED_NAMES

    with Store(template).reader() as r:
        table = r.con.sql("SELECT * FROM spans").to_arrow_table()
        per_copy = int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans").fetchall()[0][0])
    copies = -(-sessions // per_copy)
    con = duckdb.connect()
    con.register("t", table)
    store = Store(target)
    written = 0
    promoted = ", ".join(PROMOTED_NAMES)  # the typed columns (schema 2): no session id in them, copied as they are
    for start in range(0, copies, 50):
        out = con.sql(f"""
            SELECT md5(trace_id || '-' || i::VARCHAR) AS trace_id,
                   substr(md5(span_id || '-' || i::VARCHAR), 1, 16) AS span_id,
                   CASE WHEN parent_span_id IS NULL THEN NULL
                        ELSE substr(md5(parent_span_id || '-' || i::VARCHAR), 1, 16) END AS parent_span_id,
                   trace_state, name, kind,
                   start_time_ns + i * 1000000000 AS start_time_ns, end_time_ns + i * 1000000000 AS end_time_ns,
                   status_code, status_message,
                   regexp_replace(CAST(attributes AS VARCHAR), '"((imp|replay|s)-[0-9a-z-]+)"',
                                  '"\\1-c' || i::VARCHAR || '"', 'g') AS attributes,
                   CAST(events AS VARCHAR) AS events,
                   CASE WHEN links IS NULL THEN NULL ELSE CAST(links AS VARCHAR) END AS links,
                   CAST(resource AS VARCHAR) AS resource, scope_name, scope_version,
                   session_id || '-c' || i::VARCHAR AS session_id, seq, {promoted}
            FROM t, range($lo, $hi) r(i)
            WHERE session_id IS NOT NULL
        """, params={"lo": start, "hi": min(copies, start + 50)}).to_arrow_table()
        store.write_table(out.cast(ARROW_SCHEMA), fsync=False)
        written += out.num_rows
    return written


def sessions_page_run(store_dir: Path, change: Callable[[Any], Any] | None = None,
                      params: dict[str, str] | None = None) -> tuple[float, float | None]:
    """Seconds of an AppTest run of the Sessions page with cold caches (first render), and, with
    ``change``, of the rerun after that widget change (the filter's response; its query is new)."""
    at, first = cold_apptest(store_dir, "sessions", params)
    if change is None:
        return first, None
    t0 = time.perf_counter()
    change(at).run()
    again = time.perf_counter() - t0
    if at.exception:
        raise RuntimeError(f"the sessions page failed after the change: {at.exception[0].value}")
    return first, again


def measure_sessions(store_dir: Path, label: str) -> list[tuple[str, float]]:
    from tracer.queries import catalog

    store = Store(store_dir)

    def query(**kw: Any) -> dict[str, Any]:
        with store.reader() as r:
            return catalog.session_page(r, **kw)

    rows: list[tuple[str, float]] = []
    q_s, page = timed(lambda: query(), 3)
    total = page["total"]
    rows.append((f"{label}: sessions query, first page of {total:,} (fresh reader)", q_s))
    f_s, filt = timed(lambda: query(policies=("salience",), gated=False, only_with_violations=True), 3)
    rows.append((f"{label}: sessions query, filter salience+ungated+violations ({filt['total']:,})", f_s))
    s_s, hit = timed(lambda: query(search="refund_order"), 3)
    rows.append((f"{label}: sessions query, search 'refund_order' ({hit['total']:,})", s_s))
    with store.reader() as r:
        if r.catalog:  # the clones share their texts; make every text distinct so no scan is reused
            d_s, _ = timed(lambda: r.con.execute(
                "SELECT count(DISTINCT session_id) FROM (SELECT session_id, text || session_id AS t "
                "FROM store.search_text) WHERE contains(t, $q)", {"q": "orphan_tool_result"}).fetchall(), 3)
            rows.append((f"{label}: search scan with every text made distinct", d_s))
    first, flt = sessions_page_run(store_dir, lambda at: at.selectbox(key="sessions_gate").set_value("ungated"))
    rows.append((f"{label}: AppTest Sessions page, first render, cold caches", first))
    rows.append((f"{label}: AppTest Sessions page, filter gate=ungated (rerun)", flt or 0.0))
    _, srch = sessions_page_run(store_dir, lambda at: at.text_input(key="sessions_q").input("orphan_tool_result"))
    rows.append((f"{label}: AppTest Sessions page, search 'orphan_tool_result' (rerun)", srch or 0.0))
    _, nxt = sessions_page_run(store_dir, lambda at: at.checkbox(key="sessions_only_v").check(),
                               params={"page": "3"})
    rows.append((f"{label}: AppTest Sessions page 3, filter with violations (rerun)", nxt or 0.0))
    return rows


def sessions_bench(sessions: int) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        template, target = Path(tmp) / "template", Path(tmp) / "store"
        t0 = time.perf_counter()
        per = template_store(template)
        spans = clone_sessions(template, target, sessions)
        store = Store(target)
        with store.reader() as r:
            n = int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans").fetchall()[0][0])
        print(f"sessions store: {n:,} sessions ({per} real ones cloned), {spans:,} spans, "
              f"{len(store.pending_segments())} segments, built in {time.perf_counter() - t0:.1f}s")
        rows = measure_sessions(target, "segments")
        store.compact()
        rows += measure_sessions(target, "compacted")
    return rows


# ----------------------------------------------------------------------------- every page in chromium
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "prunegate" / "bench"
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"][data-test-connection-state="CONNECTED"]'


def scale_store(sessions: int, rebuild: bool = False) -> Path:
    """A compacted store of ``sessions`` sessions (the demo-like template cloned, see
    :func:`clone_sessions`), built once and kept under ``~/.cache/prunegate/bench``."""
    import shutil

    from tracer.store.catalog import CATALOG_VERSION
    from tracer.store.schema import SCHEMA_VERSION

    # the catalog's version in the key: a checkout with another catalog gets its own store (compaction
    # would otherwise rebuild the catalog back and forth between checkouts sharing the cache)
    key = f"dashboard-{sessions}-schema{SCHEMA_VERSION}-catalog{CATALOG_VERSION}"
    path = CACHE / key
    if (path / "READY").exists() and not rebuild:
        return path / "store"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    template = CACHE / f"template-schema{SCHEMA_VERSION}"
    if not (template / "READY").exists() or rebuild:
        shutil.rmtree(template, ignore_errors=True)
        template.mkdir(parents=True)
        template_store(template / "store")
        (template / "READY").write_text("")
    t0 = time.perf_counter()
    spans = clone_sessions(template / "store", path / "store", sessions)
    Store(path / "store").compact()
    (path / "READY").write_text(f"{spans}\n")
    print(f"built {path / 'store'}: {spans:,} spans in {time.perf_counter() - t0:.0f} s")
    return path / "store"


TIMEOUT_S = 60.0


def _ready(pg: Any, done: Callable[[], bool], timeout: float = 120.0, idle: bool = True) -> float:
    """Wait until ``done()`` holds and Streamlit is idle for three polls in a row (and every Plotly
    chart on the page is drawn); the time the quiet streak began (what a user waits for).
    ``idle=False``: a page whose timer reruns it (Live) counts once ``done()`` holds."""
    deadline = time.perf_counter() + timeout
    began: float | None = None
    streak = 0
    while time.perf_counter() < deadline:
        now = time.perf_counter()
        ok = done() and (not idle or pg.locator(IDLE).count() > 0) and pg.locator("h1").count() > 0 and (
            pg.locator('[data-testid="stPlotlyChart"]').count()
            <= pg.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').count())
        if ok:
            began = now if began is None else began
            streak += 1
            if streak >= 3:
                return began
        else:
            began, streak = None, 0
        time.sleep(0.05)
    raise TimeoutError(f"not ready after {timeout:.0f} s at {pg.url}")


def _thumb(pg: Any) -> str:
    loc = pg.locator('[data-testid="stSliderThumbValue"]')
    return str(loc.first.inner_text()) if loc.count() else ""


def browser_pages(store_dir: Path, sid: str, step: int, n: int, only: Sequence[str] = ()) -> dict[str, list[float]]:
    """Seconds per page and interaction, ``n`` times each, in chromium against a real server over
    ``store_dir``: from the navigation or click to the page idle with its charts drawn. ``only``:
    the pages whose name holds one of these words, and the interactions when it holds
    ``interactions`` (two checkouts measured in turns, under the same load)."""
    from playwright.sync_api import sync_playwright

    from tests.dashboard.browser.chromium import CHROMIUM, CHROMIUM_ARGS, dashboard_server

    out: dict[str, list[float]] = {}
    pages = [("start /", "/"), ("sessions /sessions", "/sessions"),
             ("replay /replay (a step)", f"/replay?session={sid}&step={step}"),
             ("violations /violations", "/violations"), ("compare /compare (results)", "/compare"),
             ("frontier /compare?tab=Frontier", "/compare?tab=Frontier"),
             ("annotations /annotations", "/annotations"), ("live /live", "/live")]
    if only:
        pages = [(name, path) for name, path in pages if any(w in name for w in only)]
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-logs-") as logs, \
            dashboard_server(store_dir, Path(logs)) as (base, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        pg = browser.new_context(viewport={"width": 1500, "height": 1500}).new_page()
        pg.goto(base + "/")  # warm the server process (imports), not timed
        _ready(pg, lambda: True)
        for i in range(n):
            for name, path in pages:
                t0 = time.perf_counter()
                pg.goto(base + path)
                drawn = pg.get_by_text("refreshed", exact=False)  # Live: its first panel (a timer reruns it)
                try:
                    took = _ready(pg, (lambda d=drawn: d.count() > 0) if path == "/live" else (lambda: True),
                                  timeout=TIMEOUT_S, idle=path != "/live") - t0
                except TimeoutError:
                    took = float("inf")  # reported as "> TIMEOUT_S"
                out.setdefault("page: " + name, []).append(took)
            if only and "interactions" not in only:
                continue
            # sessions table: a row's selection opens its replay
            pg.goto(base + "/sessions")
            _ready(pg, lambda: pg.locator('[data-testid="stDataFrame"] canvas').count() > 0)
            box = pg.locator('[data-testid="stDataFrame"]').first.bounding_box()
            t0 = time.perf_counter()
            pg.mouse.click(box["x"] + 18, box["y"] + 35 + 17 + 35 * (i % 5))
            out.setdefault("sessions row → replay", []).append(
                _ready(pg, lambda: "/replay" in pg.evaluate("location.href") and _thumb(pg) != "") - t0)
            pg.goto(f"{base}/replay?session={sid}&step={step}")
            _ready(pg, lambda: _thumb(pg) != "")
            for label, button in (("next step", "next step ▶"), ("previous step", "◀ previous step"),
                                  ("next violation", "Next violation")):
                before = _thumb(pg)
                t0 = time.perf_counter()
                pg.get_by_role("button", name=button).first.click()
                out.setdefault("replay: " + label, []).append(_ready(pg, lambda b=before: _thumb(pg) != b) - t0)
                if label == "next violation":  # back, so every round jumps the same way
                    pg.goto(f"{base}/replay?session={sid}&step={step}")
                    _ready(pg, lambda: _thumb(pg) != "")
            pg.get_by_role("heading", name="Annotations").scroll_into_view_if_needed()
            pg.get_by_label("Label", exact=True).fill(f"bench-{i}")
            t0 = time.perf_counter()
            pg.get_by_role("button", name="Save annotation").click()
            saved = pg.get_by_text("Saved the annotation", exact=False)
            out.setdefault("replay: save an annotation", []).append(_ready(pg, lambda s=saved: s.count() > 0) - t0)
        browser.close()
    return out


def _s(x: float) -> str:
    return f"> {TIMEOUT_S:.0f}" if x == float("inf") else f"{x:.2f}"


def _pick_session(store_dir: Path) -> tuple[str, int]:
    """The first clone of a replay with a violation (the same session in every scale's store) and
    a step before its first violation."""
    with Store(store_dir).reader() as r:
        row = r.con.execute(
            "SELECT session_id, min(seq) FROM spans WHERE name = 'prunegate.violation' AND session_id LIKE '%-c0' "
            "GROUP BY session_id ORDER BY session_id LIMIT 1").fetchall()[0]
    return str(row[0]), max(0, int(row[1]) - 3)


def pages_bench(scales: list[int], n: int, rebuild: bool, only: Sequence[str] = ()) -> int:
    """Every page and interaction at each scale, side by side: p50 / p95 and n."""
    figures: dict[int, dict[str, list[float]]] = {}
    for sessions in scales:
        store_dir = scale_store(sessions, rebuild)
        with Store(store_dir).reader() as r:
            count, spans = r.con.execute("SELECT count(DISTINCT session_id), count(*) FROM spans").fetchall()[0]
        sid, step = _pick_session(store_dir)
        print(f"{sessions}: {count:,} sessions, {spans:,} spans in {store_dir}; replay {sid} at step {step}")
        figures[sessions] = browser_pages(store_dir, sid, step, n, only)
        print(json.dumps({"sessions": sessions, "spans": spans, "seconds": figures[sessions]}), flush=True)
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"\nload average (1, 5, 15 min) at the end: {load}")

    def q(xs: list[float], p: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))]

    head = " | ".join(f"{s:,} sessions p50 / p95 (n)" for s in scales)
    print(f"| page or interaction | {head} |")
    print("|---|" + "---|" * len(scales))
    for name in figures[scales[0]]:
        cells = " | ".join(f"{_s(q(figures[s][name], .5))} / {_s(q(figures[s][name], .95))} ({len(figures[s][name])})"
                           for s in scales)
        print(f"| {name} | {cells} |")
    worst = max(q(v, .95) for v in figures[scales[-1]].values())
    print(f"\nslowest p95 at {scales[-1]:,} sessions: {_s(worst)} s (goal: under 1 s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--stream", type=int, default=6, help="deltas per streamed tool result")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--store", help="keep the generated store here (default: a temporary directory)")
    ap.add_argument("--sessions", type=int, default=10_000, help="sessions in the Sessions-page store (0: skip)")
    ap.add_argument("--skip-steps", action="store_true", help="only the Sessions page part")
    ap.add_argument("--baseline", metavar="DIR",
                    help="a checkout of another commit (git archive main | tar -x -C DIR): its Replay page and "
                         "this one's, taking turns on the same store, with the ratio; with --pages, cold AppTest "
                         "runs of the --only pages (compare, violations, replay, sessions, ...) in turns, "
                         "--repeat each, at the last of --scales")
    ap.add_argument("--browser", action="store_true",
                    help="also time steps end to end in /usr/bin/chromium against a real server")
    ap.add_argument("--pages", action="store_true",
                    help="only: every page and interaction in chromium at --scales sessions, p50/p95")
    ap.add_argument("--scales", default="100,10000", help="session counts for --pages (comma-separated)")
    ap.add_argument("-n", type=int, default=10, help="rounds of every page and interaction for --pages")
    ap.add_argument("--rebuild", action="store_true", help="--pages: rebuild the cached stores")
    ap.add_argument("--only", default="", help="--pages: only the pages whose name holds one of these "
                    "comma-separated words (and the interactions with the word 'interactions')")
    args = ap.parse_args(argv)

    if args.pages and args.baseline:
        return pages_against_baseline(Path(args.baseline), int(args.scales.split(",")[-1]),
                                      [w for w in args.only.split(",") if w] or ["compare"], args.repeat)
    if args.pages:
        return pages_bench([int(x) for x in args.scales.split(",")], args.n, args.rebuild,
                           [w for w in args.only.split(",") if w])

    if args.skip_steps:
        return _report_sessions(sessions_bench(args.sessions)) if args.sessions else 0
    tmp = None
    if args.store:
        store_dir = Path(args.store)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-dashboard-")
        store_dir = Path(tmp.name) / "store"
    t0 = time.perf_counter()
    sid = generate(store_dir, args.turns, args.stream)
    gen_s = time.perf_counter() - t0
    store = Store(store_dir)
    with store.reader() as r:
        info = queries.session_info(r, sid)
    assert info is not None
    print(f"generated session {sid}: {info['messages']:,} messages, {info['spans']:,} spans, "
          f"{info['prunes']} prunes, {info['deferrals']} deferrals, {len(store.pending_segments())} segments "
          f"in {gen_s:.1f}s")

    rows = measure(store_dir, sid, args.repeat, "segments")
    result = store.compact()
    print(f"compacted: {result.rows_inserted:,} rows from {result.segments_compacted} segments")
    rows += measure(store_dir, sid, args.repeat, "compacted")
    if args.baseline:
        with store.reader() as r:
            bounds = queries.session_bounds(r, sid)
        assert bounds is not None
        rows += against_baseline(Path(args.baseline), store_dir, sid, sum(bounds) // 2, args.repeat)
    if args.browser:
        if not Path("/usr/bin/chromium").exists():
            print("--browser: /usr/bin/chromium is not installed; skipped")
        else:
            with store.reader() as r:
                bounds = queries.session_bounds(r, sid)
            assert bounds is not None
            steps = browser_steps(store_dir, sid, sum(bounds) // 2)
            rows.append(("compacted: browser, click to page drawn (median of 4 jumps)", statistics.median(steps)))
            rows.append(("compacted: browser, click to page drawn (slowest of 4 jumps)", max(steps)))

    print()
    print(f"{'measurement':70} {'seconds':>9} {'÷ 1.5 s target':>15}")
    for name, secs in rows:
        print(f"{name:70} {secs:9.3f} {secs / TARGET_S:15.2f}")
    worst = max(secs for name, secs in rows if "AppTest" in name or "cold" in name or "browser" in name)
    print(f"\nslowest step (cold queries, AppTest page run or browser): {worst:.3f} s = {worst / TARGET_S:.2f} × target")
    by_name = dict(rows)
    for label in ("segments", "compacted"):
        for pos in ("middle", "last"):
            duck = by_name[f"{label}: context in DuckDB over extracted events, {pos}"]
            py = by_name[f"{label}: context ids by a Python loop over spans, {pos}"]
            print(f"{label}, {pos}: DuckDB context (with units, pins, pending) / Python-loop ids only = {duck / py:.2f}")
    if tmp is not None:
        tmp.cleanup()
    if args.sessions:
        _report_sessions(sessions_bench(args.sessions))
    return 0


def _report_sessions(rows: list[tuple[str, float]]) -> int:
    print()
    print(f"load average (1, 5, 15 min) at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'sessions page':70} {'seconds':>9} {'÷ 1 s goal':>11}")
    for name, secs in rows:
        print(f"{name:70} {secs:9.3f} {secs:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
