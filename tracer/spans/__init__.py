"""The OpenTelemetry side: gate decisions and agent traffic as spans, and the pipeline that ships them.

``observer.py`` turns gate decisions into spans (:class:`SpanObserver`); ``session.py`` holds a
traced session (:class:`TracedSession`); ``genai.py`` the GenAI model-call and tool spans;
``direct.py`` the fast span path; ``redact.py`` what content may be recorded; ``pipeline.py`` the
span processor that never drops silently nor blocks the agent; ``setup.py`` wires it all
(:func:`setup_tracing`); ``names.py`` is every ``prunegate.*`` span name and attribute key
(``from tracer.contract import names``). Import names from here; they load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_surface

if TYPE_CHECKING:
    from tracer.spans.direct import DirectSpan, EndedSpan
    from tracer.spans.genai import ChatCall, ToolCall
    from tracer.spans.observer import SpanObserver
    from tracer.spans.pipeline import (
        ExporterSink,
        RecordSink,
        ReliableSpanProcessor,
        Sink,
        SinkExporter,
        SpoolingSink,
        StatsSink,
    )
    from tracer.spans.redact import Redactor
    from tracer.spans.session import SessionConfig, TracedSession
    from tracer.spans.setup import Tracing, otlp_traces_endpoint, setup_tracing

__all__ = ["ChatCall", "DirectSpan", "EndedSpan", "ExporterSink", "RecordSink", "Redactor", "ReliableSpanProcessor",
           "SessionConfig", "Sink", "SpoolingSink", "StatsSink",
           "SinkExporter", "SpanObserver", "ToolCall", "TracedSession", "Tracing", "otlp_traces_endpoint",
           "setup_tracing"]

__getattr__, __dir__ = lazy_surface(__name__, {
    "tracer.spans.direct": ["DirectSpan", "EndedSpan"],
    "tracer.spans.genai": ["ChatCall", "ToolCall"],
    "tracer.spans.observer": ["SpanObserver"],
    "tracer.spans.pipeline": ["ExporterSink", "RecordSink", "ReliableSpanProcessor", "Sink", "SinkExporter",
                              "SpoolingSink", "StatsSink"],
    "tracer.spans.redact": ["Redactor"],
    "tracer.spans.session": ["SessionConfig", "TracedSession"],
    "tracer.spans.setup": ["Tracing", "otlp_traces_endpoint", "setup_tracing"],
})
