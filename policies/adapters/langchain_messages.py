"""LangChain messages <-> messages, both ways (extra ``prunegate[langchain]``; imported on use).

One LangChain message is one message: ``SystemMessage`` -> system, ``HumanMessage`` -> user,
``AIMessage`` -> assistant (its ``tool_calls`` become tool_use blocks: the parallel batch stays one
unit), ``ToolMessage`` -> a ``tool`` message with one result (named after its tool). Back, the
LangChain message the gate left unchanged is returned itself; anything else is built from its
current content (see :mod:`policies.adapters._native`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..convert import content_part
from ..errors import StructureError
from ..messages import OTHER, TEXT, THINKING, TOOL_RESULT, TOOL_USE, Block, Message
from ._native import Originals


def _lc() -> Any:
    try:
        from langchain_core import messages  # noqa: PLC0415 - optional extra, imported on use
    except ImportError as exc:
        raise ImportError("LangChain support needs the extra: pip install 'prunegate[langchain]'") from exc
    return messages


REMOVE_ALL = "__remove_all__"  # langgraph.graph.message.REMOVE_ALL_MESSAGES
LC = "_langchain"  # Message.extra key: the LangChain class and the fields a rebuilt message keeps
_KEPT = ("id", "name", "role", "additional_kwargs", "response_metadata", "artifact", "status", "tool_call_id")
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system",
          "developer": "developer"}


def apply_removals(messages: Iterable[Any]) -> list[Any]:
    """What LangGraph's ``add_messages`` does with ``RemoveMessage`` entries in a list: each removes the
    earlier message with its id (``REMOVE_ALL_MESSAGES``: everything before it); an unknown id is an error."""
    lc = _lc()
    out: list[Any] = []
    for i, m in enumerate(messages):
        if not isinstance(m, lc.RemoveMessage):
            out.append(m)
        elif m.id == REMOVE_ALL:
            out.clear()
        else:
            kept = [x for x in out if getattr(x, "id", None) != m.id]
            if len(kept) == len(out):
                raise StructureError(f"message {i}: RemoveMessage for id {m.id!r}, which no earlier message has")
            out = kept
    return out


def from_langchain(messages: Iterable[Any], originals: Originals | None = None) -> list[Message]:
    """Messages for LangChain messages; ``originals`` remembers each native message.

    Every kind LangChain holds is kept: ``SystemMessage`` (a developer one too), ``HumanMessage``,
    ``AIMessage`` (text, other content parts, tool calls), ``ToolMessage`` (string or list content),
    ``ChatMessage`` (by its role), multimodal parts (kept verbatim), and ``RemoveMessage`` entries,
    applied as LangGraph would. What cannot be converted raises :class:`StructureError` (the adapter
    then sends the request unchanged, counted).
    """
    lc = _lc()
    out: list[Message] = []
    for i, native in enumerate(apply_removals(messages)):
        keep = {LC: {"cls": type(native).__name__,
                     **{k: getattr(native, k) for k in _KEPT if getattr(native, k, None) not in (None, {}, "")}}}
        if isinstance(native, lc.SystemMessage):
            role = "developer" if native.additional_kwargs.get("__openai_role__") == "developer" else "system"
            msg = Message(id="", role=role, blocks=_content_blocks(native.content), form=_form(native.content),
                          extra=keep)
        elif isinstance(native, lc.HumanMessage):
            msg = Message(id="", role="user", blocks=_content_blocks(native.content), form=_form(native.content),
                          extra=keep)
        elif isinstance(native, lc.ChatMessage):
            chat_role = _ROLES.get(str(native.role).lower())
            if chat_role is None:
                raise StructureError(f"message {i}: ChatMessage with role {native.role!r}, which no provider takes")
            msg = Message(id="", role=chat_role, blocks=_content_blocks(native.content), form=_form(native.content),
                          extra=keep)
        elif isinstance(native, lc.AIMessage):
            blocks = [b for b in _content_blocks(native.content) if b.type != TEXT or b.text]
            blocks += [Block(TOOL_USE, id=c["id"], name=c["name"], input=c.get("args") or {})
                       for c in native.tool_calls]
            msg = Message(id="", role="assistant", blocks=blocks or [Block(TEXT, text="")], form=_form(native.content),
                          extra=keep)
        elif isinstance(native, lc.ToolMessage):
            msg = Message(id="", role="tool", form="str", extra=keep, blocks=[Block(
                TOOL_RESULT, tool_use_id=native.tool_call_id, name=native.name, content=native.content,
                is_error=True if getattr(native, "status", None) == "error" else None)])
        else:
            raise StructureError(f"message {i}: cannot gate a {type(native).__name__}")
        if originals is not None:
            originals.remember(msg, native)
        out.append(msg)
    return out


def to_langchain_messages(messages: Sequence[Message], originals: Originals | None = None) -> list[Any]:
    """LangChain messages for messages: the original where unchanged, else built from the content.

    A message the gate rewrote keeps its LangChain class, id, name, role and metadata; a summary or
    a stand-in the gate wrote becomes a ``SystemMessage``, ``HumanMessage`` or ``AIMessage``.
    """
    lc = _lc()
    out: list[Any] = []
    for m in messages:
        native = originals.lookup(m) if originals is not None else None
        if native is not None:
            out.append(native)
            continue
        kept = dict(m.extra.get(LC) or {})
        cls = kept.pop("cls", None)
        results = [b for b in m.blocks if b.type == TOOL_RESULT]
        if results:
            for b in results:
                fields = kept if cls == "ToolMessage" and len(results) == 1 else {}
                fields = {**fields, "tool_call_id": b.tool_use_id or "", "name": b.name,
                          "status": "error" if b.is_error else "success"}
                content = b.content if isinstance(b.content, (str, list)) else _text_of(b.content)
                out.append(lc.ToolMessage(content=content, **fields))
            text = "\n".join(b.text or "" for b in m.blocks if b.type == TEXT)
            if text:
                out.append(lc.HumanMessage(content=text))
            continue
        content = _content(m)
        if cls == "ChatMessage":
            out.append(lc.ChatMessage(content=content, **kept))
        elif m.role in ("system", "developer"):
            if m.role == "developer" and cls is None:
                kept["additional_kwargs"] = {"__openai_role__": "developer"}
            out.append(lc.SystemMessage(content=content, **kept))
        elif m.role == "assistant":
            calls = [{"name": b.name or "", "args": b.input if isinstance(b.input, dict) else {"input": b.input},
                      "id": b.id, "type": "tool_call"} for b in m.blocks if b.type == TOOL_USE]
            out.append(lc.AIMessage(content=content, tool_calls=calls, **kept))
        else:
            out.append(lc.HumanMessage(content=content, **kept))
    return out


def _form(content: Any) -> str:
    return "str" if isinstance(content, str) else "list"


def _content(m: Message) -> Any:
    """A message's content the way LangChain holds it: a string, or a list of parts (multimodal)."""
    if m.form == "str" and all(b.type in (TEXT, THINKING, TOOL_USE) for b in m.blocks):
        return "\n".join(b.text or "" for b in m.blocks if b.type in (TEXT, THINKING))
    parts: list[Any] = []
    for b in m.blocks:
        if b.type == TEXT and b.extra.get("_empty"):
            continue
        if b.type == TEXT:
            parts.append(b.text or "" if b.extra.get("_bare") else {**b.extra, "type": "text", "text": b.text or ""})
        elif b.type == OTHER:
            parts.append(dict(b.extra))
    return parts


def _content_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [Block(TEXT, text=content)]
    blocks = []
    for part in content or []:
        if isinstance(part, str):
            blocks.append(Block(TEXT, text=part, extra={"_bare": True}))
        elif isinstance(part, dict):
            blocks.append(content_part(part))
        else:
            raise StructureError(f"content part of type {type(part).__name__}: expected a string or a dict")
    return blocks or [Block(TEXT, text="", extra={"_empty": True})]


def _text_of(content: Any) -> str:
    if isinstance(content, list) and all(isinstance(p, (str, dict)) for p in content):
        return "\n".join(p if isinstance(p, str) else p.get("text", json.dumps(p)) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)


def thread_id() -> str | None:
    """The LangGraph ``thread_id`` of the run this is called in (None outside a run, or without one)."""
    try:
        from langgraph.config import get_config  # noqa: PLC0415 - optional extra
        config = get_config()
    except (ImportError, RuntimeError):
        return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def tool_definitions(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI-style definitions of LangChain tools (what the model is shown, for counting)."""
    from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: PLC0415

    out = []
    for t in tools:
        try:
            out.append(convert_to_openai_tool(t))
        except Exception:  # noqa: BLE001 - a provider-native tool dict: counted as it is
            out.append(dict(t) if isinstance(t, dict) else {"name": str(t)})
    return out
