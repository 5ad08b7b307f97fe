"""Child spans written straight to the processors of prunegate's own tracer provider.

Profiling a traced budget check (docs/performance.md) showed most of its cost in the SDK's span
life cycle rather than in the spans' data: the sampler, a context object per span, attribute
validation run a second time over values :func:`tracer.spans.session.clean` had already cleaned,
a lock per attribute, and a second object (``ReadableSpan``) copied from the live span at its end.

A :class:`DirectSpan` keeps the same data (name, ids, parent, kind, attributes, status, links,
events, start and end time) and, when it ends, hands the processors one standard
``ReadableSpan``, the object every SDK exporter receives. It is used only for the children of a
session's root, only on a provider built by :func:`tracer.spans.setup.setup_tracing` whose every
processor is a :class:`~tracer.spans.pipeline.ReliableSpanProcessor` (its ``on_start`` does
nothing), with the default parent-based sampler and default span limits
(:func:`direct_writer`). Any other provider, such as a user's own, gets the SDK's spans.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util import types

log = logging.getLogger(__name__)

DIRECT_FLAG = "_prunegate_direct"  # set on providers built by setup_tracing
_SCALARS = (str, int, bool, float)
_SEQUENCES = (list, tuple, set, frozenset)
_UNSET = Status(StatusCode.UNSET)
_DEFAULT_LIMITS = SpanLimits()


def put_clean(out: dict[str, Any], attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Add ``attributes`` to ``out`` as the SDK would store them after :func:`session.clean`:
    ``None`` left out, sequences as tuples of str, anything else validated by the SDK's own rule."""
    for key, value in attributes.items():
        if value is None:
            continue
        t = type(value)
        if t in _SCALARS:
            out[key] = value
        elif t in _SEQUENCES:
            out[key] = tuple([str(v) for v in value])
        else:
            checked = BoundedAttributes(attributes={key: value})  # the SDK's own rule (rare values)
            if key in checked:
                out[key] = checked[key]
    return out


def put_sdk(out: dict[str, Any], attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Add ``attributes`` as the SDK's ``Span.set_attribute`` would (no :func:`session.clean` first)."""
    for key, value in attributes.items():
        if type(value) in _SCALARS:
            out[key] = value
        else:
            checked = BoundedAttributes(attributes={key: value})
            if key in checked:
                out[key] = checked[key]
    return out


class DirectWriter:
    """What a :class:`DirectSpan` needs from its provider: ids, resource, scope, processors."""

    __slots__ = ("generate_span_id", "resource", "scope", "info", "on_end")

    def __init__(self, provider: TracerProvider, tracer: Any) -> None:
        self.generate_span_id = provider.id_generator.generate_span_id
        self.resource = provider.resource
        self.scope = tracer._instrumentation_scope
        self.info = tracer.instrumentation_info
        self.on_end = provider._active_span_processor.on_end


def direct_writer(provider: Any, tracer: Any, root: trace.Span) -> DirectWriter | None:
    """A writer for ``provider`` when direct spans are equivalent to the SDK's there, else None."""
    if not getattr(provider, DIRECT_FLAG, False) or not isinstance(provider, TracerProvider):
        return None
    try:
        from tracer.spans.pipeline import ReliableSpanProcessor

        processors = provider._active_span_processor._span_processors
        sampler = provider.sampler
        limits = provider._span_limits
        if not processors or not all(type(p) is ReliableSpanProcessor for p in processors):
            return None
        if not (isinstance(sampler, ParentBased) and sampler._local_parent_sampled is ALWAYS_ON):
            return None
        if (limits.max_span_attributes, limits.max_span_attribute_length, limits.max_events,
                limits.max_links) != (_DEFAULT_LIMITS.max_span_attributes, _DEFAULT_LIMITS.max_span_attribute_length,
                                      _DEFAULT_LIMITS.max_events, _DEFAULT_LIMITS.max_links):
            return None
        if not root.get_span_context().trace_flags.sampled or not hasattr(tracer, "_instrumentation_scope"):
            return None
        return DirectWriter(provider, tracer)
    except AttributeError:  # an SDK whose internals moved: use its spans
        return None


class DirectSpan(trace.Span, ReadableSpan):
    """A recording span that is handed to the processors as itself, a ``ReadableSpan``, when it ends
    (the SDK copies its live span into a second object there); nothing changes it after that."""

    __slots__ = ("_writer", "_name", "_context", "_parent", "_kind", "_attributes", "_links", "_events",
                 "_start_time", "_end_time", "_status", "_resource", "_instrumentation_scope",
                 "_instrumentation_info", "_ended")  # fast attribute access (the store reads them column-wise)

    def __init__(self, writer: DirectWriter, name: str, parent: SpanContext, kind: SpanKind,
                 attributes: dict[str, Any], links: Sequence[Link], start_time: int) -> None:
        # ReadableSpan's fields, set directly (its __init__ would build a Resource when none is given)
        self._writer = writer
        self._name = name
        self._context = SpanContext(parent.trace_id, writer.generate_span_id(), False, parent.trace_flags,
                                    parent.trace_state)
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._links = tuple(links)
        self._events: list[Event] | tuple[Event, ...] = []
        self._start_time = start_time
        self._end_time: int | None = None
        self._status = _UNSET
        self._resource = writer.resource
        self._instrumentation_scope = writer.scope
        self._instrumentation_info = writer.info
        self._ended = False

    def get_span_context(self) -> SpanContext:
        return self._context  # type: ignore[return-value]  # always set in __init__

    def is_recording(self) -> bool:
        return not self._ended

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        if not self._ended:
            put_sdk(self._attributes, attributes)  # type: ignore[arg-type]  # a dict since __init__

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        if not self._ended:
            put_sdk(self._attributes, {key: value})  # type: ignore[arg-type]

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        if not self._ended:
            self._events.append(Event(name, put_sdk({}, attributes or {}), timestamp))  # type: ignore[union-attr]

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if not self._ended and context.is_valid:
            self._links = (*self._links, Link(context, attributes))

    def update_name(self, name: str) -> None:
        if not self._ended:
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """The SDK's rule: OK is final, UNSET is ignored."""
        if self._ended or self._status.status_code is StatusCode.OK:
            return
        if isinstance(status, Status):
            if status.status_code is not StatusCode.UNSET:
                self._status = status
        elif status is not StatusCode.UNSET:
            self._status = Status(status, description)

    def record_exception(self, exception: BaseException, attributes: types.Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        attrs = {"exception.type": type(exception).__name__, "exception.message": str(exception),
                 "exception.escaped": str(escaped), **(attributes or {})}
        self.add_event("exception", attrs, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self._end_time = end_time if end_time is not None else time.time_ns()
        if self._events:
            self._events = tuple(self._events)
        self._writer.on_end(self)
