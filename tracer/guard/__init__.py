"""In-process instrumentation of a live agent: the gate in front of its model calls, or shadow mode.

:class:`PruneGuard` (``instrument.py``) gates and traces each request of an agent loop;
:class:`ShadowGuard` (``shadow.py``) watches the agent's own trimmer without changing what it does;
``tracing.py`` picks the tracer provider both write to; ``_history.py`` (private to the wing)
matches the agent's full history against the guard's context. Import from here:
``from tracer.guard import PruneGuard``. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_surface

if TYPE_CHECKING:
    from tracer.guard.instrument import PruneGuard, assistant_message, tool_calls, tool_results_message
    from tracer.guard.shadow import ShadowGuard, ShadowReport
    from tracer.guard.tracing import tracing_stats

__all__ = ["PruneGuard", "ShadowGuard", "ShadowReport", "assistant_message", "tool_calls", "tool_results_message",
           "tracing_stats"]

__getattr__, __dir__ = lazy_surface(__name__, {
    "tracer.guard.instrument": ["PruneGuard", "assistant_message", "tool_calls", "tool_results_message"],
    "tracer.guard.shadow": ["ShadowGuard", "ShadowReport"],
    "tracer.guard.tracing": ["tracing_stats"],
})
