"""`compare --engine ray`: the same numbers as the local engine, traces in the store, a local Ray of 2 CPUs."""

from __future__ import annotations

import json

import pytest

from tests.synthetic import synthetic_bodies
from tests.traffic import TAU
from tracer.cli import main
from tracer.lab import arms, parse_policies, run_replays
from tracer.lab.compare import compare
from tracer.store import Store
from tracer.traffic import Conversation, conversation_from_body, read_file

ray = pytest.importorskip("ray", reason="Ray is the 'ray' extra (also in the test extra)")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def convs() -> list[Conversation]:
    """Held-out recorded traffic (τ-bench) when present, else synthetic sessions."""
    if TAU.exists():
        recorded = [c for c in read_file(TAU) if isinstance(c, Conversation)]
        return recorded[20:32] if len(recorded) >= 32 else recorded  # the whole sample without ../shared
    return [conversation_from_body(b, "openai", name=f"s{k}", file="synthetic") for k, b in enumerate(synthetic_bodies(10))]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def stable(results):
    """Per session, what the two engines must agree on (tracer.lab.replay.SessionResult.comparable_dict)."""
    return [[r.comparable_dict() for r in rs] for rs in results]


def stored_replays(store):
    """Per replayed session (by source and policy): its span count and the metrics on its root span."""
    rows = Store(store).query(
        "SELECT s.attributes->>'prunegate.session.name' AS name, s.attributes->>'prunegate.policy' AS policy, "
        "s.attributes->>'prunegate.gated' AS gated, (SELECT count(*) FROM spans x WHERE x.session_id = s.session_id) AS n "
        "FROM spans s WHERE s.name = 'prunegate.session'")
    return sorted((r["name"], r["policy"], r["gated"], r["n"]) for r in rows)


def test_ray_results_equal_local_and_traces_reach_the_store(convs, local_ray, tmp_path):
    specs = arms(parse_policies("recency,salience"), "both", budget=2500)
    local = run_replays(convs, specs, store_path=tmp_path / "local")
    on_ray = run_replays(convs, specs, store_path=tmp_path / "ray", engine="ray", chunk=3)
    assert stable(on_ray) == stable(local)
    replay_ids = {r.replay_id for rs in on_ray for r in rs}
    stored = {r["session_id"] for r in Store(tmp_path / "ray").sessions()}
    assert replay_ids <= stored and len(replay_ids) == len(convs) * len(specs)
    assert stored_replays(tmp_path / "ray") == stored_replays(tmp_path / "local")
    assert {(p, g) for _, p, g, _ in stored_replays(tmp_path / "ray")} == {
        ("recency", "true"), ("salience", "true"), ("recency", "false"), ("salience", "false")}


def test_compare_api_rows_and_differences_identical(convs, local_ray):
    a = compare(convs, "recency,salience", gated="both", budget=2500)
    b = compare(convs, "recency,salience", gated="both", budget=2500, engine="ray")
    assert b.rows == a.rows and b.differences == a.differences


def test_cli_engine_ray_matches_local(convs, local_ray, tmp_path, capsys):
    src = tmp_path / "bodies.jsonl"
    src.write_text("\n".join(json.dumps(b) for b in synthetic_bodies(6)) + "\n")
    store = str(tmp_path / "store")
    assert main(["import", str(src), "--store", store]) == 0
    capsys.readouterr()
    common = ["compare", "--policies", "recency,salience", "--store", store, "--budget", "2500", "--json"]
    assert main([*common, "--engine", "ray"]) == 0
    on_ray = json.loads(capsys.readouterr().out)
    assert main(common) == 0
    local = json.loads(capsys.readouterr().out)
    assert on_ray["rows"] == local["rows"] and on_ray["differences"] == local["differences"]
    assert len(on_ray["rows"]) == 4


def test_address_without_ray_engine_is_a_usage_error(tmp_path, capsys):
    assert main(["compare", "--policies", "recency", "--store", str(tmp_path), "--address", "auto"]) == 2
    assert "--address is for --engine ray" in capsys.readouterr().err
