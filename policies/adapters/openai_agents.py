"""The gate as the OpenAI Agents SDK's ``RunConfig.call_model_input_filter``.

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    result = Runner.run_sync(agent, question, run_config=RunConfig(call_model_input_filter=prune_input(guard)))

Before every model call the SDK hands the filter the Responses API input items and the agent's
instructions; the filter gates them natively, as a Responses body (``input``, ``instructions`` and
the agent's tool definitions, counted): a reasoning item stays with the calls of its response, a
call with its outputs (docs/gate.md). Items the gate left alone go back as they came; rewritten
outputs carry their new content. The run's own history keeps every item.

One session per conversation: keyed on the run's trace ``group_id`` (``RunConfig(group_id=...)``),
else its trace id; with tracing off, the guard's default conversation (``conversation=`` sets the
key). Input the filter cannot read is sent unchanged, counted by the guard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ._native import Conversation, gate_or_pass, require_conversation, require_gate


class BodyGate(Protocol):
    """The gate the filter hands a request body to (``tracer.guard.instrument.PruneGuard`` is one)."""

    def gate(self, body: Any, *, conversation: str | None = None) -> dict[str, Any]:
        """The body to send instead of ``body`` (a Responses body: its ``input`` gated)."""
        ...

    def passed_through(self, exc: BaseException, where: str) -> None:
        """Count, log and trace a request sent unchanged because it could not be read."""
        ...


def tool_definitions(agent: Any) -> list[dict[str, Any]]:
    """Function-tool definitions of an Agents SDK agent (what the model is shown, for counting)."""
    out = []
    for t in getattr(agent, "tools", None) or []:
        name = getattr(t, "name", None)
        if name is None:
            continue
        out.append({"type": "function", "name": name, "description": getattr(t, "description", "") or "",
                    "parameters": getattr(t, "params_json_schema", None) or {}})
    return out


def _item(raw: Any) -> Any:
    """An input item as plain data (the SDK passes TypedDicts, sometimes its pydantic models)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else raw


def conversation_of(data: Any) -> str | None:
    """The Agents SDK's identity of the run's conversation: its trace's ``group_id``, else the trace id
    (None when tracing is off: the guard's default conversation)."""
    try:
        from agents.tracing import get_current_trace  # noqa: PLC0415 - optional extra
    except ImportError:
        return None
    current = get_current_trace()
    trace_id = getattr(current, "trace_id", None)
    if current is None or not trace_id or trace_id == "no-op":
        return None
    group = (current.export() or {}).get("group_id")
    return f"group:{group}" if group else f"trace:{trace_id}"


def prune_input(guard: BodyGate, *, conversation: Conversation = None) -> Callable[[Any], Any]:
    """A ``call_model_input_filter`` gating every model call of a run through ``guard``.

    ``conversation`` overrides the key (a string, or a callable of the filter's ``CallModelData``).
    """
    require_gate(guard, "prune_input", needs=("gate", "passed_through"))
    require_conversation(conversation, "prune_input")
    try:
        from agents.run import ModelInputData  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError("OpenAI Agents SDK support needs the extra: pip install 'prunegate[openai-agents]'") from exc

    def gate(data: Any) -> Any:
        model_data = data.model_data

        def run() -> Any:
            body: dict[str, Any] = {"input": [_item(i) for i in model_data.input],
                                    "tools": tool_definitions(data.agent)}
            if model_data.instructions:
                body["instructions"] = model_data.instructions
            key = conversation if isinstance(conversation, str) else \
                conversation(data) if callable(conversation) else conversation_of(data)
            out = guard.gate(body, conversation=key)
            items = out.get("input", body["input"]) if isinstance(out, dict) else body["input"]
            return ModelInputData(input=items, instructions=model_data.instructions)

        return gate_or_pass(guard, "openai_agents", run, lambda: model_data)

    return gate
