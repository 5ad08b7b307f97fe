"""Every conversation in ../shared/traffic (or the sample in tests/data) goes through the context model unchanged."""

from __future__ import annotations

import copy

import pytest

from policies import Context
from tests.traffic import TAU_DIALOGUES, cassette_bodies, tau_conversations


def test_every_tau_bench_conversation_round_trips_unchanged():
    convs = tau_conversations()
    assert len(convs) == TAU_DIALOGUES
    for conv in convs:
        body = {"messages": conv["traj"]}
        original = copy.deepcopy(body)
        ctx = Context.from_openai(body)
        assert ctx.to_openai() == original, f"task {conv['task_id']} trial {conv['trial']}"
        assert len(ctx) == len(conv["traj"])
        assert body == original  # the input is not mutated


def test_tau_bench_units_pair_every_call_with_its_result():
    for conv in tau_conversations()[:50]:
        ctx = Context.from_openai({"messages": conv["traj"]})
        for unit in ctx.units.values():
            assert not unit.pending and not unit.orphan
            roles = [ctx.message(m).role for m in unit.message_ids]
            if unit.call_ids:
                assert roles[0] == "assistant" and roles.count("tool") == len(unit.call_ids)


CASSETTES = list(cassette_bodies())


@pytest.mark.parametrize("name,provider,body", CASSETTES, ids=[c[0] for c in CASSETTES])
def test_every_cassette_request_round_trips_unchanged(name, provider, body):
    original = copy.deepcopy(body)
    if provider == "anthropic":
        ctx = Context.from_anthropic(body)
        assert ctx.to_anthropic() == original
    else:
        ctx = Context.from_openai(body)
        assert ctx.to_openai() == original


def test_cassettes_include_parallel_batches_as_one_unit():
    batches = 0
    for _name, provider, body in CASSETTES:
        ctx = Context.from_anthropic(body) if provider == "anthropic" else Context.from_openai(body)
        batches += sum(1 for u in ctx.units.values() if u.kind == "batch")
    assert batches >= 3


def test_cross_provider_rendering_keeps_pairs():
    """An Anthropic conversation rendered for OpenAI keeps every call answered, and back."""
    for _name, provider, body in CASSETTES:
        if provider != "anthropic":
            continue
        ctx = Context.from_anthropic(body)
        oai = ctx.to_openai()
        calls = [c["id"] for m in oai["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        results = [m["tool_call_id"] for m in oai["messages"] if m["role"] == "tool"]
        assert sorted(calls) == sorted(results)
        back = Context.from_openai(oai).to_anthropic()
        n_use = sum(1 for m in back["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use")
        assert n_use == len(calls)
