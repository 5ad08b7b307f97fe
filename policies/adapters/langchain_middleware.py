"""The gate as LangChain 1.x agent middleware (``create_agent(..., middleware=[...])``).

::

    guard = PruneGuard("tiered", budget=3000, provider="openai", store="./prunegate-store")
    agent = create_agent(model, tools, system_prompt=SYSTEM, middleware=[prune_middleware(guard)])

Before every model call (``wrap_model_call``, and ``awrap_model_call`` for ``ainvoke``/``astream``)
the whole request (system prompt, messages, tool definitions) goes through the gate; the model is
called with the gated messages. The agent's state keeps its full history. Every system message is
kept: the agent's ``system_prompt`` stays the request's system message, any other stays where it is.

One session per conversation: keyed on the LangGraph ``thread_id`` when the run has one, else on an
id the middleware stores in the agent's state when the run starts (``prunegate_conversation``), so
concurrent runs on one guard stay apart and a middleware that rewrites the history before this one
(``SummarizationMiddleware``) keeps its conversation in one session. A request the adapter cannot
convert goes to the model unchanged, counted by the guard.
"""

from __future__ import annotations

import uuid
from typing import Any

from ._native import Conversation, MessageGate, Originals, gate_or_pass, require_conversation, require_gate
from .langchain_messages import from_langchain, thread_id, to_langchain_messages, tool_definitions

STATE_KEY = "prunegate_conversation"


def conversation_of(request: Any, conversation: Conversation = None) -> str | None:
    """The conversation key of a ``ModelRequest``: ``conversation`` when given (a string, or a
    callable of the request), else the run's ``thread_id``, else the id kept in the agent's state."""
    if isinstance(conversation, str):
        return conversation
    if callable(conversation):
        return conversation(request)
    thread = thread_id()
    if thread is not None:
        return f"thread:{thread}"
    state = getattr(request, "state", None)
    key = state.get(STATE_KEY) if isinstance(state, dict) else getattr(state, STATE_KEY, None)
    return None if key is None else f"run:{key}"


def gate_request(guard: MessageGate, request: Any, conversation: Conversation = None) -> Any:
    """``request`` (a ``ModelRequest``) with its system message and messages gated; unchanged on trouble."""
    from langchain_core.messages import SystemMessage  # noqa: PLC0415

    def run() -> Any:
        originals = Originals()
        system = [request.system_message] if request.system_message is not None else []
        history = from_langchain([*system, *request.messages], originals)
        extra = {"tools": tool_definitions(request.tools or [])}
        gated = guard.gate_messages(history, extra, conversation=conversation_of(request, conversation))
        out = to_langchain_messages(gated, originals)
        if system and out and isinstance(out[0], SystemMessage):
            return request.override(messages=out[1:], system_message=out[0])
        return request.override(messages=out, system_message=None)

    return gate_or_pass(guard, "langchain_middleware", run, lambda: request)


def prune_middleware(guard: MessageGate, *, conversation: Conversation = None) -> Any:
    """An ``AgentMiddleware`` that gates every model call of the agent through ``guard``.

    ``conversation`` overrides the key (see the module); checked here, with the guard, at construction.
    """
    require_gate(guard, "prune_middleware")
    require_conversation(conversation, "prune_middleware")
    try:
        from langchain.agents.middleware import AgentMiddleware  # noqa: PLC0415 - optional extra
    except ImportError as exc:
        raise ImportError("LangChain agents need the extra: pip install 'prunegate[langchain]'") from exc
    from ._langchain_state import prune_gate_state  # noqa: PLC0415

    class PruneGateMiddleware(AgentMiddleware):
        state_schema = prune_gate_state()

        def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return None if state.get(STATE_KEY) else {STATE_KEY: uuid.uuid4().hex}

        async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            return self.before_agent(state, runtime)

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(gate_request(guard, request, conversation))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(gate_request(guard, request, conversation))

    return PruneGateMiddleware()
