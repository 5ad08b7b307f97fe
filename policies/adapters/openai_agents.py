"""The gate as the OpenAI Agents SDK's ``RunConfig.call_model_input_filter``.

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    result = Runner.run_sync(agent, question, run_config=RunConfig(call_model_input_filter=prune_input(guard)))

Before every model call the SDK hands the filter the Responses API input items and the agent's
instructions; the filter gates them (instructions and the agent's tool definitions counted) and
returns the gated items (:mod:`policies.adapters.responses` converts both ways). The run's own
history keeps every item.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._native import MessageGate
from .responses import from_items, to_items


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


def prune_input(guard: MessageGate) -> Callable[[Any], Any]:
    """A ``call_model_input_filter`` gating every model call of a run through ``guard``."""
    try:
        from agents.run import ModelInputData  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError("OpenAI Agents SDK support needs the extra: pip install 'prunegate[openai-agents]'") from exc

    def gate(data: Any) -> Any:
        model_data = data.model_data
        extra: dict[str, Any] = {"tools": tool_definitions(data.agent)}
        if model_data.instructions:
            extra["instructions"] = model_data.instructions
        gated = guard.gate_messages(from_items(model_data.input), extra)
        items: Any = to_items(gated)  # Responses input items (TypedDicts at runtime: plain dicts)
        return ModelInputData(input=items, instructions=model_data.instructions)

    return gate
