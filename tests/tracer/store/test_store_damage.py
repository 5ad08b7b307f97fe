"""A failed or killed compaction never costs the store; a damaged spans.duckdb is rebuilt (issue #26).

Faults are real: a full tmpfs (root), ``kill -9`` of a compactor while it writes the new database,
50 KB of random bytes over the middle of spans.duckdb, a zero-byte spans.duckdb. Each test reads
the spans of every session back from the store and compares them with a healthy import.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import SESSIONS
from tracer.cli import main
from tracer.store import Store
from tracer.store.compact import compact, verify_main

SHIPPED = sorted(SESSIONS.glob("*.jsonl"))
IS_ROOT = os.geteuid() == 0


def counts(store: Path) -> dict[str, int]:
    rows = Store(store).query("SELECT session_id, count(*) AS n FROM spans WHERE session_id IS NOT NULL "
                              "GROUP BY session_id")
    return {r["session_id"]: int(r["n"]) for r in rows}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, int]:
    store = tmp_path_factory.mktemp("ref") / "store"
    assert main(["import", *map(str, SHIPPED), "--store", str(store)]) == 0
    return counts(store)


def build(store: Path) -> None:
    """Two compactions (so there is a previous copy and absorbed segments) and pending segments."""
    assert main(["import", str(SHIPPED[0]), "--store", str(store)]) == 0
    assert main(["compact", "--store", str(store)]) == 0
    assert main(["import", str(SHIPPED[1]), "--store", str(store)]) == 0
    assert main(["compact", "--store", str(store)]) == 0
    assert main(["import", *map(str, SHIPPED[2:]), "--store", str(store)]) == 0


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


@pytest.fixture()
def small_disk(tmp_path) -> Iterator[Path]:
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_compact_on_a_full_disk_changes_nothing_and_says_so_in_one_line(small_disk, reference, capsys):
    store = small_disk / "store"
    build(store)
    before = counts(store)
    assert before == reference
    main_bytes = (store / "spans.duckdb").read_bytes()
    filler = small_disk / "filler"
    with open(filler, "wb") as f:  # leave less room than a copy of spans.duckdb needs
        f.write(b"\0" * (shutil.disk_usage(small_disk).free - len(main_bytes) // 2))
    capsys.readouterr()
    assert main(["compact", "--store", str(store)]) == 3
    line = one_line(capsys.readouterr().err)
    assert "no space left on device" in line and "unchanged" in line
    assert (store / "spans.duckdb").read_bytes() == main_bytes  # never a zero-byte database
    assert not [p for p in (store / "tmp").iterdir() if "spans-" in p.name]  # its half-written copy is gone
    assert counts(store) == reference
    filler.unlink()
    assert main(["compact", "--store", str(store)]) == 0
    assert counts(store) == reference and not list((store / "segments").iterdir())


def test_a_compactor_killed_while_writing_the_new_database_leaves_the_old_one(tmp_path, reference):
    store = tmp_path / "store"
    build(store)
    main_bytes = (store / "spans.duckdb").read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "compact", "--store", str(store)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith("spans-") for p in (store / "tmp").iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, "the compactor ended before it was killed"
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (store / "spans.duckdb").read_bytes() == main_bytes
    assert counts(store) == reference
    result = compact(Store(store).layout, tmp_min_age=0)  # the dead compactor's copy is cleaned up
    assert result.tmp_cleaned >= 1 and not list((store / "tmp").iterdir())
    assert counts(store) == reference


def test_fifty_kilobytes_over_the_middle_of_spans_duckdb_one_line_then_recover_rebuilds(tmp_path, reference, capsys):
    store = tmp_path / "store"
    build(store)
    assert main(["compact", "--store", str(store)]) == 0
    path = store / "spans.duckdb"
    original = path.read_bytes()
    noise = random.Random(26).randbytes(50_000)
    # 50 KB over the middle (the case); over a block DuckDB has freed nothing is damaged, so
    # move along the file until a block in use is hit: the damage is real, a block fails its checksum
    for at in (len(original) * k // 8 for k in (4, 3, 5, 2, 6, 1, 7)):
        path.write_bytes(original[:at] + noise + original[at + len(noise):])
        if verify_main(Store(store).layout) is not None:
            break
    else:
        pytest.fail("50 KB of noise anywhere in spans.duckdb went unnoticed")
    capsys.readouterr()
    # commands that read the spans (`sessions` reads the catalog compaction keeps, which this damage may miss)
    for argv in (["export", "--otlp-endpoint", "http://127.0.0.1:9"], ["replay", "--policy", "recency"]):
        assert main([*argv, "--store", str(store)]) == 2
        assert f"prunegate recover --store {store}" in one_line(capsys.readouterr().err)
    assert main(["recover", "--store", str(store)]) == 0
    assert "rebuilt with" in capsys.readouterr().err
    assert verify_main(Store(store).layout) is None
    assert counts(store) == reference
    assert [p.name.endswith(".damaged") for p in (store / "quarantine").iterdir()] == [True]
    assert main(["recover", "--store", str(store)]) == 0  # sound now: nothing to rebuild
    assert "rebuilt" not in capsys.readouterr().err


def test_a_zero_byte_spans_duckdb_is_rebuilt_by_compact_from_the_previous_copy_and_segments(tmp_path, reference,
                                                                                           capsys):
    store = tmp_path / "store"
    build(store)
    (store / "spans.duckdb").write_bytes(b"")  # what a compaction on a full disk used to leave
    capsys.readouterr()
    assert main(["sessions", "--store", str(store)]) == 2
    assert "is damaged" in one_line(capsys.readouterr().err)
    assert main(["compact", "--store", str(store)]) == 0
    assert counts(store) == reference
    assert main(["compact", "--store", str(store)]) == 0 and counts(store) == reference


def test_a_store_marked_with_a_newer_schema_is_refused_in_one_line_and_left_alone(tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["import", str(SHIPPED[0]), "--store", str(store)]) == 0
    (store / "prunegate-store.json").write_text('{"format": "prunegate-store", "schema_version": 999}\n')
    before = sorted(p.name for p in (store / "segments").iterdir())
    capsys.readouterr()
    for argv in (["sessions"], ["compact"], ["import", str(SHIPPED[1])]):
        assert main([*argv, "--store", str(store)]) == 2, argv
        assert "store schema 999, this prunegate reads 1 to 2" in one_line(capsys.readouterr().err)
    assert sorted(p.name for p in (store / "segments").iterdir()) == before  # nothing written
