"""The gate as the OpenAI Agents SDK's ``RunConfig.call_model_input_filter``.

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    result = Runner.run_sync(agent, question, run_config=RunConfig(call_model_input_filter=prune_input(guard)))

Before every model call the SDK hands the filter the Responses API input items and the agent's
instructions; the filter gates them natively, as a Responses body (``input``, ``instructions`` and
the agent's tool definitions, counted): a reasoning item stays with the calls of its response, a
call with its outputs (docs/gate.md). Items the gate left alone go back as they came; rewritten
outputs carry their new content. The run's own history keeps every item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol


class BodyGate(Protocol):
    """The gate the filter hands a request body to (``tracer.guard.instrument.PruneGuard`` is one)."""

    def gate(self, body: Any) -> dict[str, Any]:
        """The body to send instead of ``body`` (a Responses body: its ``input`` gated)."""
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


def prune_input(guard: BodyGate) -> Callable[[Any], Any]:
    """A ``call_model_input_filter`` gating every model call of a run through ``guard``."""
    try:
        from agents.run import ModelInputData  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError("OpenAI Agents SDK support needs the extra: pip install 'prunegate[openai-agents]'") from exc

    def gate(data: Any) -> Any:
        model_data = data.model_data
        body: dict[str, Any] = {"input": [_item(i) for i in model_data.input], "tools": tool_definitions(data.agent)}
        if model_data.instructions:
            body["instructions"] = model_data.instructions
        out = guard.gate(body)
        items = out.get("input", body["input"]) if isinstance(out, dict) else body["input"]
        return ModelInputData(input=items, instructions=model_data.instructions)

    return gate
