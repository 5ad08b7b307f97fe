"""Sweeps and saved comparisons: one record format, written and read only through the store
(:mod:`tracer.store.records`), in a directory and in a bucket alike; a store's older sweeps (no
kind) and saved comparisons (spans) still read back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tracer import queries
from tracer.contract import names as sn
from tracer.lab import sweep
from tracer.queries.writes import _row, _write, save_comparison
from tracer.store import Store, records

ARMS = [{"arm": "recency", "policy": "recency", "budget": 2000, "retention": 0.9, "cost_per_session": 0.01}]


def write_both(where: Any) -> tuple[dict[str, Any], str]:
    """A sweep (as ``prunegate compare`` stores it) and a saved comparison, into the store at ``where``."""
    rec = {**records.stamp("sweep", "prunegate compare --policies recency"), "arms": ARMS, "rows": [],
           "differences": []}
    sweep.save(where, rec)
    ident = save_comparison(Store(where), "prunes, kept", {"kind": "metric", "metric": "prunes"},
                            {"tables": {"diff": [{"arm": "recency", "mean diff": 1.5}]}})
    return rec, ident


def read_all(where: Any) -> list[dict[str, Any]]:
    """Every record of the store, through the one reader."""
    return [records.read_record(p) for p in records.record_paths(where, records.COMPARISONS)]


def check_both(where: Any, rec: dict[str, Any], ident: str) -> None:
    got = read_all(where)
    assert [r["kind"] for r in got] == ["saved", "sweep"]  # ids start with the kind, then the time
    assert all(set(r) >= {"id", "kind", "title", "created", "time_ns"} for r in got)
    [stored] = [sweep.load(p) for p in sweep.list_sweeps(where)]
    assert stored == rec and sweep.last_sweep(where) == rec
    with Store(where).reader() as r:
        listed = queries.saved_comparisons(r)
        assert list(listed["id"]) == [ident] and list(listed["title"]) == ["prunes, kept"]
        assert json.loads(listed["params"].iloc[0]) == {"kind": "metric", "metric": "prunes"}
        saved = queries.saved_comparison(r, ident)
    assert saved is not None and saved["results"] == {"tables": {"diff": [{"arm": "recency", "mean diff": 1.5}]}}


def test_a_sweep_and_a_saved_comparison_in_a_directory(tmp_path: Path) -> None:
    store = tmp_path / "s"
    before = Store(store).fingerprint()
    rec, ident = write_both(store)
    assert Store(store).fingerprint() != before  # the dashboard's caches, keyed by it, see them at once
    check_both(store, rec, ident)
    folder = store / records.COMPARISONS
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{r['id']}.json" for r in read_all(store))  # no temp left


def test_a_stores_older_sweeps_and_span_saved_comparisons_still_read(tmp_path: Path) -> None:
    """A sweep file written before records had a kind, and a comparison saved as a span."""
    store = tmp_path / "s"
    (store / "sweeps").mkdir(parents=True)
    old = {"id": "sweep-20250101T000000.000000000Z-abcdef", "created": "2025-01-01T00:00:00Z",
           "command": "prunegate compare", "arms": ARMS}
    (store / "sweeps" / f"{old['id']}.json").write_text(json.dumps(old))
    attrs = {sn.COMPARISON_ID: "0123456789ab", sn.COMPARISON_TITLE: "from before",
             sn.COMPARISON_PARAMS: json.dumps({"kind": "metric"}), sn.COMPARISON_RESULTS: json.dumps({"x": 1})}
    _write(Store(store), _row(sn.COMPARISON, attrs, trace_id="ab" * 16, parent=None, session_id=None))
    _, ident = write_both(store)
    assert sweep.list_sweeps(store)[0].name == f"{old['id']}.json" and sweep.load(sweep.list_sweeps(store)[0]) == old
    with Store(store).reader() as r:
        assert list(queries.saved_comparisons(r)["id"]) == [ident, "0123456789ab"]  # newest first
        assert queries.saved_comparison(r, "0123456789ab")["results"] == {"x": 1}


def test_a_record_that_is_not_json_is_named(tmp_path: Path) -> None:
    store = tmp_path / "s"
    (store / "sweeps").mkdir(parents=True)
    bad = store / "sweeps" / "sweep-20250101T000000.000000000Z-000000.json"
    bad.write_text("{half")
    with pytest.raises(ValueError, match=f"sweep {bad}"):
        sweep.last_sweep(store)


@pytest.fixture
def bucket(s3_endpoint: str, s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"r{os.urandom(4).hex()}"
    s3.create_bucket(Bucket=name)
    for k, v in {"PRUNEGATE_S3_ENDPOINT": s3_endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_DEFAULT_REGION": "us-east-1", "PRUNEGATE_SPOOL_DIR": str(tmp_path / "spool"),
                 "PRUNEGATE_S3_CACHE": str(tmp_path / "s3cache")}.items():
        monkeypatch.setenv(k, v)
    return f"s3://{name}/team/traces"


def test_a_sweep_and_a_saved_comparison_in_a_bucket(bucket: str, s3: Any) -> None:
    rec, ident = write_both(bucket)
    check_both(bucket, rec, ident)
    name = bucket.removeprefix("s3://").split("/", 1)[0]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"])
    assert keys == sorted(f"team/traces/sweeps/{r['id']}.json" for r in read_all(bucket))
