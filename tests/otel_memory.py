"""A real OpenTelemetry SDK pipeline into the SDK's own in-memory exporter, and span helpers."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Recorder:
    """A TracerProvider exporting synchronously into memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"expected one {name} span, got {len(found)}"
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in self.spans if s.parent is not None and s.parent.span_id == parent.context.span_id]

    def by_id(self, span_id: int) -> ReadableSpan:
        return next(s for s in self.spans if s.context.span_id == span_id)


def all_attribute_text(spans: Sequence[ReadableSpan]) -> str:
    """Every attribute value (and status description) of the spans, as one string to search."""
    parts = []
    for s in spans:
        parts.extend(str(v) for v in (s.attributes or {}).values())
        parts.append(str(s.status.description or ""))
    return "\n".join(parts)
