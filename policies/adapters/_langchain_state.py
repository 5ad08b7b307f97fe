"""The LangChain agent state the prune middleware adds its conversation id to.

Kept apart, without ``from __future__ import annotations``: LangChain reads the state's type hints
with ``get_type_hints``, which cannot resolve string annotations of a class made inside a function.
"""

from typing import Any, NotRequired


def prune_gate_state() -> Any:
    """``AgentState`` plus ``prunegate_conversation`` (imports LangChain: call it when the middleware is built)."""
    from langchain.agents.middleware import AgentState  # noqa: PLC0415 - optional extra

    class PruneGateState(AgentState):
        prunegate_conversation: NotRequired[str]

    return PruneGateState
