"""A compaction cancelled from another thread leaves the store as it was, and a process that closes
its sink while auto-compaction runs exits cleanly: a thread left inside DuckDB at interpreter exit is
answered by the C++ runtime with SIGABRT (exit status 134, seen in CI before this)."""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from tracer.store import Store
from tracer.store.cancel import Cancel
from tracer.store.compact import CompactResult
from tracer.store.rows import rows_to_table

SEGMENTS, ROWS = 120, 2000


def fill(store: Store) -> None:
    """Enough segments that compacting them takes well over a second."""
    for s in range(SEGMENTS):
        rows = [{"trace_id": secrets.token_hex(16), "span_id": secrets.token_hex(8), "name": "work",
                 "start_time_ns": i, "end_time_ns": i + 1,
                 "attributes": {"prunegate.session.id": f"s{s}", "prunegate.seq": i, "note": "x" * 200},
                 "resource": {"service.name": "cancel-test"}, "scope_name": "test"} for i in range(ROWS)]
        store.write_table(rows_to_table(rows), fsync=False)


def count(store: Store) -> int:
    with store.reader() as r:
        return int(r.query("SELECT count(*) AS n FROM spans WHERE name = 'work'")[0]["n"])


def wait_for_work_file(store: Store, thread: threading.Thread | None = None) -> None:
    """Until the compactor has opened its new database (DuckDB is then at work on it)."""
    deadline = time.monotonic() + 120
    while not any(".duckdb." in p.name for p in store.layout.tmp.glob("*")):
        assert time.monotonic() < deadline, "the compactor never started its new database"
        assert thread is None or thread.is_alive(), "the compaction ended before it could be cancelled"
        time.sleep(0.005)


def test_a_cancelled_compaction_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    fill(store)
    before = count(store)
    segments = len(store.pending_segments())
    cancel = Cancel()
    out: list[CompactResult] = []
    thread = threading.Thread(target=lambda: out.append(store.compact(timeout=30, cancel=cancel)))
    thread.start()
    wait_for_work_file(store, thread)
    cancel()
    thread.join(30)
    assert not thread.is_alive()
    (result,) = out
    assert result.busy and result.busy.startswith("cancelled"), result
    assert result.rows_inserted == result.segments_compacted == 0, result
    assert not store.layout.main.exists()  # nothing swapped in
    assert len(store.pending_segments()) == segments and count(store) == before == SEGMENTS * ROWS
    assert not [p for p in store.layout.tmp.glob("*") if ".duckdb." in p.name]  # its new database removed

    again = store.compact(timeout=30)  # the next compaction moves every span, once
    assert again.busy is None and again.rows_inserted == SEGMENTS * ROWS
    assert count(store) == SEGMENTS * ROWS and not store.pending_segments()


CLOSER = textwrap.dedent("""
    import sys, time
    from tracer.store import Store
    from tracer.store.sink import StoreSink
    store = Store(sys.argv[1])
    sink = StoreSink(store, compact_threshold=8)
    sink._maybe_compact()
    deadline = time.monotonic() + 120
    while not any(".duckdb." in p.name for p in store.layout.tmp.glob("*")) and time.monotonic() < deadline:
        time.sleep(0.005)
    sink.close(timeout=0.0)   # the agent exits at once: its sink cancels the compaction
    print("cancelled", sink._cancel.requested, "alive", sink._compactor.is_alive(), flush=True)
""")


def test_a_process_that_closes_its_sink_during_auto_compaction_exits_cleanly(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    fill(store)
    proc = subprocess.run([sys.executable, "-c", CLOSER, str(store.path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "cancelled True alive False" in proc.stdout, proc.stdout
    assert "terminate called" not in proc.stderr, proc.stderr
    assert count(store) == SEGMENTS * ROWS  # every span still read back, from the segments
    assert store.compact(timeout=30).rows_inserted == SEGMENTS * ROWS and count(store) == SEGMENTS * ROWS
