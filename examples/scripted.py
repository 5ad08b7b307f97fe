"""A scripted tool-using conversation the stand-in server plays, for any agent framework.

``ScriptedConversation`` answers OpenAI Chat Completions, Anthropic Messages and OpenAI Responses
requests, each in its own shape: for ``rounds`` model calls it
asks for tools in parallel (two or three calls a round: ``lookup_order`` and ``get_weather``),
then it answers in text. Every request is first checked as the provider would
(:func:`policies.validate`; an invalid one gets the provider's 400) and counted with the exact
tokenizer (whole request: messages, tool definitions, framing), so a run can show that every
request the agent sent was valid and within the budget. Conversations are told apart by their first
user message (the gate always keeps it).

The two tools are plain functions returning JSON-able dicts; each framework wraps them its own way.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from policies import convert
from policies.tokens import counter_for, request_overhead
from policies.validate import validate

CITIES = ("Lisbon", "Osaka", "Quito", "Tromso", "Nairobi", "Hobart", "Tartu")
SYSTEM = "You are a support agent. Look orders up and check the weather where they ship; answer briefly."
PROMPT = "Check my orders A-0 to A-60 and the weather where each one goes."


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id."""
    n = sum(map(ord, order_id))
    return {"order_id": order_id, "status": ("shipped", "packed", "delayed")[n % 3],
            "items": [{"sku": f"SKU-{n % 97:03d}-{k}", "qty": 1 + (n + k) % 4, "price_eur": round(3.5 + (n * k) % 40, 2)}
                      for k in range(3)],
            "ship_to": {"city": CITIES[n % len(CITIES)], "postcode": f"{n % 9000 + 1000}"},
            "history": [{"at": f"2026-11-{1 + (n + k) % 28:02d}T10:{k:02d}:00Z", "event": e}
                        for k, e in enumerate(("created", "paid", "packed"))]}


def get_weather(city: str) -> dict[str, Any]:
    """The weather forecast for a city."""
    n = sum(map(ord, city))
    return {"city": city, "forecast": [{"day": d, "high_c": 5 + (n + d) % 25, "low_c": (n + d) % 10,
                                        "sky": ("clear", "rain", "cloudy")[(n + d) % 3]} for d in range(3)]}


TOOLS = {"lookup_order": lookup_order, "get_weather": get_weather}


def calls_for(round_no: int) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the model asks for in ``round_no`` (a parallel batch of two or three)."""
    calls: list[tuple[str, dict[str, Any]]] = [("lookup_order", {"order_id": f"A-{2 * round_no}"}),
                                               ("get_weather", {"city": CITIES[round_no % len(CITIES)]})]
    if round_no % 2:
        calls.append(("lookup_order", {"order_id": f"A-{2 * round_no + 1}"}))
    return calls


@dataclass
class Request:
    """One request the server saw."""

    conversation: str
    tokens: int
    messages: int
    valid: bool
    error: str | None = None
    body: dict[str, Any] = field(default_factory=dict, repr=False)
    provider: str = convert.OPENAI


class ScriptedConversation:
    """The stand-in's answers for scripted conversations of ``rounds`` tool rounds (see the module doc)."""

    def __init__(self, rounds: int = 24, model: str = "gpt-4o") -> None:
        self.rounds = rounds
        self.model = model
        self.counter = counter_for(convert.OPENAI)
        self.requests: list[Request] = []
        self._round: dict[str, int] = {}
        self._lock = threading.Lock()

    def tokens(self, body: dict[str, Any], provider: str = convert.OPENAI) -> int:
        """The request's tokens by the exact counter: messages plus tools and framing."""
        read = {convert.OPENAI: convert.from_openai, convert.ANTHROPIC: convert.from_anthropic,
                convert.RESPONSES: convert.from_responses}[provider]
        messages, rest = read(body)
        has_system = any(m.role in ("system", "developer") for m in messages)
        return sum(self.counter.count(m) for m in messages) + request_overhead(self.counter, rest, has_system=has_system)

    def answer(self, provider: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The scripted answer in ``provider``'s own shape: Chat Completions (``openai``), Anthropic
        Messages (``anthropic``), the Responses API (``responses``) or Gemini (``gemini``, checked and
        counted as the Chat Completions body it amounts to); the provider's 400 when invalid."""
        if provider == GEMINI:
            try:
                chat = gemini_as_chat(body)
            except ValueError as exc:
                with self._lock:
                    self.requests.append(Request("?", 0, 0, False, str(exc), body, provider))
                return 400, {"error": {"code": 400, "message": str(exc), "status": "INVALID_ARGUMENT"}}
            status, out = self.answer(convert.OPENAI, chat)
            with self._lock:
                self.requests[-1].body, self.requests[-1].provider = body, GEMINI
            return status, gemini_response(out) if status == 200 else \
                {"error": {"code": status, "message": out["error"]["message"], "status": "INVALID_ARGUMENT"}}
        if provider not in (convert.OPENAI, convert.ANTHROPIC, convert.RESPONSES):
            return 404, {"error": {"message": f"scripted: no {provider} API", "type": "not_found_error"}}
        messages = (body.get("input") if provider == convert.RESPONSES else body.get("messages")) or []
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        first = next((m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
        key = first if isinstance(first, str) else json.dumps(first)
        violations = validate(body, provider)
        with self._lock:
            if violations:
                self.requests.append(Request(key, 0, len(messages), False, violations[0].message, body, provider))
                return 400, error_body(provider, violations[0].message)
            tokens = self.tokens(body, provider)
            self.requests.append(Request(key, tokens, len(messages), True, None, body, provider))
            r = self._round.get(key, 0)
            self._round[key] = r + 1
        calls = [(f"call_{r}_{j}", name, args) for j, (name, args) in enumerate(calls_for(r))] if r < self.rounds else []
        text = f"All {2 * r} orders checked; weather looked up."
        if provider == convert.ANTHROPIC:
            content = [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls] \
                or [{"type": "text", "text": text}]
            return 200, {"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
                         "model": self.model, "content": content, "stop_reason": "tool_use" if calls else "end_turn",
                         "stop_sequence": None, "usage": {"input_tokens": tokens, "output_tokens": 20}}
        if provider == convert.RESPONSES:
            output = [{"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": name,
                       "arguments": json.dumps(args), "status": "completed"} for cid, name, args in calls] \
                or [{"type": "message", "id": f"msg_{len(self.requests)}", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": text, "annotations": []}]}]
            return 200, {"id": f"resp_{len(self.requests)}", "object": "response", "created_at": 1764720000,
                         "status": "completed", "model": self.model, "output": output, "parallel_tool_calls": True,
                         "tool_choice": "auto", "tools": [],
                         "usage": {"input_tokens": tokens, "output_tokens": 20, "total_tokens": tokens + 20,
                                   "input_tokens_details": {"cached_tokens": 0},
                                   "output_tokens_details": {"reasoning_tokens": 0}}}
        if calls:
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, name, args in calls]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": text}
            finish = "stop"
        return 200, {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 1764720000,
                     "model": self.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                     "usage": {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}}


GEMINI = "gemini"


def gemini_as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Gemini ``generateContent`` body as the Chat Completions body it amounts to, for the same
    structural checks: a ``functionResponse`` must answer a ``functionCall`` of the turn before it
    (by id when both have one, else by name, in order). ValueError for what Gemini refuses outright."""
    messages: list[dict[str, Any]] = []
    instruction = body.get("systemInstruction") or body.get("system_instruction")
    if instruction:
        messages.append({"role": "system", "content": "".join(p.get("text", "") for p in instruction.get("parts", []))})
    pending: list[tuple[str, str]] = []
    for i, content in enumerate(body.get("contents") or []):
        role, parts = content.get("role"), content.get("parts") or []
        if role not in ("user", "model"):
            raise ValueError(f"contents[{i}]: role must be 'user' or 'model', got {role!r}")
        if role == "model":
            calls = []
            for k, p in enumerate(parts):
                if "functionCall" in p:
                    fc = p["functionCall"]
                    cid = fc.get("id") or f"g{i}_{k}"
                    pending.append((fc.get("name", ""), cid))
                    calls.append({"id": cid, "type": "function", "function": {
                        "name": fc.get("name", ""), "arguments": json.dumps(fc.get("args") or {})}})
            text = "".join(p.get("text", "") for p in parts if "text" in p and not p.get("thought"))
            messages.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
            continue
        texts = []
        for p in parts:
            if "functionResponse" in p:
                fr = p["functionResponse"]
                cid = fr.get("id") or next((c for n, c in pending if n == fr.get("name")), f"orphan_{i}")
                pending[:] = [x for x in pending if x[1] != cid]
                response = fr.get("response")  # {"result": text} is how a text result travels (ADK's convention)
                text = response["result"] if isinstance(response, dict) and list(response) == ["result"] \
                    and isinstance(response["result"], str) else json.dumps(response)
                messages.append({"role": "tool", "tool_call_id": cid, "content": text})
            elif "text" in p:
                texts.append(p["text"])
        if texts:
            messages.append({"role": "user", "content": "".join(texts)})
    tools = [{"type": "function", "function": {
        "name": f.get("name"), "description": f.get("description", ""),
        "parameters": f.get("parameters") or f.get("parametersJsonSchema") or f.get("parameters_json_schema") or {}}}
             for t in body.get("tools") or [] for f in t.get("functionDeclarations") or []]
    return {"model": "gemini", "messages": messages, **({"tools": tools} if tools else {})}


def gemini_response(chat: dict[str, Any]) -> dict[str, Any]:
    """A scripted Chat Completions answer in Gemini's ``GenerateContentResponse`` shape."""
    message = chat["choices"][0]["message"]
    parts: list[dict[str, Any]] = [{"functionCall": {"name": c["function"]["name"],
                                                     "args": json.loads(c["function"]["arguments"])}}
                                   for c in message.get("tool_calls") or []]
    if message.get("content"):
        parts.append({"text": message["content"]})
    usage = chat["usage"]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": usage["prompt_tokens"], "candidatesTokenCount": 20,
                              "totalTokenCount": usage["total_tokens"]}, "modelVersion": "gemini-scripted"}


def error_body(provider: str, message: str) -> dict[str, Any]:
    """The provider's 400 envelope for an invalid request."""
    if provider == convert.ANTHROPIC:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": None}}


def ask_in_mode(mode: str, sync: Callable[[], Any], run_async: Callable[[], Awaitable[Any]],
                stream: Callable[[], AsyncIterator[Any]]) -> None:
    """Ask once the way ``mode`` says: ``sync`` calls ``sync``; ``async`` runs ``run_async()``; any
    other mode reads ``stream()`` to its end (every framework example offers the three)."""
    if mode == "sync":
        sync()
    elif mode == "async":
        asyncio.run(run_async())
    else:
        async def drain() -> None:
            async for _ in stream():
                pass
        asyncio.run(drain())


def ask_runnable(agent: Any, mode: str) -> None:
    """Ask a LangChain runnable (a LangChain or LangGraph agent) the scripted question in ``mode``:
    ``invoke``, ``ainvoke`` or a stream of messages."""
    question: Any = {"messages": [{"role": "user", "content": f"{PROMPT} ({mode})"}]}
    config: Any = {"recursion_limit": 500}
    if mode == "sync":
        agent.invoke(question, config)
    elif mode == "async":
        asyncio.run(agent.ainvoke(question, config))
    else:
        for _ in agent.stream(question, config, stream_mode="messages"):
            pass


def summary(conversation: ScriptedConversation, guard: Any, budget: int) -> dict[str, Any]:
    """What the stand-in saw of a run: requests, invalid ones, the largest request against the budget."""
    seen = conversation.requests
    return {"requests": len(seen), "invalid": sum(not r.valid for r in seen),
            "max_request_tokens": max((r.tokens for r in seen), default=0), "budget": budget,
            "over_budget": sum(r.tokens > budget for r in seen), "session_id": guard.session_id,
            "guard_errors": guard.errors}


def main(run: Any, argv: list[str] | None = None, *, doc: str = "") -> int:
    """The command line of the framework examples: start the scripted stand-in, run, print a summary."""
    import argparse  # noqa: PLC0415

    from standin_server import StandIn  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--store", help="trace store directory (default: the global tracer provider)")
    parser.add_argument("--budget", type=int, default=3000, help="token budget of the whole request")
    parser.add_argument("--rounds", type=int, default=24, help="tool rounds of the scripted conversation")
    parser.add_argument("--mode", choices=("sync", "async", "stream"), default="sync")
    parser.add_argument("--base-url", help="a stand-in already running (default: start one here); the summary "
                                           "then says what the guard saw, the server keeps the rest")
    args = parser.parse_args(argv)
    if args.base_url:
        guard = run(args.base_url, budget=args.budget, store=args.store, mode=args.mode)
        print(json.dumps({"session_id": guard.session_id, "guard_errors": guard.errors,
                          "conversations": {str(k): v for k, v in guard.conversations.items()}}))
        return 0
    conversation = ScriptedConversation(args.rounds)
    with StandIn(recording=conversation) as server:
        guard = run(f"{server.url}/v1", budget=args.budget, store=args.store, mode=args.mode)
    print(json.dumps(summary(conversation, guard, args.budget)))
    return 0
