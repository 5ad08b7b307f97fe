"""What ``prunegate compare``, ``replay`` and ``demo`` say matches what reached the store, and every
figure names what it depends on (budget, seed, token counter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.paths import SESSIONS
from tests.servers import run_prunegate
from tracer.store import Store

SAMPLE = SESSIONS / "anthropic-parallel.jsonl"


def _replays(store: Path) -> int:
    with Store(store).reader() as r:
        return int(r.con.execute("SELECT count(DISTINCT session_id) FROM spans WHERE name = 'prunegate.session' "
                                 "AND attributes->>'prunegate.session.source' = 'replay'").fetchall()[0][0])


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    src = tmp_path / "two.jsonl"
    src.write_text("\n".join(SAMPLE.read_text().splitlines()[:2]) + "\n")
    done = run_prunegate("import", str(src), "--store", str(path))
    assert done.returncode == 0, done.stderr
    return path


def test_compare_says_it_records_every_replay_and_what_its_figures_depend_on(store: Path) -> None:
    before = _replays(store)
    done = run_prunegate("compare", "--policies", "recency,salience", "--gated", "both", "--store", str(store),
                "--budget", "400", "--seed", "3")
    assert done.returncode == 0, done.stderr
    added = _replays(store) - before
    assert added == 2 * 2 * 2  # policies x gatings x sessions, read back from the store
    assert f"recorded {added} replays as new sessions (source 'replay') in {store}" in done.stdout
    assert "budget 400 tokens" in done.stdout
    assert "seed --seed 3" in done.stdout
    assert "tokens counted by ApproxTokenCounter (4 characters per token)" in done.stdout


def test_compare_without_seed_or_budget_says_so_and_no_trace_records_nothing(store: Path) -> None:
    before = _replays(store)
    done = run_prunegate("compare", "--policies", "recency", "--gated", "off", "--store", str(store), "--no-trace", "--json")
    assert done.returncode == 0, done.stderr
    depends = json.loads(done.stdout)["depends_on"]
    assert depends["seed"] is None and depends["budget"] is None and depends["recorded_sessions"] == 0
    assert depends["budget_rule"] == "60% of each session's full size"
    assert _replays(store) == before
    plain = run_prunegate("compare", "--policies", "recency", "--gated", "off", "--store", str(store), "--no-trace")
    assert "replays not recorded (--no-trace)" in plain.stdout
    assert "seed none (results arrive in the recorded order" in plain.stdout


def test_demo_says_its_seed(tmp_path: Path) -> None:
    done = run_prunegate("demo", "--store", str(tmp_path / "demo"), "--no-serve", "--tau", "0", "--policies", "recency",
                "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "with --seed 7: each parallel batch's tool results arrive in an order shuffled with seed 7" in done.stdout
    assert "seed --seed 7" in done.stdout  # and compare's own line names it again
