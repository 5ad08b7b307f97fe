"""Where a guard's spans go: the tracer provider it traces into, shared per store and endpoint.

Both guards (:class:`~tracer.guard.instrument.PruneGuard`, :class:`~tracer.guard.shadow.ShadowGuard`)
take ``store``, ``otlp_endpoint`` or a ``tracer_provider``; this module turns that into one
provider, flushes it on close when the guard set it up, and reports its pipeline's counters.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from opentelemetry import trace

__all__ = ["flush_if_owned", "guard_tracer_provider", "tracing_stats"]

_SHARED: dict[tuple[str, str | None], Any] = {}
_SHARED_LOCK = threading.Lock()


def tracing_stats(provider: Any) -> dict[str, dict[str, Any]]:
    """The span pipeline's counters per sink (``received``, ``stored``, ``spooled``, ``dropped``, ...)
    for a provider a guard set up: the same numbers its exit summary logs (see docs/store.md)."""
    with _SHARED_LOCK:
        for tracing in _SHARED.values():
            if tracing.provider is provider:
                return tracing.stats()
    return {}


def guard_tracer_provider(store: str | Path | None, tracer_provider: trace.TracerProvider | None,
                          otlp_endpoint: str | None = None) -> tuple[trace.TracerProvider, bool]:
    """The provider to trace into, and whether the guard set it up (and so flushes it on close).

    Guards given the same store (and OTLP endpoint) share one pipeline for the whole process: a
    guard per conversation costs no extra threads. The pipeline flushes at exit.
    """
    if tracer_provider is not None:
        return tracer_provider, False
    if store is None and otlp_endpoint is None:
        return trace.get_tracer_provider(), False
    from tracer.spans.setup import setup_tracing  # noqa: PLC0415 - the store pipeline is only needed with a store

    key = (str(Path(store).resolve()) if store is not None else "", otlp_endpoint)
    with _SHARED_LOCK:
        tracing = _SHARED.get(key)
        if tracing is None:
            tracing = _SHARED[key] = setup_tracing(store if store is not None else False,
                                                   otlp_endpoint if otlp_endpoint is not None else False)
    return tracing.provider, True


def flush_if_owned(provider: trace.TracerProvider, owned: bool) -> None:
    """Flush ``provider`` when the guard set it up (one it was given is its owner's to flush)."""
    if owned:
        flush = getattr(provider, "force_flush", None)
        if flush is not None:
            flush()
