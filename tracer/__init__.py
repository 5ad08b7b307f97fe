"""prunegate's observability and lab layer, in wings over one ground floor:

- ``tracer.contract`` — the ground floor every wing shares (standard library only): span and
  attribute names, the span record's shape, the ``PRUNEGATE_*`` settings.
- ``tracer.spans``   — the OpenTelemetry side: the observer that turns gate decisions into spans,
  traced sessions, GenAI spans, redaction, the span pipeline and ``setup_tracing``.
- ``tracer.store``   — the DuckDB/Parquet trace store: schema, segments, sink, spool, compaction,
  readers. Nothing outside it touches the files.
- ``tracer.guard``   — in-process instrumentation of a live agent: ``PruneGuard``, ``ShadowGuard``.
- ``tracer.traffic`` — recorded traffic in: importers, OTLP JSON, event streams, stored sessions.
- ``tracer.wire``    — spans over the network: OTLP export out of the store, ``prunegate serve`` in.
- ``tracer.lab``     — replay of recorded sessions through any policy, and A/B comparison.
- ``tracer.queries`` — the API the dashboard reads (and writes annotations) through.
- ``tracer.cli``     — the ``prunegate`` command, one module per subcommand.

Defined once, imported everywhere: span names and attribute keys in ``tracer.contract.names``,
``PRUNEGATE_*`` environment variables in ``tracer.contract.settings``, the store path rule in
``tracer.store.location``, the
tracer's errors (``TracerError`` and its subclasses) in ``tracer.errors``.

The names most users need are importable from here, and each wing's ``__init__`` declares its
public surface in ``__all__`` (``from tracer.lab import ReplaySpec``); names load on first use
(``tracer/_lazy.py``) so that ``import tracer`` stays cheap for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_surface

if TYPE_CHECKING:
    from tracer.guard.instrument import PruneGuard
    from tracer.guard.shadow import ShadowGuard
    from tracer.spans.setup import setup_tracing
    from tracer.store import Store

__all__ = ["PruneGuard", "ShadowGuard", "Store", "setup_tracing"]

__getattr__, __dir__ = lazy_surface(__name__, {
    "tracer.guard.instrument": ["PruneGuard"],
    "tracer.guard.shadow": ["ShadowGuard"],
    "tracer.spans.setup": ["setup_tracing"],
    "tracer.store": ["Store"],
})
