"""data/: the generator is deterministic, the shipped sessions are its output, and they look like agent traffic."""

from __future__ import annotations

import json

import pytest

from data.generate import SHIPPED, generate, main, write_jsonl
from policies import validate
from tests.paths import SESSIONS
from tracer.lab import ReplaySpec, replay_session
from tracer.traffic import Conversation, Refusal, build_events, read_paths


def shipped() -> list[Conversation]:
    items = list(read_paths([SESSIONS]))
    assert not [i for i in items if isinstance(i, Refusal)]
    return [i for i in items if isinstance(i, Conversation)]


def test_the_generator_is_deterministic_and_seeds_matter():
    assert generate("travel", "anthropic", 2, 5) == generate("travel", "anthropic", 2, 5)
    assert generate("travel", "anthropic", 2, 5) != generate("travel", "anthropic", 2, 6)
    with pytest.raises(ValueError):
        generate("nope", "anthropic", 1, 0)


def test_the_shipped_files_are_what_the_generator_writes_and_stay_small(tmp_path):
    assert main(["--out", str(tmp_path)]) == 0
    for name, *_ in SHIPPED:
        assert (tmp_path / name).read_bytes() == (SESSIONS / name).read_bytes(), f"regenerate data/sessions/{name}"
    assert sum(p.stat().st_size for p in SESSIONS.iterdir()) < 1_000_000


def test_one_scenario_to_a_file(tmp_path):
    out = tmp_path / "x.jsonl"
    assert main(["--scenario", "coding", "--provider", "anthropic", "--count", "2", "--seed", "3", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["id"] == "coding-anthropic-s3-00"
    assert write_jsonl(tmp_path / "y.jsonl", []).read_text() == ""


def test_every_shipped_session_is_a_valid_request_of_its_provider():
    for line in (SESSIONS / name for name, *_ in SHIPPED):
        for raw in line.read_text().splitlines():
            body = json.loads(raw)
            provider = "anthropic" if "system" in body else "openai"
            meta = {k: body.pop(k) for k in ("id", "side_effect_tools", "streamed_calls")}
            assert validate(body, provider) == [], meta["id"]


def test_the_shipped_sessions_have_what_the_demo_needs():
    convs = shipped()
    assert {c.provider for c in convs} == {"anthropic", "openai"}
    widest = max(len(m.call_ids) for c in convs for m in c.messages)
    assert widest == 12  # parallel batches up to 12 calls
    longest_loop = max(_longest_loop(c) for c in convs)
    assert longest_loop >= 10  # long sequential tool loops
    assert all(sum(m.has_user_text() for m in c.messages) >= 3 for c in convs)  # several user turns
    assert any(c.streamed_calls for c in convs)
    side = {e.tool_name for c in convs for e in build_events(c.messages, c.provider,
                                                             side_effect_tools=c.side_effect_tools).events
            if e.kind == "tool" and e.side_effect}
    assert {"book_flight", "refund_order", "deploy"} <= side


def _longest_loop(c: Conversation) -> int:
    best = run = 0
    for m in c.messages:
        if m.has_user_text():
            run = 0
        elif m.role == "assistant" and m.call_ids:
            run += 1
            best = max(best, run)
    return best


def test_shipped_sessions_reproduce_the_failures_ungated_and_not_gated():
    convs = shipped()
    ungated = [replay_session(c, ReplaySpec("salience", gated=False)) for c in convs]
    gated = [replay_session(c, ReplaySpec("salience", gated=True, stream_results=3, seed=2)) for c in convs]
    assert sum(r.orphan_results for r in ungated) > 0 and sum(r.duplicated_side_effects for r in ungated) > 0
    assert sum(r.invalid_requests for r in gated) == 0 and sum(r.prunes for r in gated) > 0
