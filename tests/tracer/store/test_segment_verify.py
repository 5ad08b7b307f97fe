"""Segments are read through before they are trusted; what fails is skipped with one line, then
quarantined by compaction, whose release of the sessions' claims lets a re-import restore them
(issue #26). Damage is real: random bytes over a third of a segment, a Parquet file of another
schema, JSON columns holding text that is not JSON. Counts are read back from the store."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.paths import SESSIONS
from tracer.cli import main
from tracer.store import Store
from tracer.store.segments import list_segments, new_segment_name
from tracer.store.verify import SegmentDamaged, verify_segment

SHIPPED = sorted(SESSIONS.glob("*.jsonl"))


def counts(store: Path) -> dict[str, int]:
    rows = Store(store).query("SELECT session_id, count(*) AS n FROM spans WHERE session_id IS NOT NULL "
                              "GROUP BY session_id")
    return {r["session_id"]: int(r["n"]) for r in rows}


@pytest.fixture()
def store(tmp_path) -> Path:
    """One segment per shipped file (an import each)."""
    path = tmp_path / "store"
    for f in SHIPPED:
        assert main(["import", str(f), "--store", str(path)]) == 0
    return path


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _check_skipped_quarantined_restored(store: Path, victim: Path, full: dict[str, int], caplog, capsys,
                                        *, restorable: bool) -> None:
    caplog.clear()
    got = counts(store)
    assert set(got) < set(full) and all(full[s] == n for s, n in got.items())  # the others stay whole
    (line,) = [w for w in _warnings(caplog) if victim.name in w]
    assert "skipping unreadable segment" in line and "prunegate compact" in line
    capsys.readouterr()
    assert main(["compact", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"quarantined: {victim.name}" in out
    assert (store / "quarantine" / victim.name).exists() and counts(store) == got
    if restorable:
        assert f"{len(full) - len(got)} sessions they held released" in out
        assert main(["import", *map(str, SHIPPED), "--store", str(store)]) == 0
        assert counts(store) == full


def test_random_bytes_a_third_into_a_segment_footer_intact(store, caplog, capsys):
    full = counts(store)
    victim = list_segments(Store(store).layout)[0]
    fd = os.open(victim, os.O_WRONLY)
    os.pwrite(fd, random.Random(3).randbytes(2000), victim.stat().st_size // 3)
    os.close(fd)
    pq.read_metadata(victim)  # the footer still reads: only the pages are damaged
    with pytest.raises(SegmentDamaged):
        verify_segment(victim)
    _check_skipped_quarantined_restored(store, victim, full, caplog, capsys, restorable=True)


def test_a_parquet_file_of_another_schema(store, caplog, capsys):
    full = counts(store)
    victim = Store(store).layout.segments / new_segment_name()
    pq.write_table(pa.table({"trace_id": ["x"], "name": [1]}), victim)
    caplog.clear()
    assert counts(store) == full  # nothing of it was ever a span of the store
    assert any(victim.name in w and "not a prunegate segment" in w for w in _warnings(caplog))
    assert main(["compact", "--store", str(store)]) == 0
    assert (store / "quarantine" / victim.name).exists() and counts(store) == full


def test_attributes_that_are_not_json(store, caplog, capsys):
    full = counts(store)
    victim = list_segments(Store(store).layout)[-1]
    table = pq.read_table(victim)
    i = table.schema.get_field_index("attributes")
    values = table.column(i).to_pylist()
    values[0] = values[0][: len(values[0]) // 2]  # a cut value: not JSON at all
    damaged = table.set_column(i, "attributes", pa.array(values, pa.string()))
    victim.unlink()
    pq.write_table(damaged, victim)
    with pytest.raises(SegmentDamaged, match="attributes are not JSON"):
        verify_segment(victim)
    _check_skipped_quarantined_restored(store, victim, full, caplog, capsys, restorable=True)
