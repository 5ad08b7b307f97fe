"""Round trips through each adapter's converters, as properties over the framework's real message
types (Hypothesis): every message kind the framework holds comes back as it went in.

- LangChain / LangGraph: every message rebuilt from its converted form (no originals to fall back
  on) equals the original in class, content (multimodal parts too), tool calls, ids, names, roles
  and metadata; with the originals, the very objects come back.
- Pydantic AI: with the originals, the very messages come back; a rewritten tool return changes
  that part alone.
- OpenAI Agents SDK: the filter, through a real guard within budget, hands back the same items.
"""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.adapters._native import Originals

pytest.importorskip("langchain_core", reason="the test extra installs langchain")

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
ids = st.text("abcdef0123456789", min_size=4, max_size=8)
json_value = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | text,
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                          max_leaves=6)
image = st.builds(lambda u: {"type": "image_url", "image_url": {"url": f"https://example.invalid/{u}.png"}}, ids)
parts = st.lists(st.one_of(text, st.builds(lambda t: {"type": "text", "text": t}, text), image), max_size=3)


@st.composite
def langchain_messages(draw) -> list:
    from langchain_core import messages as lc

    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["system", "developer", "human", "ai", "tool", "chat"]))
        content = draw(st.one_of(text, parts))
        mid = draw(st.none() | ids)
        if kind == "system":
            out.append(lc.SystemMessage(content=content, id=mid))
        elif kind == "developer":
            out.append(lc.SystemMessage(content=draw(text), additional_kwargs={"__openai_role__": "developer"}))
        elif kind == "human":
            out.append(lc.HumanMessage(content=content, id=mid, name=draw(st.none() | ids)))
        elif kind == "ai":
            calls = [{"name": draw(ids), "args": draw(st.dictionaries(ids, json_value, max_size=3)),
                      "id": f"call_{draw(ids)}_{k}", "type": "tool_call"} for k in range(draw(st.integers(0, 3)))]
            out.append(lc.AIMessage(content=draw(st.one_of(st.just(""), text)), tool_calls=calls, id=mid))
        elif kind == "tool":
            out.append(lc.ToolMessage(content=draw(st.one_of(text, st.lists(
                st.builds(lambda t: {"type": "text", "text": t}, text), min_size=1, max_size=2))),
                tool_call_id=draw(ids), name=draw(st.none() | ids), status=draw(st.sampled_from(["success", "error"])),
                id=mid))
        else:
            out.append(lc.ChatMessage(role=draw(st.sampled_from(["user", "assistant", "system", "developer"])),
                                      content=content, id=mid))
    return out


def lc_view(m) -> dict:
    """What a LangChain message says and carries (not its auto-filled defaults)."""
    view = {"class": type(m).__name__, "content": m.content, "id": m.id, "name": m.name,
            "additional_kwargs": m.additional_kwargs}
    for key in ("role", "tool_call_id", "status"):
        if hasattr(m, key):
            view[key] = getattr(m, key)
    if hasattr(m, "tool_calls"):
        view["tool_calls"] = [(c["name"], c["args"], c["id"]) for c in m.tool_calls]
    return view


@SETTINGS
@given(langchain_messages())
def test_langchain_messages_rebuilt_from_their_conversion_are_the_same(natives):
    from policies.adapters.langchain_messages import from_langchain, to_langchain_messages

    rebuilt = to_langchain_messages(from_langchain(natives))
    assert [lc_view(m) for m in rebuilt] == [lc_view(m) for m in natives]


@SETTINGS
@given(langchain_messages())
def test_langchain_messages_the_gate_left_alone_come_back_as_themselves(natives):
    from policies.adapters.langchain_messages import from_langchain, to_langchain_messages

    originals = Originals()
    back = to_langchain_messages(from_langchain(natives, originals), originals)
    assert len(back) == len(natives) and all(a is b for a, b in zip(back, natives, strict=True))


def test_remove_message_entries_are_applied_as_langgraph_applies_them():
    from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

    from policies.adapters.langchain_messages import from_langchain, to_langchain_messages

    history = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]
    for update in ([RemoveMessage(id="2")], [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("d", id="4")]):
        expected = add_messages(history, update)
        got = to_langchain_messages(from_langchain([*history, *update]))
        assert [lc_view(m) for m in got] == [lc_view(m) for m in expected]


# ----------------------------------------------------------------------------------- Pydantic AI
@st.composite
def pydantic_ai_messages(draw) -> list:
    pm = pytest.importorskip("pydantic_ai.messages")
    out: list = []
    pending: list = []
    for _ in range(draw(st.integers(1, 5))):
        parts: list = []
        if not out and draw(st.booleans()):
            parts.append(pm.SystemPromptPart(content=draw(text)))
        for call in pending:  # a result, or an error result as pydantic-ai 2.x marks it (outcome)
            outcome = draw(st.sampled_from(["success", "success", "failed", "retried"]))
            parts.append(pm.ToolReturnPart(tool_name=call.tool_name, tool_call_id=call.tool_call_id,
                                           content=draw(json_value) if outcome == "success" else draw(text),
                                           outcome=outcome))
        if out and draw(st.booleans()):  # feedback on a response that answers no tool call
            parts.append(pm.RetryFeedbackPart(content=draw(text), retry=pm.RetryInfo(cause="model_retry")))
        prompt = draw(st.one_of(text, st.lists(st.one_of(text, st.builds(
            lambda u: pm.ImageUrl(url=f"https://example.invalid/{u}.png"), ids)), min_size=1, max_size=2)))
        parts.append(pm.UserPromptPart(content=prompt))
        out.append(pm.ModelRequest(parts=parts))
        response: list = []
        if draw(st.booleans()):
            response.append(pm.ThinkingPart(content=draw(text)))
        if draw(st.booleans()):
            response.append(pm.TextPart(content=draw(text)))
        pending = [pm.ToolCallPart(tool_name=draw(ids), args=draw(st.dictionaries(ids, json_value, max_size=2)),
                                   tool_call_id=f"c{len(out)}_{k}") for k in range(draw(st.integers(0, 2)))]
        out.append(pm.ModelResponse(parts=[*response, *pending] or [pm.TextPart(content="")]))
    return out


@SETTINGS
@given(pydantic_ai_messages())
def test_pydantic_ai_messages_the_gate_left_alone_come_back_as_themselves(natives):
    from policies.adapters.pydantic_ai import from_pydantic_ai, to_pydantic_ai

    originals = Originals()
    back = to_pydantic_ai(from_pydantic_ai(natives, originals), originals)
    assert back == natives
    assert all(a is b for a, b in zip(back, natives, strict=True))


@SETTINGS
@given(pydantic_ai_messages(), st.data())
def test_a_rewritten_pydantic_ai_part_changes_alone(natives, data):
    from policies.adapters.pydantic_ai import from_pydantic_ai, to_pydantic_ai
    from policies.messages import TOOL_RESULT

    originals = Originals()
    messages = from_pydantic_ai(natives, originals)
    results = [(i, j) for i, m in enumerate(messages) for j, b in enumerate(m.blocks) if b.type == TOOL_RESULT]
    if not results:
        return
    i, j = data.draw(st.sampled_from(results))
    messages[i].blocks[j].content = "[masked]"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated part (RetryPromptPart goes in pydantic-ai v3)
        back = to_pydantic_ai(messages, originals)
    assert len(back) == len(natives)
    changed = [(a, b) for a, b in zip(back, natives, strict=True) if a != b]
    assert len(changed) == 1
    new, old = changed[0]
    diff = [(p, q) for p, q in zip(new.parts, old.parts, strict=True) if p != q]
    assert len(diff) == 1 and diff[0][0].content == "[masked]" and diff[0][0].tool_call_id == diff[0][1].tool_call_id
    was_error = diff[0][1].outcome in ("failed", "retried")  # still on the provider's error channel
    assert type(diff[0][0]).__name__ == "ToolReturnPart" and (diff[0][0].outcome != "success") == was_error


def test_pydantic_ai_error_results_and_retry_feedback_convert_as_the_model_sees_them():
    pm = pytest.importorskip("pydantic_ai.messages")
    from policies.adapters.pydantic_ai import from_pydantic_ai
    from policies.messages import TEXT, TOOL_RESULT

    call = pm.ToolCallPart(tool_name="lookup", args={"q": "x"}, tool_call_id="c1")
    feedback = pm.RetryFeedbackPart(content="no tool answered", retry=pm.RetryInfo(cause="model_retry"))
    natives = [pm.ModelRequest(parts=[pm.UserPromptPart(content="go")]), pm.ModelResponse(parts=[call]),
               pm.ModelRequest(parts=[pm.ToolReturnPart(tool_name="lookup", content="boom", tool_call_id="c1",
                                                        outcome="retried"), feedback])]
    last = from_pydantic_ai(natives)[-1]
    assert [b.type for b in last.blocks] == [TOOL_RESULT, TEXT]
    assert last.blocks[0].is_error is True and last.blocks[0].tool_use_id == "c1"
    assert last.blocks[1].text == feedback.model_response()  # what the model is shown, not a repr


# ----------------------------------------------------------------------------------- Agents SDK
@st.composite
def response_items(draw) -> list:
    items: list = []
    for t in range(draw(st.integers(1, 4))):
        items.append({"role": "user", "content": draw(text)})
        calls = [f"call_{t}_{k}" for k in range(draw(st.integers(0, 3)))]
        if calls and draw(st.booleans()):
            items.append({"type": "reasoning", "id": f"rs_{t}", "summary": []})
        for cid in calls:
            items.append({"type": "function_call", "call_id": cid, "name": draw(ids),
                          "arguments": json.dumps(draw(st.dictionaries(ids, json_value, max_size=2)))})
        for cid in calls:
            items.append({"type": "function_call_output", "call_id": cid, "output": draw(text)})
        items.append({"type": "message", "role": "assistant", "id": f"msg_{t}", "status": "completed",
                      "content": [{"type": "output_text", "text": draw(text), "annotations": []}]})
    return items


@SETTINGS
@given(response_items())
def test_the_agents_sdk_filter_within_budget_hands_back_the_same_items(items):
    pytest.importorskip("agents")
    from agents import Agent
    from agents.run import CallModelData, ModelInputData

    from policies.adapters.openai_agents import prune_input
    from tracer.guard import PruneGuard

    guard = PruneGuard("recency", budget=1_000_000, provider="openai")
    out = prune_input(guard)(CallModelData(model_data=ModelInputData(input=list(items), instructions="be brief"),
                                           agent=Agent(name="a"), context=None))
    assert guard.errors == 0, guard.last_error
    assert [dict(i) for i in out.input] == items and out.instructions == "be brief"
