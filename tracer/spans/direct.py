"""Child spans written as plain records straight to the processors of prunegate's own provider.

Profiling a traced budget check (docs/performance.md) showed most of its cost in the SDK's span
life cycle rather than in the spans' data: the sampler, a context object per span, attribute
validation, a lock per attribute, and a second object (``ReadableSpan``) copied from the live span
at its end. Then, with spans of our own, in building a span object per decision and cleaning its
attributes on the agent's thread.

On a provider built by :func:`tracer.spans.setup.setup_tracing` whose every processor is a
:class:`~tracer.spans.pipeline.ReliableSpanProcessor` (its ``on_start`` does nothing), with the
default parent-based sampler and default span limits (:func:`direct_writer`), a session's child
spans are *span records*: plain tuples (:data:`tracer.contract.records.RECORD_FIELDS`) with the same
data (name, ids, parent, kind, attributes, status, links, events, times), appended to the
processors' buffers. An instant span (:meth:`TracedSession.emit`) is one tuple; a span that stays
open (a budget check, a decision, a model call) is a small :class:`DirectSpan` handle that becomes a
tuple when it ends. Cleaning the attributes and encoding them as JSON happen later, a chunk at a
time, where the store converts records to Arrow (:func:`tracer.store.rows.records_to_table`). A
sink that wants SDK spans (an OTLP exporter) gets standard ``ReadableSpan`` objects built from the
records (:func:`readable`). Any other provider, such as a user's own, gets the SDK's spans.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util import types

from tracer.contract.records import (
    E_ATTRS,
    E_NAME,
    E_TIME,
    R_CTX,
    R_END,
    R_EVENTS,
    R_KIND,
    R_LINKS,
    R_META,
    R_NAME,
    R_PARENT,
    R_SPAN,
    R_START,
    R_STATUS,
    HeldEvent,
)
from tracer.spans.records import clean_attributes, clean_chunk, record_attributes

log = logging.getLogger(__name__)

DIRECT_FLAG = "_prunegate_direct"  # set on providers built by setup_tracing
_SCALARS = (str, int, bool, float)
_SCALAR_SET = frozenset(_SCALARS)
_SEQUENCES = (list, tuple)
UNSET = Status(StatusCode.UNSET)
_DEFAULT_LIMITS = SpanLimits()


def put_clean(out: dict[str, Any], attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Add ``attributes`` to ``out`` as the SDK would store them after :func:`session.clean`."""
    return clean_attributes(attributes, out)


def put_sdk(out: dict[str, Any], attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Add ``attributes`` as the SDK's ``Span.set_attribute`` would (no :func:`session.clean` first)."""
    from opentelemetry.attributes import BoundedAttributes

    for key, value in attributes.items():
        kind = type(value)
        if kind in _SCALARS:
            out[key] = value
        elif kind in _SEQUENCES and len(kinds := set(map(type, value))) <= 1 and kinds <= _SCALAR_SET:
            out[key] = tuple(value)  # one scalar type throughout (or empty): what the SDK would keep, without
            #                          building a BoundedAttributes per key (a model call's lists)
        else:
            checked = BoundedAttributes(attributes={key: value})
            if key in checked:
                out[key] = checked[key]
    return out


class DirectWriter:
    """What a span record needs from its provider: span ids, resource, scope and where records go
    (the contract's :class:`~tracer.contract.records.RecordMeta`).

    ``emit(record)`` hands one record to every processor (``on_end_record``); ``clean_chunk`` is how
    the store cleans the attributes of records written with ``clean`` False (the SDK's rule)."""

    __slots__ = ("generate_span_id", "resource", "scope", "info", "emit")
    clean_chunk = staticmethod(clean_chunk)

    def __init__(self, provider: TracerProvider, tracer: Any, processors: Sequence[Any]) -> None:
        self.generate_span_id = provider.id_generator.generate_span_id
        self.resource = provider.resource
        self.scope = tracer._instrumentation_scope
        self.info = tracer.instrumentation_info
        self.emit: Callable[[tuple], None] = _fan_out(processors)


def _fan_out(processors: Sequence[Any]) -> Callable[[tuple], None]:
    if len(processors) == 1:
        return processors[0].on_end_record
    ends = [p.on_end_record for p in processors]

    def emit(record: tuple) -> None:
        for end in ends:
            end(record)

    return emit


# provider -> (its processors, scope, writer): one writer per provider while its processors stay
_WRITERS: weakref.WeakKeyDictionary[Any, tuple[Any, Any, DirectWriter]] = weakref.WeakKeyDictionary()


def direct_writer(provider: Any, tracer: Any, root: trace.Span | None = None) -> DirectWriter | None:
    """A writer for ``provider`` when span records are equivalent to the SDK's spans there, else None.

    ``root`` None: for a new trace (the sampler samples every root, :func:`start_root`). Processors
    are prunegate's :class:`~tracer.spans.pipeline.ReliableSpanProcessor` or classes that say
    ``takes_records = True`` (they take ``on_end_record(record)``: the import committer's)."""
    if not getattr(provider, DIRECT_FLAG, False) or not isinstance(provider, TracerProvider):
        return None
    try:
        from tracer.spans.pipeline import ReliableSpanProcessor

        processors = provider._active_span_processor._span_processors
        sampler = provider.sampler
        limits = provider._span_limits
        if not processors or not all(type(p) is ReliableSpanProcessor or getattr(type(p), "takes_records", False) is True
                                     for p in processors):
            return None
        if not (isinstance(sampler, ParentBased) and sampler._local_parent_sampled is ALWAYS_ON):
            return None
        if (limits.max_span_attributes, limits.max_span_attribute_length, limits.max_events,
                limits.max_links) != (_DEFAULT_LIMITS.max_span_attributes, _DEFAULT_LIMITS.max_span_attribute_length,
                                      _DEFAULT_LIMITS.max_events, _DEFAULT_LIMITS.max_links):
            return None
        if root is not None and not root.get_span_context().trace_flags.sampled:
            return None
        if not hasattr(tracer, "_instrumentation_scope"):
            return None
        cached = _WRITERS.get(provider)
        if (cached is not None and cached[0] is processors and cached[1] == tracer._instrumentation_scope
                and cached[2].resource is provider.resource):
            return cached[2]
        writer = DirectWriter(provider, tracer, processors)
        _WRITERS[provider] = (processors, tracer._instrumentation_scope, writer)
        return writer
    except AttributeError:  # an SDK whose internals moved: use its spans
        return None


class _RecordSpan(trace.Span):
    """A span whose context is built from its session root's and its own id when asked for."""

    __slots__ = ("_root", "_span_id", "_ctx")

    _root: SpanContext  # trace id, flags and state come from here
    _span_id: int
    _ctx: SpanContext | None

    def get_span_context(self) -> SpanContext:
        if self._ctx is None:
            r = self._root
            self._ctx = SpanContext(r.trace_id, self._span_id, False, r.trace_flags, r.trace_state)
        return self._ctx


class EndedSpan(_RecordSpan):
    """What :meth:`TracedSession.emit` returns for a span written as a record: ended, not recording,
    with the record's span context (built when asked for)."""

    __slots__ = ()

    def __init__(self, root: SpanContext, span_id: int) -> None:
        self._root = root
        self._span_id = span_id
        self._ctx = None

    def is_recording(self) -> bool:
        return False

    def end(self, end_time: int | None = None) -> None:
        return None

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        return None

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        return None

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        return None

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        return None

    def update_name(self, name: str) -> None:
        return None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        return None

    def record_exception(self, exception: BaseException, attributes: types.Attributes = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        return None


class DirectSpan(_RecordSpan):
    """A recording span that becomes a span record when it ends (nothing changes it after that).

    ``raw`` are the start attributes as given (cleaned with the record, later); attributes set
    afterwards follow the SDK's ``set_attribute`` rule and win over start attributes of the same key.
    """

    __slots__ = ("_writer", "_name", "_parent_id", "_kind", "_raw", "_set", "_links", "_events", "_start",
                 "_status", "_ended")

    def __init__(self, writer: DirectWriter, name: str, root: SpanContext, parent_id: int | None, kind: SpanKind,
                 raw: dict[str, Any], links: Sequence[Link], start_time: int, span_id: int | None = None) -> None:
        self._writer = writer
        self._name = name
        self._span_id = writer.generate_span_id() if span_id is None else span_id
        self._parent_id = parent_id
        self._root = root
        self._kind = kind
        self._raw = raw
        self._set: dict[str, Any] | None = None
        self._links = tuple(links)
        self._events: list[Event | HeldEvent] | None = None
        self._start = start_time
        self._status = UNSET
        self._ended = False
        self._ctx = None

    def is_recording(self) -> bool:
        return not self._ended

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        if not self._ended:
            if self._set is None:
                self._set = {}
            put_sdk(self._set, attributes)

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        self.set_attributes({key: value})

    def add_cleaned(self, attributes: Mapping[str, Any]) -> None:
        """Attributes that go through :func:`session.clean` (cleaned with the record, later)."""
        if self._ended:
            return
        self._raw.update(attributes)
        if self._set:
            for key in attributes:
                self._set.pop(key, None)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        if not self._ended:
            if self._events is None:
                self._events = []
            self._events.append(Event(name, put_sdk({}, attributes or {}), timestamp))

    def add_cleaned_events(self, events: Sequence[Event | HeldEvent]) -> None:
        """Add events whose attributes are already clean (:func:`put_clean`; held events as they are):
        no second pass."""
        if not self._ended:
            if self._events is None:
                self._events = []
            self._events.extend(events)

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
        if self._set:
            attrs, clean = clean_attributes(self._raw), True
            attrs.update(self._set)
        else:
            attrs, clean = self._raw, False
        w = self._writer
        w.emit((self._name, self._span_id, self._parent_id, self._kind, attrs, clean, self._start,
                end_time if end_time is not None else time.time_ns(), self._status, self._links,
                tuple(self._events) if self._events else (), self._root, w))


def start_root(writer: DirectWriter, provider: TracerProvider, name: str, attributes: dict[str, Any],
               start_time: int) -> DirectSpan:
    """The root span of a new trace as a :class:`DirectSpan` (what the SDK's sampler would make of it
    on a provider :func:`direct_writer` accepts: sampled, no parent, no trace state)."""
    span_id = writer.generate_span_id()
    ctx = SpanContext(provider.id_generator.generate_trace_id(), span_id, False, TraceFlags(TraceFlags.SAMPLED),
                      TraceState())
    return DirectSpan(writer, name, ctx, None, SpanKind.INTERNAL, attributes, (), start_time, span_id=span_id)


def readable(record: tuple) -> ReadableSpan:
    """A standard SDK ``ReadableSpan`` with a record's data (for exporters that take SDK spans)."""
    root: SpanContext = record[R_CTX]
    meta = record[R_META]
    parent = record[R_PARENT]
    return ReadableSpan(
        name=record[R_NAME],
        context=SpanContext(root.trace_id, record[R_SPAN], False, root.trace_flags, root.trace_state),
        parent=None if parent is None else SpanContext(root.trace_id, parent, False, root.trace_flags,
                                                       root.trace_state),
        resource=meta.resource,
        attributes=record_attributes(record),
        events=sdk_events(record[R_EVENTS]),
        links=record[R_LINKS],
        kind=record[R_KIND],
        status=record[R_STATUS],
        start_time=record[R_START],
        end_time=record[R_END],
        instrumentation_info=getattr(meta, "info", None),
        instrumentation_scope=meta.scope,
    )


def sdk_events(events: tuple[Event | HeldEvent, ...]) -> tuple[Event, ...]:
    """A record's span events as OTel Events (a held event becomes one, its attributes shared)."""
    if not any(type(e) is tuple for e in events):
        return events  # type: ignore[return-value]  # no held event: every one is an Event already
    return tuple(Event(e[E_NAME], e[E_ATTRS], e[E_TIME]) if isinstance(e, tuple) else e for e in events)


def as_spans(chunk: Sequence[Any]) -> list[Any]:
    """A chunk of records and SDK spans as SDK spans only."""
    return [readable(x) if type(x) is tuple else x for x in chunk]


__all__ = ["DIRECT_FLAG", "DirectSpan", "DirectWriter", "EndedSpan", "as_spans", "direct_writer", "put_clean",
           "put_sdk", "readable", "sdk_events", "start_root"]
