"""The gate as a Google ADK ``before_model_callback``, with ``google.genai`` ``Content`` converters.

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    agent = Agent(name="support", model=model, instruction=SYSTEM, tools=[lookup_order, get_weather],
                  before_model_callback=prune_callback(guard))

Before every model call ADK hands the callback the ``LlmRequest``: its ``contents`` (the history,
as ``google.genai.types.Content``) are gated, the system instruction and tool declarations counted,
and the gated contents put back; the session's events keep everything. One session per ADK session
id (``conversation=`` overrides it). What the callback cannot convert is sent unchanged, counted.

Conversion: a ``model`` content is one assistant message (text, thoughts, ``function_call``s: a
parallel batch is one unit); a ``user`` content is one user message (text; images, files and other
parts verbatim), its ``function_response``s one tool message each (as the provider counts them). Gemini matches a response to its call by id
when ADK keeps one, else by order and name: calls without an id get one here (``#<n>``), which goes
no further than the gate. Back, unchanged parts return as themselves, in their own content.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import StructureError
from ..messages import OTHER, TEXT, THINKING, TOOL_RESULT, TOOL_USE, Block, Message
from ._native import Conversation, MessageGate, Originals, gate_or_pass, require_conversation, require_gate

PARENT = "_adk_content"  # Message.extra: the index of the Content it was converted from
SYNTHETIC = "#"  # the prefix of call ids made here for calls that had none


def _types() -> Any:
    try:
        from google.genai import types  # noqa: PLC0415 - optional extra, imported on use
    except ImportError as exc:
        raise ImportError("Google ADK support needs google-adk: pip install google-adk") from exc
    return types


def from_adk(contents: Iterable[Any], originals: Originals | None = None) -> list[Message]:
    """Messages for ``google.genai`` ``Content`` objects; ``originals`` remembers contents and parts."""
    out: list[Message] = []
    pending: list[tuple[str, str]] = []  # (name, id) of calls not answered yet, for id-less responses
    made = 0
    for i, content in enumerate(contents):
        role = getattr(content, "role", None)
        if role not in ("user", "model"):
            raise StructureError(f"content {i}: role {role!r} (expected 'user' or 'model')")
        blocks: list[Block] = []
        for part in content.parts or []:
            call, response = part.function_call, part.function_response
            if call is not None:
                made += 1
                cid = call.id or f"{SYNTHETIC}{made}"
                pending.append((call.name or "", cid))
                blocks.append(Block(TOOL_USE, id=cid, name=call.name or "", input=dict(call.args or {})))
            elif response is not None:
                cid = response.id or _answer(pending, response.name or "", i)
                pending[:] = [p for p in pending if p[1] != cid]
                blocks.append(Block(TOOL_RESULT, tool_use_id=cid, name=response.name,
                                    content=json.dumps(response.response or {}, ensure_ascii=False, default=str)))
            elif part.text is not None:
                blocks.append(Block(THINKING if part.thought else TEXT, text=part.text))
            else:
                blocks.append(Block(OTHER, extra=part.model_dump(mode="json", exclude_none=True)))
        if originals is not None:
            originals.natives.append(content)
            for block, part in zip(blocks, content.parts or [], strict=False):
                originals.remember_block("assistant" if role == "model" else "user", block, (content, part))
        results = [b for b in blocks if b.type == TOOL_RESULT]
        if role == "user" and results:  # one tool message per response, as the provider counts them
            msgs = [Message(id="", role="tool", blocks=[b], form="str", extra={PARENT: i}) for b in results]
            rest = [b for b in blocks if b.type != TOOL_RESULT]
            if rest:
                msgs.append(Message(id="", role="user", blocks=rest, form="list", extra={PARENT: i}))
        else:
            msgs = [Message(id="", role="assistant" if role == "model" else "user",
                            blocks=blocks or [Block(TEXT, text="")], form="list", extra={PARENT: i})]
            if originals is not None:
                originals.remember(msgs[0], content)
        out.extend(msgs)
    return out


def _answer(pending: list[tuple[str, str]], name: str, i: int) -> str:
    for pname, cid in pending:
        if pname == name:
            return cid
    raise StructureError(f"content {i}: function_response {name!r} answers no call before it")


def to_adk(messages: Sequence[Message], originals: Originals | None = None) -> list[Any]:
    """``Content`` objects for messages: originals where unchanged, the rest built part by part
    (unchanged parts kept); messages from one content (its function responses) regroup into it."""
    types = _types()
    groups: list[tuple[Any, Any, list[Any], str]] = []  # (key, original content or None, parts, role)
    for m in messages:
        role = "model" if m.role == "assistant" else "user"
        found = originals.lookup(m) if originals is not None else None
        if found is not None:
            parent, parts = found, list(found.parts or [])
        else:
            hint = m.extra.get(PARENT)
            parent = originals.natives[hint] if originals is not None and isinstance(hint, int) \
                and 0 <= hint < len(originals.natives) else None
            if m.role in ("system", "developer"):  # a note the gate wrote travels as user text
                parent, parts = None, [types.Part(text=m.plain_text())]
            else:
                parts = []
                for b in m.blocks:
                    kept = originals.lookup_block(m.role if m.role != "tool" else "user", b, parent) \
                        if originals is not None else None
                    parts.append(kept[1] if kept is not None else _part(types, b))
        hint = m.extra.get(PARENT)
        key = parent if parent is not None else (("content", hint) if isinstance(hint, int) else None)
        if groups and key is not None and (groups[-1][0] is key or (isinstance(key, tuple) and groups[-1][0] == key)):
            groups[-1][2].extend(parts)
        else:
            groups.append((key, parent, parts, role))
    out = []
    for _, parent, parts, role in groups:
        if parent is not None and len(parts) == len(parent.parts or []) \
                and all(p is q for p, q in zip(parts, parent.parts or [], strict=True)):
            out.append(parent)
        elif parent is not None:
            out.append(parent.model_copy(update={"parts": parts}))
        else:
            out.append(types.Content(role=role, parts=parts))
    return out


def _part(types: Any, b: Block) -> Any:
    """A ``Part`` for a block the gate wrote or changed (ids made here are not sent)."""
    if b.type == TOOL_USE:
        cid = None if (b.id or "").startswith(SYNTHETIC) else b.id
        return types.Part(function_call=types.FunctionCall(id=cid, name=b.name or "",
                                                           args=b.input if isinstance(b.input, dict) else {}))
    if b.type == TOOL_RESULT:
        cid = None if (b.tool_use_id or "").startswith(SYNTHETIC) else b.tool_use_id
        try:
            response = json.loads(b.content) if isinstance(b.content, str) else b.content
        except json.JSONDecodeError:
            response = None
        if not isinstance(response, dict):
            response = {"result": b.content if isinstance(b.content, str) else b.plain_text()}
        return types.Part(function_response=types.FunctionResponse(id=cid, name=b.name or "", response=response))
    if b.type == OTHER:
        return types.Part.model_validate(b.extra)
    if b.type == THINKING:
        return types.Part(text=b.text or "", thought=True)
    return types.Part(text=b.text or "")


def request_extra(llm_request: Any) -> dict[str, Any]:
    """The system instruction and function declarations of an ``LlmRequest`` (for counting)."""
    config = getattr(llm_request, "config", None)
    extra: dict[str, Any] = {}
    instruction = getattr(config, "system_instruction", None)
    if instruction is not None:
        extra["instructions"] = instruction if isinstance(instruction, str) else \
            "".join(getattr(p, "text", "") or "" for p in getattr(instruction, "parts", None) or [])
    tools = []
    for tool in getattr(config, "tools", None) or []:
        for fn in getattr(tool, "function_declarations", None) or []:
            dump = fn.model_dump(mode="json", exclude_none=True)
            tools.append({"type": "function", "function": {
                "name": fn.name, "description": fn.description or "",
                "parameters": dump.get("parameters") or dump.get("parameters_json_schema") or {}}})
    extra["tools"] = tools
    return extra


def prune_callback(guard: MessageGate, *, conversation: Conversation = None) -> Callable[[Any, Any], Any]:
    """A ``before_model_callback`` gating every model call of the agent through ``guard``."""
    require_gate(guard, "prune_callback")
    require_conversation(conversation, "prune_callback")

    def key(callback_context: Any) -> str | None:
        if isinstance(conversation, str):
            return conversation
        if callable(conversation):
            return conversation(callback_context)
        session = getattr(callback_context, "session", None)
        sid = getattr(session, "id", None)
        return None if sid is None else f"session:{sid}"

    def callback(callback_context: Any, llm_request: Any) -> None:
        def run() -> list[Any]:
            originals = Originals()
            history = from_adk(llm_request.contents, originals)
            gated = guard.gate_messages(history, request_extra(llm_request), conversation=key(callback_context))
            return to_adk(gated, originals)

        llm_request.contents = gate_or_pass(guard, "google_adk", run, lambda: list(llm_request.contents))
        return None  # go on to the model with the gated request

    return callback
