"""Spans over the network, both ways: ``export.py`` sends the store's spans out to any OpenTelemetry
backend over OTLP/HTTP (``prunegate export``); ``serve.py`` receives OTLP/HTTP from agents or a
Collector into the store (``prunegate serve``), with ``waiting.py`` holding the GenAI conversations that
arrive over several requests until they are quiet and ``compaction.py`` deciding when serve compacts. Recorded traffic read from files stays in
``tracer.traffic``, whose OTLP JSON reader both use. Import names from here; they load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_surface

if TYPE_CHECKING:
    from tracer.wire.export import export_store
    from tracer.wire.serve import Receiver, make_server

__all__ = ["Receiver", "export_store", "make_server"]

__getattr__, __dir__ = lazy_surface(__name__, {
    "tracer.wire.export": ["export_store"],
    "tracer.wire.serve": ["Receiver", "make_server"],
})
