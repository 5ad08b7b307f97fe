"""The interface through which the context and the gate report what they do.

``policies`` never imports OpenTelemetry: the tracer implements :class:`Observer` with spans.
An observer that raises never breaks the agent: the caller counts the error and carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import Context, Unit
    from .decision import Decision
    from .messages import Message

log = logging.getLogger("prunegate")

# message events reported through Observer.on_message
APPEND, OPEN, DELTA, CLOSE, REWRITE, REMOVE, REINJECT = (
    "append",
    "open",
    "delta",
    "close",
    "rewrite",
    "remove",
    "reinject",
)


class Observer:
    """No-op base class: override what you need."""

    def on_message(self, ctx: Context, message: Message, event: str, **info: Any) -> None:
        """A message was appended, opened, streamed into, closed, rewritten, removed or re-injected."""

    def on_unit_closed(self, ctx: Context, unit: Unit) -> None:
        """A unit reached its commit boundary: no pending call, no open message."""

    def on_decision(self, ctx: Context, decision: Decision) -> None:
        """The gate decided something at a budget check."""


class MultiObserver(Observer):
    """Fans every event out to several observers."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = [o for o in observers if o is not None]

    def on_message(self, ctx: Context, message: Message, event: str, **info: Any) -> None:
        for o in self.observers:
            o.on_message(ctx, message, event, **info)

    def on_unit_closed(self, ctx: Context, unit: Unit) -> None:
        for o in self.observers:
            o.on_unit_closed(ctx, unit)

    def on_decision(self, ctx: Context, decision: Decision) -> None:
        for o in self.observers:
            o.on_decision(ctx, decision)


class ObserverErrors:
    """Counts observer failures so that a broken tracer is visible without breaking the agent."""

    def __init__(self) -> None:
        self.count = 0
        self.last: BaseException | None = None
        self.on_error: Callable[[BaseException], None] | None = None  # told of each failure (a metric)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - tracing must never crash the agent
            self.failed(exc)

    def failed(self, exc: Exception) -> None:
        """Count an observer's failure (for a caller that made the call itself: the per-event paths
        of the context and the gate, one call frame less per event)."""
        self.count += 1
        if self.last is None:
            log.warning("prunegate observer failed (counted, not raised): %r", exc)
        self.last = exc
        listener, self.on_error = self.on_error, None  # a failing listener counts once, never loops
        if listener is not None:
            self.call(listener, exc)
            self.on_error = listener
