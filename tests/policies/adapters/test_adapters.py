"""Framework message converters both ways: unchanged messages return as themselves, rewrites stick."""

from __future__ import annotations

import pytest

from policies import Context, text_message
from policies.adapters._native import Originals
from policies.adapters.responses import from_items, to_items
from policies.messages import TOOL_USE
from tracer.guard import PruneGuard
from tracer.store import Store


def _rewrite_result(messages, call_id, text):
    out = [m.copy() for m in messages]
    for m in out:
        for b in m.blocks:
            if b.answers == call_id:
                b.content = text
    return out


def test_langchain_round_trip_keeps_originals_and_rewrites():
    lc = pytest.importorskip("langchain_core.messages")
    from policies.adapters.langchain_messages import from_langchain, to_langchain_messages

    native = [lc.SystemMessage(content="be brief"), lc.HumanMessage(content="hi", id="h1"),
              lc.AIMessage(content="", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"},
                                                   {"name": "g", "args": {}, "id": "c2", "type": "tool_call"}]),
              lc.ToolMessage(content='{"a": 1}', tool_call_id="c1", name="f"),
              lc.ToolMessage(content="done", tool_call_id="c2", name="g")]
    originals = Originals()
    msgs = from_langchain(native, originals)
    assert [b.type for b in msgs[2].blocks] == [TOOL_USE, TOOL_USE], "the parallel batch is one message"
    back = to_langchain_messages([m.copy() for m in msgs], originals)
    assert all(a is b for a, b in zip(back, native, strict=True))
    changed = _rewrite_result(msgs, "c1", "[masked]") + [text_message("s", "user", "summary of earlier turns")]
    back = to_langchain_messages(changed, originals)
    assert back[3] is not native[3] and back[3].content == "[masked]" and back[3].tool_call_id == "c1"
    assert back[4] is native[4]
    assert isinstance(back[5], lc.HumanMessage) and back[5].content == "summary of earlier turns"


def test_pydantic_ai_round_trip_regroups_parts_and_keeps_rewrites():
    pm = pytest.importorskip("pydantic_ai.messages")
    from policies.adapters.pydantic_ai import from_pydantic_ai, to_pydantic_ai

    first = pm.ModelRequest(parts=[pm.SystemPromptPart(content="be brief"), pm.UserPromptPart(content="hi")])
    call = pm.ModelResponse(parts=[pm.ToolCallPart("f", {"x": 1}, "c1"), pm.ToolCallPart("g", {}, "c2")])
    results = pm.ModelRequest(parts=[pm.ToolReturnPart("f", {"a": 1}, "c1"), pm.ToolReturnPart("g", "ok", "c2")])
    native = [first, call, results]
    originals = Originals()
    msgs = from_pydantic_ai(native, originals)
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    back = to_pydantic_ai([m.copy() for m in msgs], originals)
    assert len(back) == 3 and all(a is b for a, b in zip(back, native, strict=True))
    back = to_pydantic_ai(_rewrite_result(msgs, "c1", "[masked]"), originals)
    assert back[2] is not results and back[2].parts[0].content == "[masked]"
    assert back[2].parts[0].tool_call_id == "c1" and back[2].parts[1] is results.parts[1]


def test_responses_items_both_ways():
    items = [{"role": "user", "content": "hi"},
             {"type": "reasoning", "id": "rs_1", "summary": []},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"x\":1}", "id": "fc_1"},
             {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "{\"a\": 1}"},
             {"type": "function_call_output", "call_id": "c2", "output": "ok"}]
    msgs = from_items(items)
    assert [len(m.blocks) for m in msgs] == [1, 3, 1, 1], "a response's reasoning and its calls are one message"
    assert to_items(msgs) == items
    ctx = Context(provider="openai")
    ctx.extend(msgs)
    assert len(ctx.units[ctx.unit_id_of(msgs[1].id)].message_ids) == 3, "the batch and both results: one unit"
    assert to_items(_rewrite_result(msgs, "c1", "[masked]"))[4]["output"] == "[masked]"


def test_an_unused_guard_records_no_session(tmp_path):
    store_dir = tmp_path / "store"
    used = PruneGuard("recency", budget=1000, provider="openai", store=str(store_dir))
    PruneGuard("recency", budget=1000, provider="openai", store=str(store_dir)).close()
    used.gate_messages([text_message("", "user", "hello")])
    used.close()
    assert [s["session_id"] for s in Store(store_dir).sessions()] == [used.session_id]


def test_policies_and_its_adapters_import_nothing_beyond_the_standard_library():
    import subprocess
    import sys

    code = ("import sys, policies, policies.tokens.bpe, policies.tokens.calibrated, policies.adapters.responses, "
            "policies.adapters.langchain_middleware, policies.adapters.langgraph, policies.adapters.pydantic_ai, "
            "policies.adapters.openai_agents\n"
            "print(sorted(m for m in ('tiktoken', 'langchain', 'langchain_core', 'langgraph', 'pydantic_ai', "
            "'agents', 'openai', 'opentelemetry', 'tracer') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_repeated_identical_messages_map_back_each_to_its_own_original():
    lc = pytest.importorskip("langchain_core.messages")
    from policies.adapters.langchain_messages import from_langchain, to_langchain_messages

    native = [lc.HumanMessage(content="go on", id="a"), lc.AIMessage(content="ok", id="b"),
              lc.HumanMessage(content="go on", id="c")]
    originals = Originals()
    back = to_langchain_messages(from_langchain(native, originals), originals)
    assert [m.id for m in back] == ["a", "b", "c"]
