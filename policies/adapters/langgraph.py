"""The gate as a LangGraph ``pre_model_hook`` (``create_react_agent(..., pre_model_hook=...)``).

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    agent = create_react_agent(model, tools, prompt=SYSTEM,
                               pre_model_hook=prune_hook(guard, tools=tools, prompt=SYSTEM))

The hook returns ``llm_input_messages``: the model sees the gated history, the graph's state keeps
the full one. ``tools`` and ``prompt`` (the same as the agent's: a string or a ``SystemMessage``)
are only counted: the hook does not see them, the model does. One session per LangGraph
``thread_id`` (``conversation=`` overrides it); a run without one is the guard's default
conversation. A history the adapter cannot convert goes to the model unchanged, counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import SettingsError
from ._native import Conversation, MessageGate, Originals, gate_or_pass, require_conversation, require_gate
from .langchain_messages import from_langchain, thread_id, to_langchain_messages, tool_definitions


def prune_hook(guard: MessageGate, *, tools: Sequence[Any] = (), prompt: Any = None,
               conversation: Conversation = None) -> Callable[[Any], dict]:
    """A ``pre_model_hook`` gating the graph's messages through ``guard``."""
    from langchain_core.messages import SystemMessage  # noqa: PLC0415 - optional extra

    require_gate(guard, "prune_hook")
    require_conversation(conversation, "prune_hook")
    if isinstance(prompt, str):
        system: list[Any] = [SystemMessage(content=prompt)] if prompt else []
    elif isinstance(prompt, SystemMessage):
        system = [prompt]
    elif prompt is None:
        system = []
    else:
        raise SettingsError(f"prune_hook: prompt must be a string or a SystemMessage (the agent's prompt, "
                            f"counted), got {type(prompt).__name__}")
    definitions = tool_definitions(tools)

    def hook(state: Any) -> dict[str, Any]:
        messages = state["messages"] if isinstance(state, dict) else state.messages

        def run() -> dict[str, Any]:
            originals = Originals()
            history = from_langchain([*system, *messages], originals)
            key = conversation(state) if callable(conversation) else conversation
            if key is None:
                thread = thread_id()
                key = None if thread is None else f"thread:{thread}"
            gated = to_langchain_messages(guard.gate_messages(history, {"tools": definitions}, conversation=key),
                                          originals)
            return {"llm_input_messages": gated[1:] if system and gated and gated[0] is system[0] else gated}

        return gate_or_pass(guard, "langgraph", run, lambda: {"llm_input_messages": list(messages)})

    return hook
