"""Lossless conversion between provider request bodies and :class:`~policies.messages.Message` lists.

A message converted from a provider keeps ``origin`` set to that provider; rendering it back to the
same provider reproduces the original dict exactly. Rendering to the other provider converts the
structure (tool calls, results, system prompt) and drops only what that provider cannot express
(thinking blocks when rendered for OpenAI).
"""

from __future__ import annotations

import json
from typing import Any

from .errors import StructureError
from .messages import (
    OTHER,
    PINNED,
    REDACTED_THINKING,
    SERVER_TOOL_RESULT,
    SERVER_TOOL_USE,
    TEXT,
    THINKING,
    TOOL_RESULT,
    TOOL_USE,
    Block,
    Message,
)

ANTHROPIC = "anthropic"
OPENAI = "openai"
_ROLES = {"system", "developer", "user", "assistant", "tool"}
SYSTEM_PARAM = "_system_param"  # marks the message that came from an Anthropic body's top-level ``system``


# --------------------------------------------------------------------------- anthropic -> model
def anthropic_block(raw: Any, where: str) -> Block:
    if not isinstance(raw, dict) or "type" not in raw:
        raise StructureError(f"{where}: content block must be an object with a 'type'")
    kind = raw["type"]
    rest = {k: v for k, v in raw.items() if k != "type"}
    if kind == "text" and isinstance(rest.get("text"), str):
        text = rest.pop("text")
        return Block(TEXT, text=text, extra=rest)
    if kind == "tool_use":
        _need(rest, ("id", "name"), where)
        return Block(TOOL_USE, id=rest.pop("id"), name=rest.pop("name"), input=rest.pop("input", None), extra=rest)
    if kind == "server_tool_use":
        _need(rest, ("id",), where)
        return Block(
            SERVER_TOOL_USE, id=rest.pop("id"), name=rest.pop("name", None), input=rest.pop("input", None), extra=rest
        )
    if kind == "tool_result":
        _need(rest, ("tool_use_id",), where)
        return Block(
            TOOL_RESULT,
            tool_use_id=rest.pop("tool_use_id"),
            content=rest.pop("content", None),
            is_error=rest.pop("is_error", None),
            extra=rest,
        )
    if kind.endswith("_tool_result") and "tool_use_id" in rest:
        return Block(
            SERVER_TOOL_RESULT,
            tool_use_id=rest.pop("tool_use_id"),
            content=rest.pop("content", None),
            extra={"type": kind, **rest},
        )
    if kind == "thinking" and isinstance(rest.get("thinking"), str):
        return Block(THINKING, text=rest.pop("thinking"), extra=rest)
    if kind == "redacted_thinking":
        return Block(REDACTED_THINKING, extra=rest)
    return Block(OTHER, extra=dict(raw))


def _need(raw: dict, keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        if not isinstance(raw.get(key), str) or not raw.get(key):
            raise StructureError(f"{where}: block is missing its '{key}'")


def from_anthropic(body: dict) -> tuple[list[Message], dict]:
    """Messages of an Anthropic Messages body, and the body's other keys (model, tools, ...)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise StructureError("anthropic body: expected an object with a 'messages' list")
    rest = {k: v for k, v in body.items() if k not in ("system", "messages")}
    out: list[Message] = []
    if "system" in body:
        system = body["system"]
        if isinstance(system, str):
            out.append(Message(id="", role="system", blocks=[Block(TEXT, text=system)], form="str", origin=ANTHROPIC,
                               extra={SYSTEM_PARAM: True}))
        elif isinstance(system, list):
            blocks = [anthropic_block(b, f"system.{i}") for i, b in enumerate(system)]
            out.append(Message(id="", role="system", blocks=blocks, form="list", origin=ANTHROPIC,
                               extra={SYSTEM_PARAM: True}))
        else:
            raise StructureError("anthropic body: 'system' must be a string or a list of blocks")
    for i, raw in enumerate(body["messages"]):
        where = f"messages.{i}"
        if not isinstance(raw, dict):
            raise StructureError(f"{where}: message must be an object")
        role = raw.get("role")
        if role not in ("user", "assistant", "system"):
            raise StructureError(f"{where}: role must be 'user' or 'assistant', got {role!r}")
        extra = {k: v for k, v in raw.items() if k not in ("role", "content")}
        content = raw.get("content")
        if isinstance(content, str):
            msg = Message(id="", role=role, blocks=[Block(TEXT, text=content)], form="str", extra=extra)
        elif isinstance(content, list):
            blocks = [anthropic_block(b, f"{where}.content.{j}") for j, b in enumerate(content)]
            msg = Message(id="", role=role, blocks=blocks, form="list", extra=extra)
        else:
            raise StructureError(f"{where}: content must be a string or a list of blocks")
        msg.origin = ANTHROPIC
        out.append(msg)
    return out, rest


# --------------------------------------------------------------------------- model -> anthropic
def anthropic_block_dict(block: Block) -> dict:
    t = block.type
    if t == TEXT:
        return {"type": "text", "text": block.text or "", **block.extra}
    if t == TOOL_USE:
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": _input_obj(block), **_no_oai(block)}
    if t == SERVER_TOOL_USE:
        d: dict[str, Any] = {"type": "server_tool_use", "id": block.id}
        if block.name is not None:
            d["name"] = block.name
        if block.input is not None:
            d["input"] = block.input
        return {**d, **block.extra}
    if t == TOOL_RESULT:
        d = {"type": "tool_result", "tool_use_id": block.tool_use_id}
        if block.content is not None:
            d["content"] = block.content
        if block.is_error is not None:
            d["is_error"] = block.is_error
        return {**d, **_no_oai(block)}
    if t == SERVER_TOOL_RESULT:
        extra = dict(block.extra)
        kind = extra.pop("type", "server_tool_result")
        d = {"type": kind, "tool_use_id": block.tool_use_id}
        if block.content is not None:
            d["content"] = block.content
        return {**d, **extra}
    if t == THINKING:
        return {"type": "thinking", "thinking": block.text or "", **block.extra}
    if t == REDACTED_THINKING:
        return {"type": "redacted_thinking", **block.extra}
    return dict(block.extra)


_OAI_KEYS = ("arguments", "function_type", "function_extra", "call_type", "oai_name")


def _no_oai(block: Block) -> dict:
    return {k: v for k, v in block.extra.items() if k not in _OAI_KEYS}


def _input_obj(block: Block) -> Any:
    return block.input if block.input is not None else {}


def to_anthropic(messages: list[Message], rest: dict | None = None) -> dict:
    """An Anthropic Messages body. System messages become ``system``; tool messages merge into user turns."""
    body: dict[str, Any] = dict(rest or {})
    def is_param(m: Message) -> bool:
        return m.role in ("system", "developer") and (m.origin != ANTHROPIC or bool(m.extra.get(SYSTEM_PARAM)))

    systems = [m for m in messages if is_param(m)]
    if systems:
        if len(systems) == 1 and systems[0].origin == ANTHROPIC and systems[0].form == "str":
            body["system"] = systems[0].blocks[0].text if systems[0].blocks else ""
        elif len(systems) == 1 and systems[0].origin == ANTHROPIC:
            body["system"] = [anthropic_block_dict(b) for b in systems[0].blocks]
        else:
            body["system"] = "\n\n".join(m.plain_text() for m in systems)
    out: list[dict] = []
    for m in messages:
        if is_param(m):
            continue
        if m.role == "tool":
            blocks = [anthropic_block_dict(b) for b in m.blocks]
            if out and out[-1]["role"] == "user" and out[-1].get("_merge_tools"):
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": "user", "content": blocks, "_merge_tools": True})
            continue
        if m.origin == ANTHROPIC:
            if m.form == "str" and len(m.blocks) == 1 and m.blocks[0].type == TEXT and not m.blocks[0].extra:
                d = {"role": m.role, "content": m.blocks[0].text, **m.extra}
            else:
                d = {"role": m.role, "content": [anthropic_block_dict(b) for b in m.blocks], **m.extra}
        else:
            blocks = [anthropic_block_dict(b) for b in m.blocks if b.type != OTHER or b.extra.get("type")]
            if m.role == "assistant" and m.form in ("null", "absent"):
                blocks = [b for b in blocks if b.get("type") != "text" or b.get("text")]
            if len(blocks) == 1 and blocks[0].get("type") == "text" and m.form == "str":
                d = {"role": m.role, "content": blocks[0]["text"]}
            else:
                d = {"role": m.role, "content": blocks}
        out.append(d)
    for d in out:
        d.pop("_merge_tools", None)
    body["messages"] = out
    return body


# --------------------------------------------------------------------------- openai -> model
def content_part(part: dict) -> Block:
    """A chat content part as a block: a text part as text (its other keys kept beside), any other
    part kept whole, to be sent back as it came."""
    if part.get("type") == "text" and isinstance(part.get("text"), str):
        return Block(TEXT, text=part["text"], extra={k: v for k, v in part.items() if k not in ("type", "text")})
    return Block(OTHER, extra=dict(part))


def from_openai(body: dict) -> tuple[list[Message], dict]:
    """Messages of an OpenAI Chat Completions body, and the body's other keys."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise StructureError("openai body: expected an object with a 'messages' list")
    rest = {k: v for k, v in body.items() if k != "messages"}
    out: list[Message] = []
    names: dict[str, str] = {}  # call id -> its function's name, given to the result that answers it
    for i, raw in enumerate(body["messages"]):
        where = f"messages.{i}"
        if not isinstance(raw, dict):
            raise StructureError(f"{where}: message must be an object")
        role = raw.get("role")
        if role not in _ROLES:
            raise StructureError(f"{where}: unknown role {role!r}")
        extra = {k: v for k, v in raw.items() if k not in ("role", "content", "tool_calls", "tool_call_id")}
        if "role" in raw and list(raw).index("role") != 0:
            pass  # key order is not significant for equality
        content = raw.get("content", _ABSENT)
        blocks: list[Block] = []
        if role == "tool":
            call_id = raw.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise StructureError(f"{where}: tool message is missing its 'tool_call_id'")
            form = "str" if isinstance(content, str) else ("absent" if content is _ABSENT else "list")
            blocks.append(Block(TOOL_RESULT, tool_use_id=call_id, name=names.get(call_id),
                                content=None if content is _ABSENT else content))
            out.append(Message(id="", role="tool", blocks=blocks, form=form, extra=extra, origin=OPENAI))
            continue
        if content is _ABSENT:
            form = "absent"
        elif content is None:
            form = "null"
        elif isinstance(content, str):
            form = "str"
            blocks.append(Block(TEXT, text=content))
        elif isinstance(content, list):
            form = "list"
            for j, part in enumerate(content):
                if not isinstance(part, dict):
                    raise StructureError(f"{where}.content.{j}: content part must be an object")
                blocks.append(content_part(part))
        else:
            raise StructureError(f"{where}: content must be a string, a list or null")
        msg = Message(id="", role=role, blocks=blocks, form=form, extra=extra, origin=OPENAI)
        if "tool_calls" in raw:
            calls = raw["tool_calls"]
            if role != "assistant" or not isinstance(calls, list):
                raise StructureError(f"{where}: 'tool_calls' must be a list on an assistant message")
            msg.extra["_has_tool_calls"] = True
            for j, call in enumerate(calls):
                block = _openai_call(call, f"{where}.tool_calls.{j}")
                names[block.id or ""] = block.name or ""
                msg.blocks.append(block)
        out.append(msg)
    return out, rest


_ABSENT = object()


def _openai_call(call: Any, where: str) -> Block:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call.get("id"):
        raise StructureError(f"{where}: tool call must be an object with an 'id'")
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise StructureError(f"{where}: tool call must have a function with a 'name'")
    arguments = fn.get("arguments")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except json.JSONDecodeError:
        parsed = {"_raw_arguments": arguments}
    extra: dict[str, Any] = {"arguments": arguments}
    if "type" in call:
        extra["call_type"] = call["type"]
    fn_extra = {k: v for k, v in fn.items() if k not in ("name", "arguments")}
    if fn_extra:
        extra["function_extra"] = fn_extra
    other = {k: v for k, v in call.items() if k not in ("id", "type", "function")}
    if other:
        extra["call_extra"] = other
    return Block(TOOL_USE, id=call["id"], name=fn["name"], input=parsed, extra=extra)


# --------------------------------------------------------------------------- model -> openai
def _openai_call_dict(block: Block) -> dict:
    args = block.extra.get("arguments")
    if args is None or (block.input != _parsed(args)):
        args = json.dumps(block.input if block.input is not None else {}, ensure_ascii=False)
    d: dict[str, Any] = {"id": block.id, "type": block.extra.get("call_type", "function")}
    fn: dict[str, Any] = {"name": block.name, "arguments": args}
    fn.update(block.extra.get("function_extra", {}))
    d["function"] = fn
    d.update(block.extra.get("call_extra", {}))
    return d


def _parsed(args: Any) -> Any:
    try:
        return json.loads(args) if isinstance(args, str) and args else {}
    except json.JSONDecodeError:
        return {"_raw_arguments": args}


def _result_text(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content if content is not None else ""
    if isinstance(content, list):
        texts = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
        if len(texts) == len(content):
            return "\n".join(texts)
    return json.dumps(content, ensure_ascii=False)


def to_openai(messages: list[Message], rest: dict | None = None) -> dict:
    """An OpenAI Chat Completions body. Anthropic tool_result blocks become ``role: tool`` messages."""
    out: list[dict] = []
    for m in messages:
        if m.origin == OPENAI:
            out.append(_openai_native(m))
            continue
        if m.role in ("system", "developer"):
            out.append({"role": m.role, "content": m.plain_text()})
        elif m.role == "tool" or (m.role == "user" and m.answered_ids):
            others = []
            for b in m.blocks:
                if b.type == TOOL_RESULT:
                    out.append({"role": "tool", "tool_call_id": b.tool_use_id, "content": _result_text(b.content)})
                else:
                    others.append(b)
            text = "\n".join(b.plain_text() for b in others if b.type == TEXT)
            if text:
                out.append({"role": "user", "content": text})
        elif m.role == "assistant":
            text = "\n".join(b.text or "" for b in m.blocks if b.type == TEXT)
            calls = [_openai_call_dict(b) for b in m.blocks if b.type == TOOL_USE]
            d: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                d["tool_calls"] = calls
            out.append(d)
        else:
            out.append({"role": m.role, "content": "\n".join(b.plain_text() for b in m.blocks if b.type == TEXT)})
    return {**(rest or {}), "messages": out}


def _openai_native(m: Message) -> dict:
    extra = {k: v for k, v in m.extra.items() if k != "_has_tool_calls"}
    d: dict[str, Any] = {"role": m.role}
    if m.role == "tool":
        b = m.blocks[0]
        d["tool_call_id"] = b.tool_use_id
        if m.form != "absent":
            d["content"] = b.content
        d.update(extra)
        return d
    texts = [b for b in m.blocks if b.type in (TEXT, OTHER)]
    if m.form == "str":
        d["content"] = "".join(b.text or "" for b in texts)
    elif m.form == "null":
        d["content"] = None
    elif m.form == "list":
        parts = []
        for b in texts:
            parts.append({"type": "text", "text": b.text, **b.extra} if b.type == TEXT else dict(b.extra))
        d["content"] = parts
    calls = [b for b in m.blocks if b.type == TOOL_USE]
    if calls or m.extra.get("_has_tool_calls"):
        d["tool_calls"] = [_openai_call_dict(b) for b in calls]
    d.update(extra)
    return d


# --------------------------------------------------------------------------- OpenAI Responses API
# A Responses body's ``input`` is a list of *items*. The gate's messages map onto them so that units
# come out right and rendering back is exact:
# - a message item with role user/system/developer is one message (its input_text parts are text
#   blocks; input_image, input_file and other parts are kept verbatim as opaque blocks);
# - a run of consecutive *output* items (reasoning, assistant messages, function_call,
#   custom_tool_call, server-side tool items, item_reference, ...) is one assistant message, one block
#   per item: what one response produced travels together, so a reasoning item is never sent without
#   the item that follows it, nor a call without its reasoning;
# - a call output (function_call_output, custom_tool_call_output, computer_call_output, ...) is one
#   ``tool`` message whose result block answers its call (matched by call_id), which joins the unit;
# - a call output whose call is not in the input (it answers a call of ``previous_response_id``, or
#   of an ``item_reference``) and a ``compaction`` item are units of their own, pinned: the server
#   needs the one and the other is the conversation's only summary of what came before it.
RESPONSES = "responses"
PROVIDERS = (ANTHROPIC, OPENAI, RESPONSES)
ITEM = "_responses_item"  # on a block: the item's keys the block does not model
GROUP = "_responses_group"  # on a message: a run of output items, one block each
INPUT_STR = "_responses_input_str"  # on the message a string ``input`` became

_MESSAGE_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")
# client-executed calls: the output item comes from the caller, matched by the key after the type
_CALLS = {
    "function_call": "call_id", "custom_tool_call": "call_id", "computer_call": "call_id",
    "local_shell_call": "call_id", "shell_call": "call_id", "apply_patch_call": "call_id",
    "mcp_approval_request": "id", "program": "call_id",
}
_OUTPUTS = {
    "function_call_output": "call_id", "custom_tool_call_output": "call_id", "computer_call_output": "call_id",
    "local_shell_call_output": "id", "shell_call_output": "call_id", "apply_patch_call_output": "call_id",
    "mcp_approval_response": "approval_request_id", "program_output": "call_id",
}
# items a response produces that carry their own result (or none): members of the output run
_SERVER_ITEMS = frozenset({
    "reasoning", "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
    "mcp_call", "mcp_list_tools", "tool_search_call", "tool_search_output", "item_reference",
})


def responses_item_type(item: dict) -> str | None:
    """An input item's type: its ``type``, ``message`` for a bare ``{role, content}`` and
    ``item_reference`` for a bare ``{id}`` (both allowed by the API)."""
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    if "role" in item:
        return "message"
    if set(item) == {"id"}:
        return "item_reference"
    return None


def from_responses(body: dict) -> tuple[list[Message], dict]:
    """Messages of an OpenAI Responses API body, and the body's other keys (model, instructions,
    tools, previous_response_id, context_management, ...), which pass through unchanged."""
    if not isinstance(body, dict) or "input" not in body:
        raise StructureError("responses body: expected an object with an 'input' list or string")
    raw_input = body["input"]
    rest = {k: v for k, v in body.items() if k != "input"}
    if isinstance(raw_input, str):
        return [Message(id="", role="user", blocks=[Block(TEXT, text=raw_input)], form="str", origin=RESPONSES,
                        extra={INPUT_STR: True})], rest
    if not isinstance(raw_input, list):
        raise StructureError("responses body: 'input' must be a list of items or a string")
    return responses_messages(raw_input), rest


def responses_messages(items: list[Any], where: str = "input") -> list[Message]:
    """Messages for a list of Responses input items (see the comment above :data:`RESPONSES`)."""
    out: list[Message] = []
    issued: dict[str, str] = {}  # call id -> the call's name, given to the output that answers it
    group: Message | None = None
    for i, item in enumerate(items):
        at = f"{where}.{i}"
        if not isinstance(item, dict):
            raise StructureError(f"{at}: item must be an object")
        kind = responses_item_type(item)
        if kind is None:
            raise StructureError(f"{at}: item has no 'type'")
        role = item.get("role")
        if kind == "message" and role not in _MESSAGE_ROLES:
            raise StructureError(f"{at}: unknown role {role!r}")
        if kind in _CALLS or kind in _SERVER_ITEMS or (kind == "message" and role == "assistant"):
            block = _responses_output_block(item, kind, at)
            if block.call_id is not None:
                issued[block.call_id] = block.name or ""
            if group is None:
                group = Message(id="", role="assistant", blocks=[], form="items", origin=RESPONSES,
                                extra={GROUP: True})
                out.append(group)
            group.blocks.append(block)
            continue
        group = None
        if kind == "message":
            out.append(_responses_message(item, at))
        elif kind in _OUTPUTS:
            out.append(_responses_output(item, kind, issued, at))
        else:  # compaction, compaction_trigger, additional_tools, types newer than this code: kept whole
            role = "developer" if kind == "additional_tools" else ("user" if kind == "compaction_trigger"
                                                                    else "assistant")
            out.append(Message(id="", role=role, blocks=[Block(OTHER, extra=dict(item))], form="item",
                               origin=RESPONSES))
    return out


def _responses_output_block(item: dict, kind: str, where: str) -> Block:
    if kind == "message":
        text = _responses_text(item.get("content"))
        return Block(TEXT, text=text, extra={ITEM: dict(item)})
    if kind in _CALLS:
        key = _CALLS[kind]
        call_id = item.get(key)
        if not isinstance(call_id, str) or not call_id:
            raise StructureError(f"{where}: {kind} without a '{key}'")
        if kind == "function_call":
            arguments = item.get("arguments")
            return Block(TOOL_USE, id=call_id, name=str(item.get("name", "")), input=_parsed(arguments),
                         extra={"arguments": arguments, ITEM: {k: v for k, v in item.items()
                                                                if k not in ("call_id", "name", "arguments")}})
        name = item.get("name") if isinstance(item.get("name"), str) else kind
        return Block(TOOL_USE, id=call_id, name=name, input=item.get("input", item.get("action")),
                     extra={ITEM: dict(item)})
    return Block(OTHER, extra=dict(item))


def _responses_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                   and p.get("type") in _TEXT_PARTS)


def _responses_message(item: dict, where: str) -> Message:
    extra = {k: v for k, v in item.items() if k not in ("role", "content")}
    content = item.get("content")
    if isinstance(content, str):
        return Message(id="", role=item["role"], blocks=[Block(TEXT, text=content)], form="str", extra=extra,
                       origin=RESPONSES)
    if not isinstance(content, list):
        raise StructureError(f"{where}: content must be a string or a list of parts")
    blocks = []
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise StructureError(f"{where}.content.{j}: content part must be an object")
        if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
            blocks.append(Block(TEXT, text=part["text"], extra={k: v for k, v in part.items() if k != "text"}))
        else:  # input_image, input_file, input_audio, ...: verbatim
            blocks.append(Block(OTHER, extra=dict(part)))
    return Message(id="", role=item["role"], blocks=blocks, form="list", extra=extra, origin=RESPONSES)


def _responses_output(item: dict, kind: str, issued: dict[str, str], where: str) -> Message:
    key = _OUTPUTS[kind]
    call_id = item.get(key)
    if not isinstance(call_id, str) or not call_id:
        raise StructureError(f"{where}: {kind} without a '{key}'")
    if call_id not in issued:  # answers a call the server holds (previous_response_id) or an item_reference
        return Message(id="", role="tool", blocks=[Block(OTHER, extra=dict(item))], form="item", origin=RESPONSES,
                       extra={PINNED: True})
    rest = {k: v for k, v in item.items() if k not in (key, "output")}
    if "output" not in item:
        rest[_NO_OUTPUT] = True
    return Message(id="", role="tool", form="item", origin=RESPONSES, blocks=[Block(
        TOOL_RESULT, tool_use_id=call_id, name=issued[call_id] or None, content=item.get("output"),
        extra={ITEM: rest, "link": key})])


_NO_OUTPUT = "_no_output"


def to_responses(messages: list[Message], rest: dict | None = None) -> dict:
    """An OpenAI Responses API body: ``rest`` unchanged and ``input`` rebuilt from the messages as
    they are now (a rewritten result carries its new output; a summary is a message item)."""
    body: dict[str, Any] = dict(rest or {})
    if len(messages) == 1 and messages[0].extra.get(INPUT_STR) and messages[0].form == "str":
        body["input"] = messages[0].plain_text()
        return body
    items: list[dict] = []
    for m in messages:
        items.extend(responses_items(m))
    body["input"] = items
    return body


def responses_items(m: Message) -> list[dict]:
    """The Responses input items of one message."""
    if m.origin == RESPONSES and m.form in ("item", "items"):
        return [_responses_block_item(b, m.role) for b in m.blocks]
    if m.origin == RESPONSES:
        d: dict[str, Any] = {"role": m.role, **{k: v for k, v in m.extra.items() if k != INPUT_STR}}
        if m.form == "str":
            d["content"] = "".join(b.text or "" for b in m.blocks if b.type == TEXT)
        else:
            d["content"] = [{**b.extra, "text": b.text or ""} if b.type == TEXT else dict(b.extra)
                            for b in m.blocks if b.type in (TEXT, OTHER)]
        return [d]
    # a message from elsewhere (a summary, a marker, another provider's history): plain items
    out: list[dict] = []
    text = "\n".join(b.plain_text() for b in m.blocks if b.type == TEXT)
    if text or not any(b.call_id or b.answers for b in m.blocks):
        role = m.role if m.role in _MESSAGE_ROLES else "user"
        out.append({"role": role, "content": text})
    for b in m.blocks:
        if b.type in (TOOL_USE, TOOL_RESULT):
            out.append(_responses_block_item(b, m.role))
    return out


def _responses_block_item(b: Block, role: str) -> dict:
    item = b.extra.get(ITEM)
    if b.type == TEXT:  # an assistant message item: itself while its text is unchanged
        if not isinstance(item, dict):
            return {"role": role, "content": b.text or ""}
        if _responses_text(item.get("content")) == (b.text or ""):
            return dict(item)
        content: Any = b.text or "" if isinstance(item.get("content"), str) else \
            [{"type": "output_text", "text": b.text or "", "annotations": []}]
        return {**item, "content": content}
    if b.type == TOOL_USE:
        if isinstance(item, dict) and item.get("type", "function_call") != "function_call":
            return dict(item)
        args = b.extra.get("arguments")
        if not isinstance(args, str) or _parsed(args) != b.input:
            args = json.dumps(b.input if b.input is not None else {}, ensure_ascii=False)
        return {"type": "function_call", "call_id": b.id, "name": b.name or "", "arguments": args, **(item or {})}
    if b.type == TOOL_RESULT:
        rest = dict(item) if isinstance(item, dict) else {"type": "function_call_output"}
        key = b.extra.get("link", "call_id")
        out: dict[str, Any] = {k: v for k, v in rest.items() if k != _NO_OUTPUT}
        out[key] = b.tool_use_id
        if not rest.get(_NO_OUTPUT) or b.content is not None:
            content = b.content
            if not isinstance(content, (str, list, dict)):
                content = "" if content is None else json.dumps(content, ensure_ascii=False)
            out["output"] = content
        return out
    if b.type == OTHER:
        return dict(b.extra)
    return {"role": role if role in _MESSAGE_ROLES else "user", "content": b.plain_text()}
