"""bench/bench_overhead.py runs end to end on a few sessions and prints every line it promises.

Its figures are not asserted (speed belongs to the benchmark, not to timed asserts); what is: it
runs, each part prints its ratio with a verdict, the burst's spans are counted in the store, and the
conversion line compares the C accelerator with the Python path where the accelerator is built, and
the reach line's span count is what the same replay puts in a store.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tracer.lab.compare import arms, parse_policies, run_replays
from tracer.spans.observer import SpanObserver
from tracer.store import Store, rows

ROOT = Path(__file__).resolve().parents[3]


def test_the_overhead_benchmark_runs_and_prints_each_part():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_overhead.py"), "--sessions", "4", "--rounds", "1",
         "--burst", "3000", "--skip", "levels,compare,store,rss"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert re.search(r"^replay rate traced/untraced\s+\d+\.\d\dx .*(OK|BELOW FLOOR)", text, re.M), text
    assert re.search(r"^burst of 3000: 3000 spans in the store, lost 0 .* OK$", text, re.M), text
    if rows.ACCELERATOR is not None:
        assert re.search(r"conversion per span \(diagnostic\)\s+C accelerator \d+\.\d\d µs, Python path \d+\.\d\d µs",
                         text), text
        assert "the C accelerator converts span records" in text.splitlines()[0]
    if "no τ-bench traffic" not in text:  # the check part needs the τ-bench traffic beside the clone
        assert re.search(r"^budget check traced/untraced\s+\d+\.\d\dx .*(OK|BELOW FLOOR)", text, re.M), text
    reach = re.search(r"^replay floor's reach \(diagnostic\) (\d+\.\d\d) spans per event \(([\d,]+) for ([\d,]+)\); "
                      r"untraced \d+\.\d µs per event, so 0\.8x leaves tracing \d+\.\d µs per event, \d+\.\d µs per span; "
                      r"a bare OpenTelemetry SDK span here costs \d+\.\d µs .* at most at \d\.\d\dx$", text, re.M)
    assert reach, text
    assert re.search(r"recording reduced to reading each span's values into one tuple .*: \d+\.\d\dx the untraced rate",
                     text), text
    assert re.search(r"recording replaced by calls that do nothing .*: \d+\.\d\dx the untraced rate", text), text
    assert int(reach.group(2).replace(",", "")) == _stored_spans(4), "the reach line counts the spans a replay stores"


def _stored_spans(n: int) -> int:
    """Spans a traced replay of the benchmark's first ``n`` sessions (its loader, its arm) leaves in a store."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_overhead

    convs = list(bench_overhead.load())[:n]
    store_dir = Path(tempfile.mkdtemp(prefix="pg-reach-"))
    try:
        run_replays(convs, [bench_overhead.REPLAY_SPEC], store_path=store_dir)
        return int(Store(store_dir).query("SELECT count(*) AS n FROM spans WHERE name <> 'prunegate.tracer.stats'")[0]["n"])
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)


@pytest.mark.slow
def test_the_benchmark_prints_each_ratio_per_detail_level_side_by_side():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_overhead.py"), "--sessions", "3", "--rounds", "1",
         "--skip", "checks,replay,reach,convert,compare,store,burst,rss"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert re.search(r"^compare traced/untraced by level\s+decisions\s+\d+\.\d\dx\s+checks\s+\d+\.\d\dx\s+full\s+\d+\.\d\dx",
                     text, re.M), text
    assert re.search(r"^compare 2 workers/1 at decisions\s+\d+\.\d\dx .*CPU-burn control", text, re.M), text
    assert re.search(r"^compare at decisions, recording reduced \(diagnostic\)\s+decision and violation spans only\s+"
                     r"\d+\.\d\dx \(\d\.\d\d spans per event\)\s+each replay's root span only\s+\d+\.\d\dx \(\d\.\d\d\)",
                     text, re.M), text
    spans = re.search(r"^spans per event by level\s+decisions (\d+\.\d\d) .*checks (\d+\.\d\d) .*full (\d+\.\d\d)",
                      text, re.M)
    assert spans, text
    decisions, checks, full = (float(spans.group(i)) for i in (1, 2, 3))
    assert decisions < checks < full  # counted in the stores the runs wrote
    if "no τ-bench traffic" not in text:
        assert re.search(r"^budget check traced/untraced by level\s+decisions\s+\d+\.\d\dx", text, re.M), text


def test_the_reduced_recordings_leave_only_what_they_say_in_the_store():
    """The diagnostic bounds replace every name of a recording method (``on_decision`` is
    ``record_decision``: the gate calls that one), so what reaches the store is read back here: roots
    only for the "nothing" bound; no message, unit, model-call or tool span for the decisions-only one,
    its checks on the root. After, the classes are as they were."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_overhead

    convs = list(bench_overhead.load())[:4]
    specs = arms(parse_policies(bench_overhead.POLICIES), "both", detail="decisions")

    def names(methods: tuple) -> tuple[dict[str, int], int]:
        """Spans by name in the store the reduced recording wrote, and its checks not under a root."""
        store_dir = Path(tempfile.mkdtemp(prefix="pg-reduced-"))
        try:
            with bench_overhead.recording_replaced(methods):
                run_replays(convs, specs, store_path=store_dir)
            store = Store(store_dir)
            got = store.query("SELECT name, count(*) AS n FROM spans WHERE name <> 'prunegate.tracer.stats' GROUP BY name")
            under = store.query("SELECT count(*) AS n FROM spans c JOIN spans p ON c.parent_span_id = p.span_id "
                                "WHERE c.name = 'prunegate.budget_check' AND p.name <> 'prunegate.session'")
            return {r["name"]: r["n"] for r in got}, under[0]["n"]
        finally:
            shutil.rmtree(store_dir, ignore_errors=True)

    replays = len(convs) * len(specs)
    assert names(bench_overhead._NOTHING) == ({"prunegate.session": replays}, 0)
    only, misplaced = names(bench_overhead._DECISIONS_ONLY)
    assert only["prunegate.session"] == replays
    assert only.get("prunegate.budget_check", 0) > 0 and misplaced == 0  # prunes and deferrals, under the root
    assert not [n for n in only if n in ("prunegate.message", "prunegate.messages", "prunegate.unit.close")
                or n.startswith(("chat", "execute_tool"))], only
    assert SpanObserver.on_decision is SpanObserver.record_decision and "parent" not in SpanObserver.__dict__
