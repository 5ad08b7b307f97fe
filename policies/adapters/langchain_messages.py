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

from ..errors import StructureError
from ..messages import OTHER, TEXT, THINKING, TOOL_RESULT, TOOL_USE, Block, Message
from ._native import Originals


def _lc() -> Any:
    try:
        from langchain_core import messages  # noqa: PLC0415 - optional extra, imported on use
    except ImportError as exc:
        raise ImportError("LangChain support needs the extra: pip install 'prunegate[langchain]'") from exc
    return messages


def from_langchain(messages: Iterable[Any], originals: Originals | None = None) -> list[Message]:
    """Messages for LangChain messages; ``originals`` remembers each native message."""
    lc = _lc()
    out: list[Message] = []
    for i, native in enumerate(messages):
        if isinstance(native, lc.SystemMessage):
            msg = Message(id="", role="system", blocks=_content_blocks(native.content), form="str")
        elif isinstance(native, lc.HumanMessage):
            msg = Message(id="", role="user", blocks=_content_blocks(native.content), form="str")
        elif isinstance(native, lc.AIMessage):
            blocks = [b for b in _content_blocks(native.content) if b.type != TEXT or b.text]
            blocks += [Block(TOOL_USE, id=c["id"], name=c["name"], input=c.get("args") or {})
                       for c in native.tool_calls]
            msg = Message(id="", role="assistant", blocks=blocks or [Block(TEXT, text="")], form="list")
        elif isinstance(native, lc.ToolMessage):
            content = native.content if isinstance(native.content, str) else _text_of(native.content)
            msg = Message(id="", role="tool", form="str", blocks=[Block(
                TOOL_RESULT, tool_use_id=native.tool_call_id, name=native.name, content=content,
                is_error=True if getattr(native, "status", None) == "error" else None)])
        else:
            raise StructureError(f"message {i}: cannot gate a {type(native).__name__}")
        if originals is not None:
            originals.remember(msg, native)
        out.append(msg)
    return out


def to_langchain_messages(messages: Sequence[Message], originals: Originals | None = None) -> list[Any]:
    """LangChain messages for messages: the original where unchanged, else built from the content."""
    lc = _lc()
    out: list[Any] = []
    for m in messages:
        native = originals.lookup(m) if originals is not None else None
        if native is not None:
            out.append(native)
            continue
        text = "\n".join(b.text or "" for b in m.blocks if b.type in (TEXT, THINKING))
        results = [b for b in m.blocks if b.type == TOOL_RESULT]
        if m.role in ("system", "developer"):
            out.append(lc.SystemMessage(content=text))
        elif m.role == "assistant":
            calls = [{"name": b.name or "", "args": b.input if isinstance(b.input, dict) else {"input": b.input},
                      "id": b.id, "type": "tool_call"} for b in m.blocks if b.type == TOOL_USE]
            out.append(lc.AIMessage(content=text, tool_calls=calls))
        elif results:
            for b in results:
                content = b.content if isinstance(b.content, str) else _text_of(b.content)
                out.append(lc.ToolMessage(content=content, tool_call_id=b.tool_use_id or "", name=b.name,
                                          status="error" if b.is_error else "success"))
            if text:
                out.append(lc.HumanMessage(content=text))
        else:
            out.append(lc.HumanMessage(content=text))
    return out


def _content_blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [Block(TEXT, text=content)]
    blocks = []
    for part in content or []:
        if isinstance(part, str):
            blocks.append(Block(TEXT, text=part))
        elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            blocks.append(Block(TEXT, text=part["text"]))
        elif isinstance(part, dict):
            blocks.append(Block(OTHER, extra=dict(part)))
    return blocks or [Block(TEXT, text="")]


def _text_of(content: Any) -> str:
    if isinstance(content, list) and all(isinstance(p, (str, dict)) for p in content):
        return "\n".join(p if isinstance(p, str) else p.get("text", json.dumps(p)) for p in content)
    return json.dumps(content, ensure_ascii=False, default=str)


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
