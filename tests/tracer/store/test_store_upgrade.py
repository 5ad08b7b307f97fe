"""A store written before the promoted columns (schema version 1) stays readable, and compaction upgrades it.

``tests/data/store-v1`` holds segments written by the previous version (commit 4318a46); its main
table is built here with that version's DDL (the columns before :data:`PROMOTED`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.paths import TEST_DATA
from tracer.queries import sessions as list_sessions
from tracer.store import Store
from tracer.store.rows import decode_row, promoted_values
from tracer.store.schema import COLUMNS, PROMOTED_NAMES
from tracer.store.segments import list_segments, segment_footer

V1 = TEST_DATA / "store-v1"
V1_COLUMNS = [(n, t) for n, t, _ in COLUMNS if n not in PROMOTED_NAMES]


def _v1_store(tmp_path: Path, *, main_from: int) -> Store:
    """The fixture's segments; those from index ``main_from`` on already in a version 1 main table."""
    root = tmp_path / "v1"
    shutil.copytree(V1, root)
    (root / "tmp").mkdir()
    segments = sorted((root / "segments").glob("*.parquet"))
    assert segments and not any(segment_footer(p)[1] for p in segments)  # really the old format
    absorbed = segments[main_from:]
    con = duckdb.connect(str(root / "spans.duckdb"))
    con.execute("CREATE TABLE spans (" + ", ".join(f"{n} {t}" for n, t in V1_COLUMNS) + ")")
    con.execute("CREATE TABLE compacted_segments (name VARCHAR PRIMARY KEY, row_count BIGINT, compacted_at_ns BIGINT)")
    con.execute("CREATE TABLE store_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO store_meta VALUES ('schema_version', '1')")
    if absorbed:
        cols = ", ".join(n for n, _ in V1_COLUMNS)
        con.execute(f"INSERT INTO spans SELECT {cols} FROM read_parquet(?)", [[str(p) for p in absorbed]])
        for p in absorbed:
            con.execute("INSERT INTO compacted_segments VALUES (?, 0, 0)", [p.name])
            p.unlink()
    con.close()
    return Store(root)


def _rewritten(store: Store, tmp_path: Path) -> Store:
    """The same spans written by the current writers (rows -> segments with the promoted columns)."""
    fresh = Store(tmp_path / "v2")
    rows = [decode_row(r) for r in store.query("SELECT * EXCLUDE (duration_ns) FROM spans")]
    for name in PROMOTED_NAMES:
        for r in rows:
            r.pop(name)  # the writer fills them from the attributes
    fresh.write_rows(rows)
    assert all(segment_footer(p)[1] for p in list_segments(fresh.layout))
    return fresh


def _views(store: Store) -> dict[str, list]:
    out = {}
    for view, order in (("sessions", "session_id"), ("budget_checks", "span_id"), ("decisions", "span_id"),
                        ("violations", "span_id")):
        out[view] = store.query(f"SELECT * FROM {view} ORDER BY {order}")
    with store.reader() as r:
        out["listing"] = list_sessions(r, order="oldest").to_dict("records")
    return out


def _promoted_match_attributes(store: Store) -> int:
    """Every span's promoted columns equal what the writer's rule gives for its attributes."""
    rows = [decode_row(r) for r in store.query("SELECT * FROM spans")]
    want = promoted_values([r["attributes"] for r in rows])
    for i, name in enumerate(PROMOTED_NAMES):
        assert [r[name] for r in rows] == want[i], name
    return sum(r["policy"] is not None for r in rows)


@pytest.mark.parametrize("main_from", [99, 3], ids=["segments-only", "segments-and-v1-table"])
def test_v1_store_reads_like_the_same_spans_written_now_and_compaction_upgrades_it(tmp_path, main_from):
    old = _v1_store(tmp_path, main_from=main_from)
    with old.reader() as r:
        assert r.legacy_segments and r.complete
    new = _rewritten(old, tmp_path)
    want = _views(new)
    assert want["sessions"] and want["budget_checks"] and want["decisions"]
    assert any(r["policy"] for r in want["sessions"]) and any(r["gated"] for r in want["sessions"])
    assert any(r["tokens_before"] for r in want["decisions"]) and any(r["reason"] for r in want["decisions"])
    assert _views(old) == want  # read as it is: the promoted columns derived from the attributes
    assert _promoted_match_attributes(old) > 0

    result = old.compact()
    assert result.busy is None and list_segments(old.layout) == []
    con = duckdb.connect(str(old.layout.main), read_only=True)
    cols = [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'spans'").fetchall()]
    version = con.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()
    con.close()
    assert set(PROMOTED_NAMES) <= set(cols) and version == ("2",)
    assert _views(old) == want
    assert _promoted_match_attributes(old) > 0
    assert old.count() == new.count()


def test_v1_objects_in_a_bucket_read_the_same_and_compaction_writes_the_current_schema(tmp_path, s3):
    from tracer.store.bucket import BucketStore

    s3.create_bucket(Bucket="store-v1")
    bucket = BucketStore(s3, "store-v1")
    for p in sorted((V1 / "segments").glob("*.parquet")):
        bucket.write_table(pq.read_table(p))  # the old objects as they are
    local = _v1_store(tmp_path, main_from=99)
    want = sorted(map(str, local.query("SELECT * FROM sessions")))
    assert sorted(map(str, bucket.query("SELECT * FROM sessions"))) == want
    for day in bucket.days():
        out = bucket.compact(day)
        assert out.written is not None
        body = s3.get_object(Bucket="store-v1", Key=out.written)["Body"].read()
        assert set(PROMOTED_NAMES) <= set(pq.read_schema(pa.BufferReader(body)).names)
    assert sorted(map(str, bucket.query("SELECT * FROM sessions"))) == want


def test_the_writers_rule_and_the_readers_derivation_agree_on_odd_attribute_types(tmp_path):
    odd = [{"prunegate.policy": 7, "prunegate.gated": 1, "prunegate.budget": "1200"},
           {"prunegate.policy": "recency", "prunegate.gated": True, "prunegate.budget": 2**70},
           {"prunegate.budget": True, "prunegate.tokens.before": 1.5, "prunegate.violation.code": ["x"]},
           {"prunegate.decision": "prune", "prunegate.reason": "over budget", "prunegate.tokens.after": -3},
           {"other": 1}]
    rows = [{"trace_id": "a" * 32, "span_id": f"{i:016x}", "name": "s", "attributes": a} for i, a in enumerate(odd)]
    now = Store(tmp_path / "now")
    now.write_rows(rows)
    old = Store(tmp_path / "old")
    old.ensure()
    table = pq.read_table(list_segments(now.layout)[0])
    pq.write_table(table.select([n for n, _ in V1_COLUMNS]), old.layout.segments / "v1.parquet")
    sql = "SELECT span_id, " + ", ".join(PROMOTED_NAMES) + " FROM spans ORDER BY span_id"
    got = now.query(sql)
    assert got == old.query(sql)
    assert [r["budget"] for r in got] == [None, None, None, None, None]  # "1200", 2**70 and True are no BIGINT
    assert [r["policy"] for r in got] == [None, "recency", None, None, None]
    assert got[3]["tokens_after"] == -3 and got[3]["decision"] == "prune" and got[1]["gated"] is True
    assert old.compact().busy is None and now.compact().busy is None
    assert now.query(sql) == old.query(sql) == got
