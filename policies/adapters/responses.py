"""OpenAI Responses API input items <-> messages, both ways, keeping what the gate changed.

The OpenAI Agents SDK (and any Responses API client) sends a list of *items*: messages
(``{"role", "content"}``), ``function_call`` and ``function_call_output`` items, reasoning and
other items. Consecutive ``function_call`` items are one parallel batch: they become one assistant
message, so the gate keeps the batch and its results together. Items the gate does not interpret
travel as opaque blocks and come back verbatim. Converting back rebuilds every item from the
message as the gate left it: a rewritten result carries its new output, a summary becomes a
message item, never the original by identity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import StructureError
from ..messages import OTHER, TEXT, TOOL_RESULT, TOOL_USE, Block, Message

ITEM = "_responses_item"  # the original item's keys the gate does not model (id, status, ...)


def from_items(items: Sequence[Any]) -> list[Message]:
    """Messages for Responses input items (dicts or SDK objects with ``model_dump``)."""
    out: list[Message] = []
    for i, raw in enumerate(items):
        item = _plain(raw, f"input.{i}")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            out.append(_message(item, f"input.{i}"))
        elif kind == "function_call":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise StructureError(f"input.{i}: function_call without a 'call_id'")
            block = Block(TOOL_USE, id=call_id, name=item.get("name", ""), input=_args(item.get("arguments")),
                          extra={"arguments": item.get("arguments"), ITEM: _rest(item, ("call_id", "name", "arguments"))})
            last = out[-1] if out else None
            if last is not None and last.role == "assistant" and last.extra.get("_batch") and last.blocks[-1].type == TOOL_USE:
                last.blocks.append(block)
            else:
                out.append(Message(id="", role="assistant", blocks=[block], form="list", extra={"_batch": True}))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise StructureError(f"input.{i}: function_call_output without a 'call_id'")
            out.append(Message(id="", role="tool", form="list", blocks=[Block(
                TOOL_RESULT, tool_use_id=call_id, content=item.get("output"),
                extra={ITEM: _rest(item, ("call_id", "output"))})]))
        else:  # reasoning, tool search, computer calls...: carried whole, in place
            out.append(Message(id="", role="assistant", blocks=[Block(OTHER, extra=dict(item))], form="list",
                               extra={"_opaque": True}))
    return out


def to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Responses input items for messages, rebuilt from their current content."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.extra.get("_opaque"):
            out.extend(dict(b.extra) for b in m.blocks if b.type == OTHER)
            continue
        text = "".join(b.text or "" for b in m.blocks if b.type == TEXT)
        if text or not any(b.type in (TOOL_USE, TOOL_RESULT) for b in m.blocks):
            role = "user" if m.role == "tool" else m.role
            item: dict[str, Any] = {"role": role, "content": _content(m, text)}
            item.update(m.extra.get(ITEM, {}))
            out.append(item)
        for b in m.blocks:
            if b.type == TOOL_USE:
                args = b.extra.get("arguments")
                if not isinstance(args, str) or _args(args) != b.input:
                    args = json.dumps(b.input if b.input is not None else {}, ensure_ascii=False)
                out.append({"type": "function_call", "call_id": b.id, "name": b.name or "", "arguments": args,
                            **b.extra.get(ITEM, {})})
            elif b.type == TOOL_RESULT:
                output = b.content if isinstance(b.content, (str, list)) else json.dumps(b.content, ensure_ascii=False)
                out.append({"type": "function_call_output", "call_id": b.tool_use_id, "output": output,
                            **b.extra.get(ITEM, {})})
    return out


def _message(item: Mapping[str, Any], where: str) -> Message:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise StructureError(f"{where}: unknown role {role!r}")
    content = item.get("content")
    rest = _rest(item, ("role", "content"))
    if isinstance(content, str):
        return Message(id="", role=role, blocks=[Block(TEXT, text=content)], form="str", extra={ITEM: rest})
    blocks = []
    for part in content or []:
        part = dict(part) if isinstance(part, Mapping) else {"type": "unknown", "value": str(part)}
        if part.get("type") in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            blocks.append(Block(TEXT, text=part.pop("text"), extra=part))
        else:
            blocks.append(Block(OTHER, extra=part))
    return Message(id="", role=role, blocks=blocks, form="list", extra={ITEM: rest})


def _content(m: Message, text: str) -> Any:
    if m.form == "str":
        return text
    parts = []
    for b in m.blocks:
        if b.type == TEXT:
            kind = b.extra.get("type") or ("output_text" if m.role == "assistant" else "input_text")
            parts.append({**b.extra, "type": kind, "text": b.text or ""})
        elif b.type == OTHER:
            parts.append(dict(b.extra))
    return parts


def _rest(item: Mapping[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in known}


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return {"_raw_arguments": raw}
    return raw if raw is not None else {}


def _plain(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        return dict(dump(exclude_none=True))
    raise StructureError(f"{where}: expected a Responses input item (a mapping), got {type(raw).__name__}")
