"""The views on the promoted columns vs on the JSON attributes they replaced, on one large store, in one run.

    .venv/bin/python bench/bench_columns.py                 # ~400k spans: τ-bench replays copied 40 times
    .venv/bin/python bench/bench_columns.py --copies 10

Builds a store from real replays (τ-bench from ../shared/traffic, else data/sessions, replayed
through recency, gated and ungated, with a tight budget so that there are many budget checks and
decisions), copied ``--copies`` times under new trace and session ids, written as segments and
compacted. Then times, alternating rounds on the same snapshot, each query as the views run it now
(reading the typed columns) and as they ran before schema 2 (the same query parsing the JSON
attributes: ``attributes->>'prunegate.policy'``, ...). Also times the same store written in the
version 1 format (no promoted columns: readers derive them on read), which is what a store written
before this change costs until it is compacted. Wall and CPU time (process_time) per query.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.sources import tau_or_sessions  # noqa: E402
from tracer.contract import names as sn  # noqa: E402
from tracer.lab.compare import arms, parse_policies, run_replays  # noqa: E402
from tracer.store import Store  # noqa: E402
from tracer.store.schema import PROMOTED_NAMES  # noqa: E402
from tracer.store.segments import write_segment  # noqa: E402
from tracer.traffic.importers import Conversation, read_paths  # noqa: E402

_J = "attributes->>"
_DECISIONS = ", ".join(f"'{n}'" for n in sn.DECISION_SPANS)
# (label, the query now, the same query as the views ran it before schema 2)
QUERIES = [
    ("decisions by policy", f"""
        SELECT policy, gated, name, count(*) AS n, sum(tokens_before - tokens_after) AS freed
        FROM spans WHERE name IN ({_DECISIONS}) GROUP BY ALL ORDER BY ALL""", f"""
        SELECT {_J}'{sn.POLICY}' AS policy, TRY_CAST({_J}'{sn.GATED}' AS BOOLEAN) AS gated, name, count(*) AS n,
               sum(TRY_CAST({_J}'{sn.TOKENS_BEFORE}' AS BIGINT) - TRY_CAST({_J}'{sn.TOKENS_AFTER}' AS BIGINT)) AS freed
        FROM spans WHERE name IN ({_DECISIONS}) GROUP BY ALL ORDER BY ALL"""),
    ("budget checks over budget", f"""
        SELECT decision, reason, count(*) AS n FROM spans
        WHERE name = '{sn.BUDGET_CHECK}' AND tokens_before > budget GROUP BY ALL ORDER BY ALL""", f"""
        SELECT {_J}'{sn.DECISION}' AS decision, {_J}'{sn.REASON}' AS reason, count(*) AS n FROM spans
        WHERE name = '{sn.BUDGET_CHECK}'
          AND TRY_CAST({_J}'{sn.TOKENS_BEFORE}' AS BIGINT) > TRY_CAST({_J}'{sn.BUDGET}' AS BIGINT)
        GROUP BY ALL ORDER BY ALL"""),
    ("sessions: source, policy, gated", f"""
        SELECT session_id, any_value(source) AS source, any_value(policy) AS policy, any_value(gated) AS gated
        FROM spans WHERE name = '{sn.SESSION}' GROUP BY session_id ORDER BY session_id""", f"""
        SELECT session_id, any_value({_J}'{sn.SESSION_SOURCE}') AS source, any_value({_J}'{sn.POLICY}') AS policy,
               any_value(TRY_CAST({_J}'{sn.GATED}' AS BOOLEAN)) AS gated
        FROM spans WHERE name = '{sn.SESSION}' GROUP BY session_id ORDER BY session_id"""),
]


def base_table(tmp: Path, sessions: int) -> pa.Table:
    src = tau_or_sessions()
    print(f"sessions from {src}")
    convs = [c for c in read_paths([src]) if isinstance(c, Conversation)][:sessions]
    store = Store(tmp / "base")
    specs = arms(parse_policies("recency"), gated="both", budget=2500)
    run_replays(convs, specs, workers=1, store_path=store.path)
    return pa.concat_tables([pq.read_table(p) for p in store.pending_segments()], promote_options="default")


def copies(table: pa.Table, n: int) -> list[pa.Table]:
    out = []
    for i in range(n):
        suffix = f"{i:04x}"
        t = table
        for col in ("trace_id", "session_id"):
            idx = t.schema.get_field_index(col)
            arr = t.column(col)
            new = arr if col == "session_id" and arr.null_count == len(arr) else pc.binary_join_element_wise(
                arr, pa.scalar(suffix), "")
            if col == "trace_id":  # keep 32 hex digits: replace the last 4
                new = pc.binary_join_element_wise(pc.utf8_slice_codeunits(arr, 0, 28), pa.scalar(suffix), "")
            t = t.set_column(idx, col, new)
        out.append(t)
    return out


def timed(store: Store, sql: str, rounds: int) -> tuple[float, float, list]:
    walls, cpus, rows = [], [], []
    with store.reader() as r:
        for _ in range(rounds):
            w, c = time.perf_counter(), time.process_time()
            rows = r.query(sql)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--copies", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pg-bench-columns-") as tmp:
        t0 = time.perf_counter()
        base = base_table(Path(tmp), args.sessions)
        now, v1 = Store(Path(tmp) / "v2"), Store(Path(tmp) / "v1")
        now.ensure()
        v1.ensure()
        legacy_names = [n for n in base.column_names if n not in PROMOTED_NAMES]
        for t in copies(base, args.copies):
            write_segment(now.layout, t, fsync=False)
            pq.write_table(t.select(legacy_names), v1.layout.segments / f"v1-{time.time_ns()}.parquet")
        spans = now.count()
        print(f"{spans} spans ({base.num_rows} from {args.sessions} sessions x 2 arms, x{args.copies}); "
              f"built in {time.perf_counter() - t0:.0f} s; median of {args.rounds} rounds, wall / CPU ms")
        for phase in ("segments", "compacted"):
            if phase == "compacted":
                now.compact(timeout=120)
                v1.compact(timeout=120)  # upgrades the version 1 store
            for label, sql_now, sql_json in QUERIES:
                ms_c, cpu_c, rows_c = timed(now, sql_now, args.rounds)
                ms_j, cpu_j, rows_j = timed(now, sql_json, args.rounds)
                ms_1, cpu_1, rows_1 = timed(v1, sql_now, args.rounds)
                same = rows_c == rows_j == rows_1
                print(f"  {phase:9} {label:32} columns {ms_c:6.0f} / {cpu_c:6.0f} | JSON (before) {ms_j:6.0f} / "
                      f"{cpu_j:6.0f} ({ms_j / max(ms_c, 1e-9):4.1f}x wall, {cpu_j / max(cpu_c, 1e-9):4.1f}x CPU) | "
                      f"{'v1 store read now' if phase == 'segments' else 'v1 store compacted'} {ms_1:6.0f} / "
                      f"{cpu_1:6.0f} | same rows: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
