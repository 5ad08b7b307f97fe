"""``guard.wrap(client)``: the official SDK clients, gated, against the stand-in server.

A tool-using agent loop (the scripted conversation of ``examples/scripted.py``: parallel calls,
big JSON results) runs through the real ``anthropic`` and ``openai`` SDKs, sync and async, with and
without streaming, on every API the wrapper covers. The stand-in validates each request as the
provider would. What is asserted is read back from where it lives: the requests the server got and
the spans in the store.
"""

from __future__ import annotations

import asyncio
import json
import sys

import anthropic
import openai
import pytest

from policies import SettingsError
from policies.builtin.mask import MASK_PREFIX
from tests.paths import REPO
from tracer.guard import PruneGuard, assistant_message, tool_calls, tool_results_message
from tracer.store import Store

sys.path.insert(0, str(REPO / "examples"))

from scripted import PROMPT, SYSTEM, TOOLS, ScriptedConversation  # noqa: E402
from standin_server import StandIn  # noqa: E402

ROUNDS = 6
BUDGET = 1500
OPENAI_TOOLS = [{"type": "function", "function": {"name": n, "description": f.__doc__, "parameters": {
    "type": "object", "properties": {p: {"type": "string"} for p in ("order_id",) if n == "lookup_order"}
    | {p: {"type": "string"} for p in ("city",) if n == "get_weather"}}}} for n, f in TOOLS.items()]
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in OPENAI_TOOLS]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in OPENAI_TOOLS]


def run_tool(name: str, args: dict) -> str:
    return json.dumps(TOOLS[name](**args))


def step(api: str, history: list, response: dict) -> bool:
    """Append the response and the tool results to the history; False when the model answered in text."""
    if api == "responses":
        history.extend(response["output"])
        calls = [i for i in response["output"] if i["type"] == "function_call"]
        history.extend({"type": "function_call_output", "call_id": c["call_id"],
                        "output": run_tool(c["name"], json.loads(c["arguments"]))} for c in calls)
        return bool(calls)
    provider = "anthropic" if api == "anthropic" else "openai"
    history.append(assistant_message(response, provider))
    calls = tool_calls(response, provider)
    history.extend(tool_results_message([(c.id, run_tool(c.name, c.arguments)) for c in calls], provider))
    return bool(calls)


def request(api: str, history: list, stream: bool) -> dict:
    if api == "anthropic":
        body = {"model": "claude-x", "max_tokens": 256, "system": SYSTEM, "tools": ANTHROPIC_TOOLS, "messages": history}
    elif api == "chat":
        body = {"model": "gpt-4o", "tools": OPENAI_TOOLS, "messages": [{"role": "system", "content": SYSTEM}, *history]}
    else:
        body = {"model": "gpt-4o", "instructions": SYSTEM, "tools": RESPONSES_TOOLS, "input": history}
    return {**body, "stream": True} if stream else body


def collect(api: str, events: list) -> dict:
    """What a streaming caller rebuilds from the events (as the SDKs' own helpers do)."""
    if api == "anthropic":
        from anthropic.lib.streaming._messages import accumulate_event

        snap, bufs = None, {}
        for e in events:
            snap = accumulate_event(event=e, current_snapshot=snap, json_bufs=bufs)
        return snap.model_dump()
    if api == "chat":
        from openai.lib.streaming.chat._completions import ChatCompletionStreamState

        state = ChatCompletionStreamState()
        for e in events:
            state.handle_chunk(e)
        return state.current_completion_snapshot.model_dump()
    return next(e.response for e in events if e.type == "response.completed").model_dump(exclude_none=True)


def call(client, api: str, body: dict, how: str) -> dict:
    if how == "manager":  # anthropic's messages.stream(...) helper
        with client.messages.stream(**body) as s:
            return s.get_final_message().model_dump()
    create = {"anthropic": lambda: client.messages.create, "chat": lambda: client.chat.completions.create,
              "responses": lambda: client.responses.create}[api]()
    out = create(**body)
    return collect(api, list(out)) if body.get("stream") else out.model_dump(exclude_none=api == "responses")


async def acall(client, api: str, body: dict, how: str) -> dict:
    if how == "manager":
        async with client.messages.stream(**body) as s:
            return (await s.get_final_message()).model_dump()
    create = {"anthropic": lambda: client.messages.create, "chat": lambda: client.chat.completions.create,
              "responses": lambda: client.responses.create}[api]()
    out = await create(**body)
    if body.get("stream"):
        return collect(api, [e async for e in out])
    return out.model_dump(exclude_none=api == "responses")


CASES = [(api, how, sync, "recency") for api in ("anthropic", "chat", "responses") for how in ("create", "stream")
         for sync in (True, False)] + [("anthropic", "manager", True, "recency"), ("anthropic", "manager", False, "recency")]
CASES += [(api, "create", True, "mask") for api in ("anthropic", "chat", "responses")]  # rewrites reach the model


@pytest.mark.parametrize("api,how,sync,policy", CASES)
def test_a_wrapped_client_gates_every_call_and_records_every_response(tmp_path, api, how, sync, policy):
    provider = "anthropic" if api == "anthropic" else "openai"
    store = tmp_path / "store"
    guard = PruneGuard(policy, budget=BUDGET, provider=provider, store=str(store))
    conversation = ScriptedConversation(ROUNDS)
    history: list = [{"role": "user", "content": PROMPT}]
    with StandIn(recording=conversation) as server:
        if sync:
            raw = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) if provider == "anthropic" \
                else openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
            client = guard.wrap(raw)
            for _ in range(ROUNDS + 1):
                if not step(api, history, call(client, api, request(api, history, how == "stream"), how)):
                    break
        else:
            async def loop() -> None:
                raw = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0) \
                    if provider == "anthropic" else openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k",
                                                                       max_retries=0)
                client = guard.wrap(raw)
                for _ in range(ROUNDS + 1):
                    if not step(api, history, await acall(client, api, request(api, history, how == "stream"), how)):
                        break

            asyncio.run(loop())
    guard.close()
    seen = conversation.requests
    assert len(seen) == ROUNDS + 1 and [r.error for r in seen if not r.valid] == []
    if policy == "mask":
        assert MASK_PREFIX in json.dumps([r.body for r in seen]), "the gate's masked results reached the model"
        return
    assert seen[-1].messages < len(history) - 1, "the gate pruned what the agent kept sending"
    if provider == "openai":
        assert max(r.tokens for r in seen) <= BUDGET
    assert guard.errors == 0
    if how == "stream":
        assert all(r.body.get("stream") for r in seen)
    assert [s["session_id"] for s in Store(store).sessions()] == [guard.session_id]
    rows = Store(store).spans(guard.session_id)
    chats = [r for r in rows if str(r["name"]).startswith("chat ")]
    assert len(chats) == ROUNDS + 1
    assert all('"gen_ai.response.id"' in json.dumps(r, default=str) for r in chats), "each response recorded"
    assert len({r["session_id"] for r in rows}) == 1


def test_a_provider_error_is_recorded_and_raised(tmp_path):
    store = tmp_path / "store"
    guard = PruneGuard("recency", budget=BUDGET, provider="openai", store=str(store))
    with StandIn() as server:  # the recorded answers: none for this prompt, a 404 in OpenAI's shape
        client = guard.wrap(openai.OpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0))
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "unrecorded"}])
    guard.close()
    chats = [r for r in Store(store).spans(guard.session_id) if str(r["name"]).startswith("chat ")]
    assert len(chats) == 1
    assert chats[0]["status_code"] == "ERROR" and "no recorded response" in json.dumps(chats[0], default=str)


def test_wrap_refuses_a_client_of_the_other_provider_or_no_client():
    guard = PruneGuard("recency", budget=BUDGET, provider="anthropic")
    with pytest.raises(SettingsError, match="a openai client needs a guard made with provider='openai'"):
        guard.wrap(openai.OpenAI(api_key="k"))
    with pytest.raises(SettingsError, match="expected an anthropic.Anthropic"):
        guard.wrap(object())
    wrapped = guard.wrap(anthropic.Anthropic(api_key="k"))
    assert wrapped.api_key == "k", "everything else is the client's own"
