"""The gate as LangChain 1.x agent middleware (``create_agent(..., middleware=[...])``).

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    agent = create_agent(model, tools, system_prompt=SYSTEM, middleware=[prune_middleware(guard)])

Before every model call (``wrap_model_call``, and ``awrap_model_call`` for ``ainvoke``/``astream``)
the whole request (system prompt, messages, tool definitions) goes through the gate; the model is
called with the gated messages. The agent's state keeps its full history.
"""

from __future__ import annotations

from typing import Any

from ._native import MessageGate, Originals
from .langchain_messages import from_langchain, to_langchain_messages, tool_definitions


def gate_request(guard: MessageGate, request: Any) -> Any:
    """``request`` (a ``ModelRequest``) with its system message and messages gated."""
    from langchain_core.messages import SystemMessage  # noqa: PLC0415

    originals = Originals()
    system = [request.system_message] if request.system_message is not None else []
    history = from_langchain([*system, *request.messages], originals)
    extra = {"tools": tool_definitions(request.tools or [])}
    gated = to_langchain_messages(guard.gate_messages(history, extra), originals)
    systems = [m for m in gated if isinstance(m, SystemMessage)]
    return request.override(messages=[m for m in gated if not isinstance(m, SystemMessage)],
                            system_message=systems[0] if systems else None)


def prune_middleware(guard: MessageGate) -> Any:
    """An ``AgentMiddleware`` that gates every model call of the agent through ``guard``."""
    try:
        from langchain.agents.middleware import AgentMiddleware  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError("LangChain agents need the extra: pip install 'prunegate[langchain]'") from exc

    class PruneGateMiddleware(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(gate_request(guard, request))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(gate_request(guard, request))

    return PruneGateMiddleware()
