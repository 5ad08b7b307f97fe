"""The edges of the framework adapters (issue 25), each against the real framework package and the
stand-in server of ``examples/`` (which validates every request as the provider would):

- settings are checked when the adapter is built; at run time nothing the adapter cannot convert
  breaks the agent: it is sent unchanged, counted, logged and traced;
- every system message and every message kind the framework holds reaches the model;
- one session per conversation, keyed on the framework's identity, with other middleware stacked
  and with concurrent runs on one guard.
"""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from policies import SettingsError
from tests.paths import REPO
from tracer.guard import PruneGuard
from tracer.store import Store

sys.path.insert(0, str(REPO / "examples"))

from scripted import SYSTEM, ScriptedConversation, get_weather, lookup_order  # noqa: E402
from standin_server import StandIn  # noqa: E402

pytest.importorskip("langchain", reason="the test extra installs langchain")


def chat_model(url: str):
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(model="gpt-4o", base_url=f"{url}/v1", api_key=SecretStr("dummy-key"))


def lc_tools():
    from langchain_core.tools import tool

    return [tool(lookup_order), tool(get_weather)]


def roles(body: dict) -> list[tuple[str, str]]:
    return [(m["role"], m["content"] if isinstance(m.get("content"), str) else "") for m in body["messages"]]


# ----------------------------------------------------------------------------------- settings
@pytest.mark.parametrize("build", ["langchain_middleware", "langgraph", "pydantic_ai", "openai_agents", "google_adk"])
def test_every_adapter_refuses_something_that_is_not_a_guard(build):
    from policies.adapters import google_adk, langchain_middleware, langgraph, openai_agents, pydantic_ai

    make = {"langchain_middleware": langchain_middleware.prune_middleware, "langgraph": langgraph.prune_hook,
            "pydantic_ai": pydantic_ai.prune_history, "openai_agents": openai_agents.prune_input,
            "google_adk": google_adk.prune_callback}[build]
    with pytest.raises(SettingsError, match="expected a PruneGuard"):
        make(object())
    with pytest.raises(SettingsError, match="conversation must be a string, a callable or None"):
        make(PruneGuard("recency", budget=1000), conversation=42)


# ----------------------------------------------------------------------------------- LangChain
def ask_langchain(store: Path, messages: list, before: Sequence[Any] = ()) -> tuple[ScriptedConversation, PruneGuard]:
    """A LangChain agent with the gate as its last middleware (``before`` ahead of it), asked
    ``messages`` once against the stand-in (one scripted round); the guard closed."""
    from langchain.agents import create_agent

    from policies.adapters.langchain_middleware import prune_middleware

    conversation = ScriptedConversation(1)
    guard = PruneGuard("recency", budget=50_000, provider="openai", store=str(store))
    with StandIn(recording=conversation) as server:
        agent = create_agent(chat_model(server.url), lc_tools(), system_prompt=SYSTEM,
                             middleware=[*before, prune_middleware(guard)])
        agent.invoke({"messages": messages})
    guard.close()
    return conversation, guard


def test_langchain_middleware_keeps_a_second_system_message(tmp_path):
    from langchain_core.messages import HumanMessage, SystemMessage

    conversation, guard = ask_langchain(tmp_path / "store", [SystemMessage("Answer in French."), HumanMessage("hello")])
    first = conversation.requests[0].body
    assert roles(first)[:3] == [("system", SYSTEM), ("system", "Answer in French."), ("user", "hello")]
    assert all(r.valid for r in conversation.requests) and guard.errors == 0


def test_a_history_the_adapter_cannot_convert_is_sent_unchanged_counted_and_traced(tmp_path, caplog):
    """A middleware stacked before the gate hands it message dicts (LangChain's models take them; the
    adapter converts LangChain messages only): the request goes out unchanged and the agent runs on."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import convert_to_openai_messages

    class AsDicts(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            return handler(request.override(messages=convert_to_openai_messages(request.messages)))

    store = tmp_path / "store"
    conversation, guard = ask_langchain(store, [{"role": "user", "content": "hello"}], before=[AsDicts()])
    assert len(conversation.requests) == 2 and all(r.valid for r in conversation.requests), "the agent ran on"
    assert guard.errors == 2 and "cannot gate a dict" in (guard.last_error or "")
    assert caplog.text.count("passing the request through unchanged") == 2
    rows = [r for r in Store(store).spans(guard.session_id) if r["name"] == "prunegate.passthrough"]
    assert len(rows) == 2 and all("langchain_middleware" in str(r) for r in rows)


def test_langchain_chat_message_is_converted_not_refused(tmp_path):
    from langchain_core.messages import ChatMessage

    conversation, guard = ask_langchain(tmp_path / "store", [ChatMessage(role="user", content="hello there")])
    assert guard.errors == 0
    assert roles(conversation.requests[0].body)[1] == ("user", "hello there")
    assert all(r.valid for r in conversation.requests)


def test_langgraph_prompt_may_be_a_system_message(tmp_path):
    from langchain_core.messages import SystemMessage
    from langgraph.prebuilt import create_react_agent

    from policies.adapters.langgraph import prune_hook

    conversation = ScriptedConversation(1)
    guard = PruneGuard("recency", budget=50_000, provider="openai", store=str(tmp_path / "store"))
    prompt = SystemMessage(content=SYSTEM)
    with StandIn(recording=conversation) as server:
        agent = create_react_agent(chat_model(server.url), lc_tools(), prompt=prompt,
                                   pre_model_hook=prune_hook(guard, tools=lc_tools(), prompt=prompt))
        agent.invoke({"messages": [{"role": "user", "content": "hello"}]})
    guard.close()
    assert guard.errors == 0 and len(conversation.requests) == 2
    assert roles(conversation.requests[0].body)[:2] == [("system", SYSTEM), ("user", "hello")]
    with pytest.raises(SettingsError, match="prompt must be a string or a SystemMessage"):
        prune_hook(guard, prompt=42)


def test_langgraph_threads_are_one_session_each_on_one_guard(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent

    from policies.adapters.langgraph import prune_hook

    conversation = ScriptedConversation(2)
    store = tmp_path / "store"
    guard = PruneGuard("recency", budget=50_000, provider="openai", store=str(store))
    with StandIn(recording=conversation) as server:
        agent = create_react_agent(chat_model(server.url), lc_tools(), prompt=SYSTEM, checkpointer=InMemorySaver(),
                                   pre_model_hook=prune_hook(guard, tools=lc_tools(), prompt=SYSTEM))

        async def both() -> None:
            await asyncio.gather(*(agent.ainvoke({"messages": [{"role": "user", "content": f"user {t}"}]},
                                                 {"configurable": {"thread_id": t}}) for t in ("t1", "t2")))
            # a second turn on t1 continues its session
            await agent.ainvoke({"messages": [{"role": "user", "content": "and again"}]},
                                {"configurable": {"thread_id": "t1"}})

        asyncio.run(both())
    guard.close()
    assert guard.errors == 0 and all(r.valid for r in conversation.requests)
    assert set(guard.conversations) == {"thread:t1", "thread:t2"}
    sessions = Store(store).sessions()
    assert sorted(s["session_id"] for s in sessions) == sorted(guard.conversations.values())


def test_summarization_middleware_stacked_before_the_gate_stays_one_session(tmp_path):
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware

    from policies.adapters.langchain_middleware import prune_middleware

    conversation = ScriptedConversation(8)
    store = tmp_path / "store"
    guard = PruneGuard("recency", budget=50_000, provider="openai", store=str(store))
    with StandIn(recording=conversation) as server:
        summarizer = SummarizationMiddleware(model=chat_model(server.url), trigger=("messages", 8), keep=("messages", 4))
        agent = create_agent(chat_model(server.url), lc_tools(), system_prompt=SYSTEM,
                             middleware=[summarizer, prune_middleware(guard)])
        agent.invoke({"messages": [{"role": "user", "content": "check my orders"}]}, {"recursion_limit": 100})
    guard.close()
    to_agent = [r for r in conversation.requests if r.body.get("tools")]
    summarized = [r for r in to_agent if any("summary" in str(m.get("content", "")).lower()
                                              for m in r.body["messages"] if m["role"] == "user")]
    assert summarized, "the summarizer's rewrite reached the model"
    assert guard.errors == 0 and all(r.valid for r in conversation.requests)
    sessions = Store(store).sessions()
    assert len(sessions) == 1, [s["session_id"] for s in sessions]


# ----------------------------------------------------------------------------------- Pydantic AI
def test_concurrent_pydantic_ai_runs_on_one_guard_are_one_session_each(tmp_path):
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from policies.adapters.pydantic_ai import prune_history

    conversation = ScriptedConversation(3)
    store = tmp_path / "store"
    guard = PruneGuard("recency", budget=50_000, provider="openai", store=str(store))
    with StandIn(recording=conversation) as server:
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=f"{server.url}/v1", api_key="dummy"))
        agent = Agent(model, tools=[lookup_order, get_weather], system_prompt=SYSTEM,
                      capabilities=[prune_history(guard)])

        async def runs() -> None:
            await asyncio.gather(*(agent.run(f"user {k}") for k in range(3)))

        asyncio.run(runs())
    guard.close()
    assert guard.errors == 0 and all(r.valid for r in conversation.requests)
    assert len(conversation.requests) == 12
    sessions = Store(store).sessions()
    assert len(sessions) == 3 and len(guard.conversations) == 3


# ----------------------------------------------------------------------------------- OpenAI Agents SDK
def test_concurrent_agents_sdk_runs_are_one_session_per_group(tmp_path):
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
    from agents.tracing import set_trace_processors
    from openai import AsyncOpenAI

    from policies.adapters.openai_agents import prune_input

    set_trace_processors([])  # the SDK's traces on (they carry the group id), exported nowhere
    conversation = ScriptedConversation(2)
    store = tmp_path / "store"
    guard = PruneGuard("recency", budget=50_000, provider="openai", store=str(store))
    with StandIn(recording=conversation) as server:
        model = OpenAIChatCompletionsModel("gpt-4o", AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k"))
        agent = Agent(name="support", instructions=SYSTEM, model=model,
                      tools=[function_tool(lookup_order), function_tool(get_weather)])

        async def runs() -> None:
            await asyncio.gather(*(Runner.run(agent, f"user {k}", run_config=RunConfig(
                call_model_input_filter=prune_input(guard), group_id=f"chat-{k}")) for k in range(3)))

        asyncio.run(runs())
    guard.close()
    assert guard.errors == 0 and all(r.valid for r in conversation.requests) and len(conversation.requests) == 9
    assert set(guard.conversations) == {"group:chat-0", "group:chat-1", "group:chat-2"}
    assert sorted(s["session_id"] for s in Store(store).sessions()) == sorted(guard.conversations.values())


def test_a_pydantic_ai_tool_retry_keeps_its_error_channel_through_the_gate(tmp_path):
    """A tool that raises ModelRetry: pydantic-ai 2.x marks the answer ``outcome='retried'``; through a
    gate that masks old results, the model still gets it as an error, with no deprecated part built."""
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from policies.adapters.pydantic_ai import prune_history

    seen: list[list[Any]] = []

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) <= 3:  # ask the flaky tool three times (the first answer is a retry)
            return ModelResponse(parts=[ToolCallPart("flaky", {"n": len(seen)}, tool_call_id=f"c{len(seen)}")])
        return ModelResponse(parts=[TextPart("done")])

    calls = {"n": 0}
    agent = Agent(FunctionModel(model), system_prompt=SYSTEM,
                  capabilities=[prune_history(guard := PruneGuard("mask", budget=60, provider="openai",
                                                                  policy_params={"keep_last": 1},
                                                                  store=str(tmp_path / "store")))])

    @agent.tool_plain
    def flaky(n: int) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ModelRetry("the order service timed out; try again " + "x" * 200)
        return f"result {n} " + "y" * 200

    from pydantic_ai._warnings import PydanticAIDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", PydanticAIDeprecationWarning)
        assert agent.run_sync("go").output == "done"
    guard.close()
    assert guard.errors == 0
    sent = [p for m in seen[-1] for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    first = [p for p in sent if p.tool_call_id == "c1"]
    assert len(first) == 1 and first[0].outcome == "retried" and "masked" in str(first[0].content)  # masked, still an error
    assert len(Store(tmp_path / "store").sessions()) == 1
