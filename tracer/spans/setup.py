"""One call to trace prunegate: a TracerProvider whose spans go to the store, and to OTLP if asked.

    from tracer.spans.setup import setup_tracing
    tracing = setup_tracing()                      # store at $PRUNEGATE_STORE or ./prunegate-store
    tracing = setup_tracing(otlp_endpoint="http://127.0.0.1:4318")   # ... and to a collector
    tracer = tracing.tracer()                      # or tracing.provider for instrumentation

The OTLP side uses the standard ``opentelemetry-exporter-otlp-proto-http`` exporter behind the
same non-dropping processor; it is also switched on by ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``). Both sinks get every span; each counts its own losses.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from tracer.spans.direct import DIRECT_FLAG
from tracer.spans.pipeline import ExporterSink, ReliableSpanProcessor
from tracer.store import Store
from tracer.store.sink import StoreSink

log = logging.getLogger(__name__)

OTLP_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACES_PATH = "/v1/traces"
# spans per chunk the store's processor converts on the thread that ended the last one: 128 keeps a
# chunk's records in that CPU's cache until they are converted (256 left them cold: a traced check at
# ``checks`` cost about 0.9 µs more, docs/performance.md round 13); the same as the OTLP side's
STORE_CHUNK_SIZE = 128


@dataclass
class Tracing:
    """What :func:`setup_tracing` built. Shut it down (or let ``atexit`` do it) to flush."""

    provider: TracerProvider
    store: Store | None
    store_processor: ReliableSpanProcessor | None
    otlp_processor: ReliableSpanProcessor | None

    def tracer(self, name: str = "prunegate", version: str | None = None) -> trace.Tracer:
        return self.provider.get_tracer(name, version)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per-sink counters (see :meth:`ReliableSpanProcessor.stats`)."""
        out = {}
        if self.store_processor is not None:
            out["store"] = self.store_processor.stats()
        if self.otlp_processor is not None:
            out["otlp"] = self.otlp_processor.stats()
        return out

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.provider.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.provider.shutdown()


def otlp_traces_endpoint(endpoint: str) -> str:
    """A base OTLP/HTTP URL (``http://host:4318``) -> its traces URL; a traces URL stays as is."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def setup_tracing(
    store: Store | str | os.PathLike[str] | None | bool = None,
    otlp_endpoint: str | None | bool = None,
    *,
    service_name: str = "prunegate",
    resource_attributes: dict[str, Any] | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    auto_compact: bool = True,
    otlp_headers: dict[str, str] | None = None,
    set_global: bool = False,
    **processor_options: Any,
) -> Tracing:
    """Build (and optionally install globally) a TracerProvider for prunegate.

    ``store``: a :class:`Store`, a path, ``None`` for the default (:func:`tracer.store.resolve_store`), or
    ``False`` for no store. ``otlp_endpoint``: a base or ``/v1/traces`` URL, ``None`` to follow
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` when it is set, ``False`` for no OTLP even if it is.
    ``auto_compact`` False leaves the store's segments for a later compaction (a short batch job
    such as a replay worker: compacting holds the store's index in memory, which grows with the
    store). ``processor_options`` go to the store's :class:`ReliableSpanProcessor` (its ``chunk_size``
    :data:`STORE_CHUNK_SIZE` unless given).
    """
    resource = Resource.create({"service.name": service_name, **(resource_attributes or {})})
    provider = TracerProvider(resource=resource)
    setattr(provider, DIRECT_FLAG, True)  # sessions may write their child spans directly (tracer.spans.direct)
    store_obj: Store | None = None
    store_proc = otlp_proc = None
    if store is not False:
        store_obj = store if isinstance(store, Store) else Store(None if store is None or store is True else store)
        store_proc = ReliableSpanProcessor(StoreSink(store_obj, spool_dir=spool_dir, auto_compact=auto_compact),
                                           **{"chunk_size": STORE_CHUNK_SIZE, **processor_options})
        provider.add_span_processor(store_proc)
    exporter = _otlp_exporter(otlp_endpoint, otlp_headers)
    if exporter is not None:
        otlp_proc = ReliableSpanProcessor(
            ExporterSink(exporter, name="otlp"), max_batch_size=512, chunk_size=128, max_queue_size=8192
        )
        provider.add_span_processor(otlp_proc)
    if set_global:
        trace.set_tracer_provider(provider)
    return Tracing(provider, store_obj, store_proc, otlp_proc)


def _otlp_exporter(endpoint: str | None | bool, headers: dict[str, str] | None) -> Any:
    if endpoint is False:
        return None
    if endpoint in (None, True) and not any(os.environ.get(k) for k in OTLP_ENV):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if isinstance(endpoint, str):
        return OTLPSpanExporter(endpoint=otlp_traces_endpoint(endpoint), headers=headers)
    return OTLPSpanExporter(headers=headers)  # the exporter reads the OTEL_* variables itself
