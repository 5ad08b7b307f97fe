"""The gate as a Pydantic AI capability, with ``ModelMessage`` converters both ways.

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    agent = Agent(model, tools=[...], system_prompt=SYSTEM, capabilities=[prune_history(guard)])

Before every model request the capability hands the whole request to the gate (system prompt,
messages, instructions, tool and output-tool definitions) and sends the gated messages. By default
the run's history keeps every message (``write_back=True`` stores the gated history instead, as
``ProcessHistory`` does; the guard recognises its own output and stays on one session).

Conversion: every ``SystemPromptPart`` is a system message; the other parts of a ``ModelRequest``
are one user message (prompts as text, ``ToolReturnPart`` as results, an error when its ``outcome`` is
``failed`` or ``retried``, as is a legacy tool ``RetryPromptPart``; ``RetryFeedbackPart`` as text);
a ``ModelResponse`` is one assistant message (text, thinking, tool calls: a parallel batch is one
unit). Back, unchanged parts return as themselves and regroup into their original message; what the
gate rewrote or wrote (summaries, masked results) is built from its content.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import SettingsError, StructureError
from ..messages import OTHER, TEXT, THINKING, TOOL_RESULT, TOOL_USE, Block, Message
from ._native import Conversation, MessageGate, Originals, gate_or_pass, require_conversation, require_gate

PARENT = "_pydantic_ai_message"  # Message.extra: the index of the ModelMessage it was converted from


def _pai() -> Any:
    try:
        from pydantic_ai import messages  # noqa: PLC0415 - optional extra, imported on use
    except ImportError as exc:
        raise ImportError("Pydantic AI support needs the extra: pip install 'prunegate[pydantic-ai]'") from exc
    return messages


_ERROR_OUTCOMES = ("failed", "retried")  # the outcomes pydantic-ai sends through the provider's error channel


def _has_outcomes(pm: Any) -> bool:
    """Whether this pydantic-ai marks a tool error on ``ToolReturnPart`` (``outcome``), which deprecates
    ``RetryPromptPart`` (removed in v3)."""
    return "outcome" in {f.name for f in dataclasses.fields(pm.ToolReturnPart)}


def _is_retry(pm: Any, part: Any) -> bool:
    """Whether ``part`` asks the model to try again: ``RetryFeedbackPart`` (no tool call) where it
    exists, and the legacy ``RetryPromptPart`` while pydantic-ai still has it."""
    return isinstance(part, tuple(getattr(pm, n) for n in ("RetryFeedbackPart", "RetryPromptPart") if hasattr(pm, n)))


def from_pydantic_ai(messages: Iterable[Any], originals: Originals | None = None) -> list[Message]:
    """Messages for Pydantic AI ``ModelMessage`` objects; ``originals`` remembers (message, parts)."""
    pm = _pai()
    out: list[Message] = []
    index = -1

    def add(msg: Message, native: Any, parts: list[Any]) -> None:
        msg.extra[PARENT] = index  # which ModelMessage it came from: its unchanged parts go back there
        if originals is not None:
            originals.remember(msg, (native, parts))
            if len(parts) == len(msg.blocks):
                for block, part in zip(msg.blocks, parts, strict=True):
                    originals.remember_block(msg.role, block, (native, part))
        out.append(msg)

    for i, native in enumerate(messages):
        index = i
        if originals is not None:
            originals.natives.append(native)
        if isinstance(native, pm.ModelRequest):
            blocks: list[Block] = []
            parts: list[Any] = []
            for part in native.parts:
                if isinstance(part, pm.SystemPromptPart):
                    add(Message(id="", role="system", blocks=[Block(TEXT, text=part.content)], form="str"), native, [part])
                    continue
                parts.append(part)
                if isinstance(part, pm.UserPromptPart):
                    blocks.append(Block(TEXT, text=part.content if isinstance(part.content, str)
                                        else "\n".join(c if isinstance(c, str) else repr(c) for c in part.content)))
                elif isinstance(part, pm.ToolReturnPart):  # outcome 'failed'/'retried' (2.x): the error channel
                    blocks.append(Block(TOOL_RESULT, tool_use_id=part.tool_call_id, name=part.tool_name,
                                        content=part.model_response_str(),
                                        is_error=getattr(part, "outcome", "success") in _ERROR_OUTCOMES or None))
                elif _is_retry(pm, part) and getattr(part, "tool_name", None):
                    blocks.append(Block(TOOL_RESULT, tool_use_id=part.tool_call_id, name=part.tool_name,
                                        content=part.model_response(), is_error=True))
                elif _is_retry(pm, part):  # feedback that answers no tool call
                    blocks.append(Block(TEXT, text=part.model_response()))
                else:
                    blocks.append(Block(OTHER, extra={"part_kind": getattr(part, "part_kind", type(part).__name__),
                                                      "repr": repr(part)}))
            if parts:
                add(Message(id="", role="user", blocks=blocks, form="list"), native, parts)
        elif isinstance(native, pm.ModelResponse):
            blocks = []
            for part in native.parts:
                if isinstance(part, pm.TextPart):
                    blocks.append(Block(TEXT, text=part.content))
                elif isinstance(part, pm.ThinkingPart):
                    blocks.append(Block(THINKING, text=part.content))
                elif isinstance(part, pm.ToolCallPart):
                    blocks.append(Block(TOOL_USE, id=part.tool_call_id, name=part.tool_name, input=part.args_as_dict()))
                else:
                    blocks.append(Block(OTHER, extra={"part_kind": getattr(part, "part_kind", type(part).__name__),
                                                      "repr": repr(part)}))
            add(Message(id="", role="assistant", blocks=blocks or [Block(TEXT, text="")], form="list"),
                native, list(native.parts))
        else:
            raise StructureError(f"message {i}: cannot gate a {type(native).__name__}")
    return out


def to_pydantic_ai(messages: Sequence[Message], originals: Originals | None = None) -> list[Any]:
    """``ModelMessage`` objects for messages: originals where unchanged, the rest built from content."""
    pm = _pai()
    groups: list[tuple[Any, list[Any], str]] = []  # (original message or None, parts, kind)
    for m in messages:
        found = originals.lookup(m) if originals is not None else None
        parent, parts = found if found is not None else (_parent(m, originals), _parts(m, originals))
        kind = "response" if m.role == "assistant" else "request"
        if groups and parent is not None and groups[-1][0] is parent:
            groups[-1][1].extend(parts)
        elif groups and parent is None and groups[-1][0] is None and groups[-1][2] == kind == "request":
            groups[-1][1].extend(parts)
        else:
            groups.append((parent, list(parts), kind))
    out = []
    for parent, parts, kind in groups:
        if parent is not None and len(parts) == len(parent.parts) and all(a is b for a, b in zip(parts, parent.parts, strict=True)):
            out.append(parent)
        elif parent is not None:
            out.append(dataclasses.replace(parent, parts=parts))
        elif kind == "response":
            out.append(pm.ModelResponse(parts=parts))
        else:
            out.append(pm.ModelRequest(parts=parts))
    return out


def _parent(m: Message, originals: Originals | None) -> Any | None:
    """The original message a changed message's unchanged parts came from (None: a new message)."""
    hint = m.extra.get(PARENT)
    if originals is not None and isinstance(hint, int) and 0 <= hint < len(originals.natives):
        return originals.natives[hint]
    for b in m.blocks:
        found = originals.lookup_block(m.role, b) if originals is not None else None
        if found is not None:
            return found[0]
    return None


def _parts(m: Message, originals: Originals | None = None) -> list[Any]:
    """Parts for a message the gate changed or wrote: unchanged blocks keep their original part."""
    if originals is not None and m.role not in ("system", "developer"):
        parent = _parent(m, originals)
        kept = [originals.lookup_block(m.role, b, parent) for b in m.blocks]
        if any(k is not None for k in kept):
            return [k[1] if k is not None else _parts(Message(id="", role=m.role, blocks=[b]))[0]
                    for k, b in zip(kept, m.blocks, strict=True)]
    pm = _pai()
    if m.role in ("system", "developer"):
        return [pm.SystemPromptPart(content=m.plain_text())]
    parts: list[Any] = []
    text = "\n".join(b.text or "" for b in m.blocks if b.type in (TEXT, THINKING))
    if m.role == "assistant":
        if text:
            parts.append(pm.TextPart(content=text))
        parts += [pm.ToolCallPart(tool_name=b.name or "", args=b.input if isinstance(b.input, dict) else {},
                                  tool_call_id=b.id or "") for b in m.blocks if b.type == TOOL_USE]
        return parts or [pm.TextPart(content="")]
    for b in m.blocks:
        if b.type == TOOL_RESULT:
            content = b.content if isinstance(b.content, str) else json.dumps(b.content, ensure_ascii=False, default=str)
            if b.is_error and _has_outcomes(pm):  # what pydantic-ai itself makes of a tool RetryPromptPart
                parts.append(pm.ToolReturnPart(tool_name=b.name or "", content=content,
                                               tool_call_id=b.tool_use_id or "", outcome="retried"))
            elif b.is_error:  # a pydantic-ai without tool-return outcomes
                parts.append(pm.RetryPromptPart(content=content, tool_name=b.name or "", tool_call_id=b.tool_use_id or ""))
            else:
                parts.append(pm.ToolReturnPart(tool_name=b.name or "", content=content, tool_call_id=b.tool_use_id or ""))
    if text:
        parts.append(pm.UserPromptPart(content=text))
    return parts


def request_extra(params: Any) -> dict[str, Any]:
    """Tool, output-tool and instruction definitions of a ``ModelRequestParameters`` (for counting)."""
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                               "parameters": t.parameters_json_schema}}
             for t in [*(params.function_tools or []), *(params.output_tools or [])]]
    extra: dict[str, Any] = {"tools": tools}
    instructions = "\n\n".join(p.content for p in params.instruction_parts or [] if getattr(p, "content", None))
    if instructions:
        extra["instructions"] = instructions
    return extra


def prune_history(guard: MessageGate, *, write_back: bool = False, conversation: Conversation = None) -> Any:
    """A Pydantic AI capability gating every model request through ``guard``.

    One session per Pydantic AI ``conversation_id`` (a run continuing a ``message_history`` shares
    its conversation's); ``conversation`` overrides the key (a string, or a callable of the
    ``RunContext``). A history the adapter cannot convert is sent unchanged, counted by the guard.
    """
    require_gate(guard, "prune_history")
    require_conversation(conversation, "prune_history")
    if not isinstance(write_back, bool):
        raise SettingsError(f"prune_history: write_back must be True or False, got {write_back!r}")
    try:
        from pydantic_ai.capabilities import AbstractCapability  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError("Pydantic AI support needs the extra: pip install 'prunegate[pydantic-ai]'") from exc

    def key(ctx: Any) -> str | None:
        if isinstance(conversation, str):
            return conversation
        if callable(conversation):
            return conversation(ctx)
        found = getattr(ctx, "conversation_id", None)
        return None if found is None else f"conversation:{found}"

    @dataclasses.dataclass
    class PruneGate(AbstractCapability[Any]):
        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            def run() -> list[Any]:
                originals = Originals()
                history = from_pydantic_ai(request_context.messages, originals)
                gated = guard.gate_messages(history, request_extra(request_context.model_request_parameters),
                                            conversation=key(ctx))
                return to_pydantic_ai(gated, originals)

            messages = gate_or_pass(guard, "pydantic_ai", run, lambda: list(request_context.messages))
            request_context.messages = list(messages)
            if write_back:
                ctx.messages[:] = messages
            return request_context

        @classmethod
        def get_serialization_name(cls) -> str | None:
            return None  # takes a live guard: not serializable

    return PruneGate()
