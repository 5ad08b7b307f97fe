"""The gate as a LangGraph ``pre_model_hook`` (``create_react_agent(..., pre_model_hook=...)``).

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    agent = create_react_agent(model, tools, prompt=SYSTEM,
                               pre_model_hook=prune_hook(guard, tools=tools, prompt=SYSTEM))

The hook returns ``llm_input_messages``: the model sees the gated history, the graph's state keeps
the full one. ``tools`` and ``prompt`` (the same as the agent's) are only counted: the hook does
not see them, the model does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._native import MessageGate, Originals
from .langchain_messages import from_langchain, to_langchain_messages, tool_definitions


def prune_hook(guard: MessageGate, *, tools: Sequence[Any] = (), prompt: str | None = None) -> Callable[[Any], dict]:
    """A ``pre_model_hook`` gating the graph's messages through ``guard``."""
    definitions = tool_definitions(tools)

    def hook(state: Any) -> dict[str, Any]:
        from langchain_core.messages import SystemMessage  # noqa: PLC0415 - optional extra

        messages = state["messages"] if isinstance(state, dict) else state.messages
        originals = Originals()
        system = [SystemMessage(content=prompt)] if prompt else []
        history = from_langchain([*system, *messages], originals)
        gated = to_langchain_messages(guard.gate_messages(history, {"tools": definitions}), originals)
        return {"llm_input_messages": [m for m in gated if not (system and m is system[0])]}

    return hook
