"""The gate inside the agent frameworks people use, driven for real (issue 12).

Each framework from PyPI runs the example in ``examples/`` (the code docs/frameworks.md shows) through
the scripted 24-round conversation of ``examples/scripted.py``: parallel tool calls, JSON results,
against a stand-in server started here that checks every request as the provider would and counts
it with the exact tokenizer. Sync, async and streaming. What is asserted is read back from where it
lives: the requests the server received, and the sessions in the trace store.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from policies.builtin.mask import MASK_PREFIX
from tests.paths import REPO
from tracer.store import Store

EXAMPLES = REPO / "examples"
sys.path.insert(0, str(EXAMPLES))

from scripted import ScriptedConversation  # noqa: E402
from standin_server import StandIn  # noqa: E402

BUDGET = 3000
ROUNDS = 24
FRAMEWORKS = {  # example module -> the PyPI package it needs
    "langchain_agent": "langchain",
    "langgraph_agent": "langgraph",
    "pydantic_ai_agent": "pydantic_ai",
    "openai_agents_sdk": "agents",
}


def example(name: str):
    pytest.importorskip(FRAMEWORKS[name], reason=f"the test extra installs {FRAMEWORKS[name]}")
    return importlib.import_module(name)


def drive(name: str, mode: str, store: Path, **kwargs):
    conversation = ScriptedConversation(ROUNDS)
    with StandIn(recording=conversation) as server:
        guard = example(name).run(f"{server.url}/v1", budget=BUDGET, store=str(store), mode=mode, **kwargs)
    return conversation, guard


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_every_request_is_valid_and_within_budget_in_one_session(tmp_path, name, mode):
    store_dir = tmp_path / "store"
    conversation, guard = drive(name, mode, store_dir)
    seen = conversation.requests
    assert len(seen) == ROUNDS + 1, "every round reached the model, then the final answer"
    assert [r.error for r in seen if not r.valid] == []
    assert max(r.tokens for r in seen) <= BUDGET, [r.tokens for r in seen]
    assert guard.errors == 0
    if mode == "stream":
        assert all(r.body.get("stream") for r in seen), "the framework streamed every model call"
    # the gate acted, and what it rewrote reached the model (not undone by a conversion)
    last = seen[-1].body["messages"]
    results = [m for m in last if m.get("role") == "tool"]
    assert len(results) < 60, "older tool results were pruned"
    assert any(isinstance(m.get("content"), str) and m["content"].startswith(MASK_PREFIX)
               for r in seen for m in r.body["messages"] if m.get("role") == "tool"), "masked results were sent"
    sessions = Store(store_dir).sessions()
    assert [s["session_id"] for s in sessions] == [guard.session_id]
    assert sessions[0]["violations"] == 0 and sessions[0]["decisions"] > 0


def test_a_framework_writing_the_gated_history_back_stays_one_session(tmp_path):
    store_dir = tmp_path / "store"
    conversation, guard = drive("pydantic_ai_agent", "sync", store_dir, write_back=True)
    assert [r.error for r in conversation.requests if not r.valid] == []
    assert max(r.tokens for r in conversation.requests) <= BUDGET
    assert [s["session_id"] for s in Store(store_dir).sessions()] == [guard.session_id]


def test_without_the_gate_the_same_conversation_outgrows_the_budget():
    """The control: the scripted conversation is big enough that the budget means something."""
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr
    from scripted import PROMPT, SYSTEM, get_weather, lookup_order

    conversation = ScriptedConversation(ROUNDS)
    with StandIn(recording=conversation) as server:
        model = ChatOpenAI(model="gpt-4o", base_url=f"{server.url}/v1", api_key=SecretStr("dummy-key"))
        agent = create_agent(model, [tool(lookup_order), tool(get_weather)], system_prompt=SYSTEM)
        agent.invoke({"messages": [{"role": "user", "content": PROMPT}]}, {"recursion_limit": 500})
    tokens = [r.tokens for r in conversation.requests]
    assert len(tokens) == ROUNDS + 1 and max(tokens) > 3 * BUDGET
