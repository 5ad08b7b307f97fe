"""A traced session: one trace, one root span, and the causal map from evictions to violations.

Every span of a session is a child of its ``prunegate.session`` root (the decision span of a
budget check is a child of that check) and carries ``prunegate.session.id`` and ``prunegate.seq``.
Readers order a session's spans by ``(prunegate.seq, start time)``; :meth:`TracedSession.clock`
makes start times strictly increasing within a session so that order is the order of emission.

The session also remembers, for every message id and tool call id that an eviction removed, the
span context of the decision span that removed it. A violation found later (an orphan result, a
missing result, a stream writing into an evicted message, a side effect run twice) is linked to
that span: the dashboard follows the link from the symptom to its cause.
"""

from __future__ import annotations

import atexit
import random
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from opentelemetry import trace
from opentelemetry.sdk.trace import Event
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from policies.validate import FIRST_MESSAGE_NOT_USER, Violation, validate
from tracer.contract import names as sn
from tracer.contract.records import E_TIME, HeldEvent, event_parts
from tracer.errors import RedactionFailed
from tracer.spans import openinference as _oi
from tracer.spans import redact as _redact
from tracer.spans.direct import UNSET as _UNSET
from tracer.spans.direct import DirectSpan, EndedSpan, direct_writer, put_clean, start_root
from tracer.spans.genai import ChatCall, ToolCall
from tracer.spans.metrics import GateMetrics

SCOPE = sn.SCOPE
SOURCES = ("import", "replay", "live", "shadow", "synthetic")
# how much a session records (docs/spans.md "Detail levels"): full = every message event and unit
# closure a span of its own; checks = those become span events of the next budget check, every check
# a span; decisions = the same, and only checks that decided something other than within_budget
DETAILS = ("decisions", "checks", "full")
MAX_EVENTS = 128  # OpenTelemetry's default cap of events per span
LINK_ATTRIBUTES = {sn.LINK: sn.LINK_CAUSED_BY}


class Eviction(NamedTuple):
    """Where a message or call left the context: the decision span that removed it (a tuple: one is
    made per message a decision removes, on the agent's thread)."""

    cause: EndedSpan | SpanContext  # the decision span: a record's handle (its context built when a
    #                                  violation links to it) or, for any other span, its context
    message_id: str
    check: int | None
    decision: str  # span name of the decision: prunegate.prune, prunegate.spill, ...

    @property
    def span_context(self) -> SpanContext:
        """The decision span's context (what a violation links to)."""
        cause = self.cause
        return cause.get_span_context() if type(cause) is EndedSpan else cause  # type: ignore[return-value]  # else a SpanContext


_new_eviction = tuple.__new__


def clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes OpenTelemetry accepts: no ``None`` values, sequences as lists of str."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (set, frozenset, tuple, list)):
            value = [str(v) for v in value]
        out[key] = value
    return out


@dataclass(frozen=True)
class SessionConfig:
    """What a traced session records about itself on its root span (docs/spans.md), and how.

    ``source`` is one of :data:`SOURCES`; ``gated`` is None when no gate and no naive runtime
    applies (an import). ``capture_content`` defaults to the environment (see
    :func:`tracer.spans.redact.capture_enabled`); ``redact`` is applied to every string of recorded
    content. ``attributes`` are added to the root span; ``start_time`` (ns) backdates it.
    """

    session_id: str | None = None
    source: str = "live"
    name: str | None = None
    provider: str | None = None
    policy: str | None = None
    policy_params: Mapping[str, Any] | None = None
    gated: bool | None = True
    budget: int | None = None
    hard_ceiling: int | None = None
    capture_content: bool | None = None
    redact: _redact.Redactor | None = None
    source_id: str | None = None
    attributes: Mapping[str, Any] | None = None
    start_time: int | None = None
    metrics: GateMetrics | None = None  # where the session's checks and violations are also counted
    detail: str = "full"  # one of DETAILS

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"session source must be one of {', '.join(SOURCES)}; got {self.source!r}")
        check_detail(self.detail)


def sampled_detail(detail: str, rate: float) -> str:
    """Head-based sampling per session: ``detail`` for a ``rate`` share of sessions, else
    ``decisions`` (the decision spans are always kept)."""
    if rate >= 1.0 or detail == "decisions":
        return detail
    return detail if random.random() < rate else "decisions"  # noqa: S311 - sampling, not security


def check_detail(detail: str) -> str:
    """``detail`` if it is one of :data:`DETAILS`; else ValueError naming them."""
    if detail not in DETAILS:
        raise ValueError(f"detail must be one of {', '.join(DETAILS)}; got {detail!r}")
    return detail


# span name (no gen_ai.operation.name), or (span name, gen_ai.operation.name) -> OpenInference span
# kind (what _oi.span_kind reads)
_OI_KINDS: dict[Any, Any] = {}
_SEQ, _SESSION_ID, _OI_KIND, _OPERATION = sn.SEQ, sn.SESSION_ID, _oi.SPAN_KIND, sn.GEN_AI_OPERATION_NAME
_MISSING = object()
_time_ns = time.time_ns
_INTERNAL = SpanKind.INTERNAL
_TRACERS: weakref.WeakKeyDictionary[Any, trace.Tracer] = weakref.WeakKeyDictionary()


def _tracer_of(provider: trace.TracerProvider) -> trace.Tracer:
    """prunegate's tracer of ``provider``, made once per provider (the SDK makes a new one per call)."""
    try:
        tracer = _TRACERS.get(provider)
        if tracer is None:
            tracer = _TRACERS[provider] = provider.get_tracer(SCOPE)
        return tracer
    except TypeError:  # a provider that cannot be weakly referenced
        return provider.get_tracer(SCOPE)


def _arguments_key(arguments: Any) -> Any:
    """Tool arguments as a value that is equal for equal arguments (never stored: retry detection)."""
    try:
        return orjson.dumps(arguments)
    except (TypeError, orjson.JSONEncodeError):
        return _redact.dumps(arguments)


class TracedSession:
    """The root span of one session and the helpers every prunegate span goes through.

    ``tracer_provider`` defaults to the global one; ``config`` (a :class:`SessionConfig`) to a live,
    gated session with content capture as the environment says.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 config: SessionConfig | None = None) -> None:
        config = config or SessionConfig()
        self.config = config
        provider_obj = tracer_provider or trace.get_tracer_provider()
        self.tracer = _tracer_of(provider_obj)
        self.session_id = config.session_id or uuid.uuid4().hex
        self.source = config.source
        self.provider = config.provider
        self.gated = config.gated
        self.capture = _redact.capture_enabled(config.capture_content)
        self.redact = config.redact
        self.metrics = config.metrics
        self.detail = config.detail
        self._held: list[HeldEvent] = []  # message events and unit closures waiting for their check (below full)
        self.seq = 0
        self._lock = threading.Lock()
        self._last_ns = 0
        self._by_call: dict[str, Eviction] = {}
        self._by_message: dict[str, Eviction] = {}
        self._last_eviction: Eviction | None = None
        self._failures = 0  # invalid requests and error responses so far (for retry detection)
        self._ran_calls: set[str] = set()
        self._ran_effects: dict[tuple[str, str], tuple[str, int]] = {}
        self.violations = 0
        self.redaction_failures = 0  # contents left out because the redaction hook failed
        self.tracer_errors = 0  # span starts/ends the tracing pipeline failed (never raised)
        self._io: list[tuple[str, str]] = []  # (role, text) of arrivals, for the root's input/output
        params = config.policy_params
        root_attrs = {
            _oi.SPAN_KIND: _oi.CHAIN,
            _oi.SESSION_ID: self.session_id,
            sn.GEN_AI_CONVERSATION_ID: self.session_id,
            sn.SESSION_ID: self.session_id,
            sn.SEQ: 0,
            sn.SESSION_SOURCE: config.source,
            sn.SESSION_SOURCE_ID: config.source_id,
            sn.SESSION_NAME: config.name,
            sn.PROVIDER: config.provider,
            sn.POLICY: config.policy,
            sn.POLICY_PARAMS: _redact.dumps(dict(params)) if params is not None else None,
            sn.GATED: config.gated,
            sn.BUDGET: config.budget,
            sn.HARD_CEILING: config.hard_ceiling,
            sn.CONTENT_CAPTURED: self.capture,
            sn.DETAIL: config.detail,
            **(config.attributes or {}),
        }
        # spans written as records straight to prunegate's own pipeline (tracer.spans.direct), else SDK spans
        self._direct = direct_writer(provider_obj, self.tracer)
        if self._direct is not None:
            self.root: trace.Span = start_root(self._direct, provider_obj, sn.SESSION,  # type: ignore[arg-type]  # direct_writer accepted only an SDK TracerProvider
                                               clean(root_attrs), self.clock(config.start_time))
        else:
            self.root = self.tracer.start_span(
                sn.SESSION, context=trace.set_span_in_context(trace.INVALID_SPAN),
                attributes=clean(root_attrs), start_time=self.clock(config.start_time),
            )
        self.root_context = trace.set_span_in_context(self.root)
        self._root_span_context = self.root.get_span_context()
        self._root_span_id = self._root_span_context.span_id
        self.ended = False
        ref = weakref.ref(self)

        def end_at_exit() -> None:
            if (s := ref()) is not None:
                s.end()

        self._atexit = end_at_exit
        atexit.register(self._atexit)

    # ------------------------------------------------------------------ plumbing
    def clock(self, at: int | None = None) -> int:
        """A start/end time in ns, strictly increasing within the session."""
        now = time.time_ns() if at is None else at
        with self._lock:
            if now <= self._last_ns:
                now = self._last_ns + 1
            self._last_ns = now
        return now

    def clock_pair(self, start: int | None = None) -> tuple[int, int]:
        """(start, end) of an instant span as two :meth:`clock` calls would give them (``start``
        given: used as is), under one lock."""
        now = time.time_ns()
        with self._lock:
            last = self._last_ns
            if start is None:
                start = last = now if now > last else last + 1
            end = now if now > last else last + 1
            self._last_ns = end
        return start, end

    def clock_back(self, duration_ns: int) -> tuple[int, int]:
        """(start, end) of a span that ends now and took ``duration_ns`` (the gate's own measure of
        a check), its start clipped to just after the session's last time so emission order holds."""
        now = _time_ns()
        with self._lock:
            last = self._last_ns
            end = now if now > last + 1 else last + 2
            start = end - duration_ns if duration_ns > 0 else end
            if start <= last:
                start = last + 1
            if start >= end:
                start = end - 1
            self._last_ns = end
        return start, end

    def common(self, seq: int | None) -> dict[str, Any]:
        if seq is not None and seq > self.seq:
            self.seq = seq
        return {sn.SESSION_ID: self.session_id, sn.SEQ: self.seq if seq is None else seq}

    def start_span(self, name: str, attributes: Mapping[str, Any], *, seq: int | None,
                   parent: trace.Span | None = None, kind: SpanKind = SpanKind.INTERNAL,
                   links: Sequence[Link] = (), start_time: int | None = None) -> trace.Span:
        """Open a child span of the root (or of ``parent``) with the common attributes."""
        direct = self._direct
        if direct is not None:
            if parent is None:
                root, parent_id = self._root_span_context, self._root_span_id
            elif type(parent) is DirectSpan:
                root, parent_id = parent._root, parent._span_id
            else:
                root = parent.get_span_context()
                parent_id = root.span_id
            if root.is_valid:
                try:
                    return DirectSpan(direct, name, root, parent_id, kind, self._direct_attrs(name, attributes, seq),
                                      links, start_time if start_time is not None else self.clock())
                except Exception as exc:  # noqa: BLE001 - never reaches the agent
                    self._tracer_failed(exc)
                    return trace.INVALID_SPAN
        attrs = self.common(seq)
        ctx = self.root_context if parent is None else trace.set_span_in_context(parent)
        attrs.update(clean(attributes))
        oi_kind = _oi.span_kind(name, attrs)
        if oi_kind is not None:
            attrs.setdefault(_oi.SPAN_KIND, oi_kind)
        try:
            return self.tracer.start_span(name, context=ctx, kind=kind, attributes=attrs, links=links,
                                          start_time=start_time if start_time is not None else self.clock())
        except Exception as exc:  # noqa: BLE001 - a broken span processor must not reach the agent
            self._tracer_failed(exc)
            return trace.INVALID_SPAN

    def _direct_attrs(self, name: str, attributes: Mapping[str, Any], seq: int | None,
                      owned: bool = False) -> dict[str, Any]:
        """The common attributes and ``attributes``, left for the record's later cleaning when that
        gives what cleaning them now would (the usual case), else cleaned now. ``owned``: ``attributes``
        is a new dict the caller gives away, so the common ones are added to it (no copy; the stored
        attributes are the same, only their order in the dict differs).

        On the agent's thread for every span: module-level names and one cache lookup per span name."""
        if seq is None:
            seq = self.seq
        elif seq > self.seq:
            self.seq = seq
        if _SEQ in attributes or _SESSION_ID in attributes or _OI_KIND in attributes:
            attrs = put_clean({_SESSION_ID: self.session_id, _SEQ: seq}, attributes)
            if _OI_KIND in attrs:
                return attrs
        elif owned and type(attributes) is dict:
            attrs = attributes
            attrs[_SESSION_ID] = self.session_id
            attrs[_SEQ] = seq
        else:
            attrs = {_SESSION_ID: self.session_id, _SEQ: seq, **attributes}
        op = attrs.get(_OPERATION)
        if op is None:
            oi_kind = _OI_KINDS.get(name, _MISSING)
        elif type(op) is str:
            oi_kind = _OI_KINDS.get((name, op), _MISSING)
        else:
            oi_kind = _oi.span_kind(name, attrs)
        if oi_kind is _MISSING:
            oi_kind = _oi.span_kind(name, attrs)
            if len(_OI_KINDS) < 4096:
                _OI_KINDS[name if op is None else (name, op)] = oi_kind
        if oi_kind is not None:
            attrs[_OI_KIND] = oi_kind
        return attrs

    def oi_kind(self, name: str) -> str | None:
        """The OpenInference span kind :meth:`_direct_attrs` gives a span named ``name`` that has no
        ``gen_ai.operation.name``: what a caller passing ``ready`` attributes writes itself."""
        return self._direct_attrs(name, {}, None, owned=True).get(_OI_KIND)

    def end_span(self, span: trace.Span, attributes: Mapping[str, Any] | None = None, *,
                 end_time: int | None = None) -> None:
        """End a span now (or at ``end_time``, taken earlier from :meth:`clock`); a failing span
        processor is counted (:attr:`tracer_errors`), never raised."""
        try:
            if type(span) is DirectSpan:
                if attributes:
                    span.add_cleaned(attributes)
            elif attributes:
                span.set_attributes(clean(attributes))
            span.end(end_time=self.clock() if end_time is None else end_time)
        except Exception as exc:  # noqa: BLE001
            self._tracer_failed(exc)

    def _tracer_failed(self, exc: BaseException) -> None:
        self.tracer_errors += 1
        if self.metrics is not None:
            self.metrics.error("tracer")
        if self.tracer_errors == 1:
            _redact.log.warning("prunegate: the tracing pipeline failed (counted, not raised): %r", exc)

    def emit(self, name: str, attributes: Mapping[str, Any], *, seq: int | None,
             parent: trace.Span | None = None, links: Sequence[Link] = (),
             start_time: int | None = None, error: str | None = None,
             events: tuple[Event | HeldEvent, ...] = ()) -> trace.Span:
        """A span for an instant event: started and ended at once. Returns the ended span.

        On prunegate's own pipeline this is one span record (tracer.spans.direct), no span object."""
        direct = self._direct
        if direct is not None and (parent is None or type(parent) is DirectSpan):
            try:
                attrs = self._direct_attrs(name, attributes, seq)
                start, end = self.clock_pair(start_time)
                span_id = direct.generate_span_id()
                if parent is None:
                    root, parent_id = self._root_span_context, self._root_span_id
                else:
                    root, parent_id = parent._root, parent._span_id
                direct.emit((name, span_id, parent_id, _INTERNAL, attrs, False, start, end,
                             _UNSET if error is None else Status(StatusCode.ERROR, error),
                             links if type(links) is tuple else tuple(links), events, root, direct))
                return EndedSpan(root, span_id)
            except Exception as exc:  # noqa: BLE001 - never reaches the agent
                self._tracer_failed(exc)
                return trace.INVALID_SPAN
        span = self.start_span(name, attributes, seq=seq, parent=parent, links=links, start_time=start_time)
        if events:
            self.add_events(span, events)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        self.end_span(span)
        return span

    def emit_at(self, name: str, attributes: Mapping[str, Any], seq: int | None, start: int, end: int,
                parent: trace.Span | None = None, events: tuple[Event | HeldEvent, ...] = (),
                owned: bool = False, ready: bool = False) -> None:
        """:meth:`emit` for a caller that has its (start, end) from the session's clock already and
        needs no span back (a within-budget check: one record, no second clock read, no span handle).
        ``owned``: ``attributes`` is a new dict the caller gives away (see :meth:`_direct_attrs`);
        ``ready``: besides, it has what :meth:`_direct_attrs` would add (the session id, ``seq``, :meth:`oi_kind`)."""
        direct = self._direct
        if direct is not None and (parent is None or type(parent) is DirectSpan):
            try:
                if parent is None:
                    root, parent_id = self._root_span_context, self._root_span_id
                else:
                    root, parent_id = parent._root, parent._span_id
                if ready:
                    if seq is not None and seq > self.seq:
                        self.seq = seq
                    attrs = attributes
                else:
                    attrs = self._direct_attrs(name, attributes, seq, owned)
                direct.emit((name, direct.generate_span_id(), parent_id, _INTERNAL, attrs, False, start, end, _UNSET, (),
                             events, root, direct))
            except Exception as exc:  # noqa: BLE001 - never reaches the agent
                self._tracer_failed(exc)
            return
        self.emit(name, attributes, seq=seq, parent=parent, start_time=start, events=events)

    def emit_pair(self, name: str, attributes: Mapping[str, Any], child: str, child_attributes: Mapping[str, Any], *,
                  seq: int | None, start: int, child_start: int, parent: trace.Span | None = None,
                  events: tuple[Event | HeldEvent, ...] = (), child_error: str | None = None,
                  owned: bool = False, ready: bool = False) -> trace.Span:
        """A span and one child span, both ending now (the child first): a budget check and its decision.

        The same spans as :meth:`start_span` twice, :meth:`add_events` on the parent and
        :meth:`end_span` twice would give; on prunegate's own pipeline two records and no span
        objects. Returns the ended child (its span context is what evictions link to). ``owned``: both
        attribute dicts are new dicts the caller gives away (see :meth:`_direct_attrs`); ``ready``:
        besides, both have what :meth:`_direct_attrs` would add (see :meth:`emit_at`)."""
        direct = self._direct
        if direct is not None and (parent is None or type(parent) is DirectSpan):
            try:
                if parent is None:
                    root, parent_id = self._root_span_context, self._root_span_id
                else:
                    root, parent_id = parent._root, parent._span_id
                span_id, child_id = direct.generate_span_id(), direct.generate_span_id()
                if ready:
                    if seq is not None and seq > self.seq:
                        self.seq = seq
                    attrs, child_attrs = attributes, child_attributes
                else:
                    attrs = self._direct_attrs(name, attributes, seq, owned)
                    child_attrs = self._direct_attrs(child, child_attributes, seq, owned)
                child_end, end = self.clock_pair()
                direct.emit((child, child_id, span_id, _INTERNAL, child_attrs, False, child_start, child_end,
                             _UNSET if child_error is None else Status(StatusCode.ERROR, child_error), (), (), root,
                             direct))
                direct.emit((name, span_id, parent_id, _INTERNAL, attrs, False, start, end, _UNSET, (), events, root,
                             direct))
                return EndedSpan(root, child_id)
            except Exception as exc:  # noqa: BLE001 - never reaches the agent
                self._tracer_failed(exc)
                return trace.INVALID_SPAN
        span = self.start_span(name, attributes, seq=seq, parent=parent, start_time=start)
        if events:
            self.add_events(span, events)
        child_span = self.start_span(child, child_attributes, seq=seq, parent=span, start_time=child_start)
        if child_error is not None:
            child_span.set_status(Status(StatusCode.ERROR, child_error))
        self.end_span(child_span)
        self.end_span(span)
        return child_span

    # ------------------------------------------------------------------ below full detail
    def hold(self, name: str, attributes: dict[str, Any], seq: int) -> None:
        """Keep a message event or unit closure as a span event for the next check span (``detail``
        below ``full``); ``attributes`` get the step (``prunegate.seq``) they happened at."""
        if seq > self.seq:
            self.seq = seq
        attributes[_SEQ] = seq
        cleaned = put_clean({}, attributes)
        self._held.append((name, self.clock(), cleaned))

    def hold_clean(self, name: str, attributes: dict[str, Any], seq: int) -> None:
        """:meth:`hold` for ``attributes`` already as the SDK stores them (no ``None``, sequences as
        tuples of str: :func:`~tracer.spans.direct.put_clean`'s output), kept as they are, in a held
        event (a plain tuple, :data:`tracer.contract.records.HeldEvent`: no OTel Event per event)."""
        if seq > self.seq:
            self.seq = seq
        attributes[_SEQ] = seq
        self._held.append((name, self.clock(), attributes))

    def take_held(self) -> tuple[HeldEvent, ...]:
        """The held events for the span being written (at most :data:`MAX_EVENTS`); older ones past
        that cap go first onto ``prunegate.messages`` spans of their own."""
        held = self._held
        if not held:
            return ()
        self._held = []
        while len(held) > MAX_EVENTS:
            chunk, held = held[:MAX_EVENTS], held[MAX_EVENTS:]
            self.emit(sn.MESSAGES, {}, seq=self.seq, start_time=chunk[0][E_TIME], events=tuple(chunk))
        return tuple(held)

    def add_events(self, span: trace.Span, events: Sequence[Event | HeldEvent]) -> None:
        """Add span events (from :meth:`take_held`) to an open span; a failing pipeline is counted."""
        try:
            if type(span) is DirectSpan:
                span.add_cleaned_events(events)
                return
            for e in events:
                name, timestamp, attributes = event_parts(e)
                span.add_event(name, attributes, timestamp)
        except Exception as exc:  # noqa: BLE001 - never reaches the agent
            self._tracer_failed(exc)

    def content(self, render: Any, *args: Any) -> str | None:
        """``render(*args, redact=hook)`` when capture is on; None when off or when redaction failed."""
        if not self.capture:
            return None
        try:
            return render(*args, redact=self.redact)
        except RedactionFailed as exc:
            self.redaction_failures += 1
            if self.redaction_failures == 1:
                _redact.log.warning("prunegate: content not recorded (warned once per session): %s", exc)
            return None

    # ------------------------------------------------------------------ evictions and their effects
    def note_eviction(self, span: trace.Span, removed: Iterable[tuple[str, Iterable[str]]], *,
                      check: int | None, decision: str) -> None:
        """Remember that the decision ``span`` removed these (message id, call ids) pairs."""
        cause = span if type(span) is EndedSpan else span.get_span_context()  # (an EndedSpan is a small handle)
        by_message, by_call = self._by_message, self._by_call
        ev = None
        for mid, call_ids in removed:
            ev = by_message[mid] = _new_eviction(Eviction, (cause, mid, check, decision))  # (no Python-level __new__)
            for cid in call_ids:
                by_call[cid] = ev
        if ev is not None:
            self._last_eviction = ev

    def cause_of(self, *, call_ids: Iterable[str] = (), message_ids: Iterable[str] = ()) -> Eviction | None:
        """The eviction that removed one of these messages or calls (latest wins), if any."""
        for mid in message_ids:
            if mid in self._by_message:
                return self._by_message[mid]
        for cid in call_ids:
            if cid in self._by_call:
                return self._by_call[cid]
        return None

    def violation(self, code: str, message: str, *, call_ids: Sequence[str] = (),
                  message_ids: Sequence[str] = (), index: int | None = None, seq: int | None = None,
                  cause: Eviction | None = None, attributes: Mapping[str, Any] | None = None,
                  parent: trace.Span | None = None) -> trace.Span:
        """Record a ``prunegate.violation`` linked to the eviction that caused it (found when not given),
        under ``parent`` (the ``chat`` span of the request it breaks) or the root."""
        if cause is None:
            cause = self.cause_of(call_ids=call_ids, message_ids=message_ids)
        if cause is None and code == FIRST_MESSAGE_NOT_USER:
            cause = self._last_eviction  # the head of the context left with the latest eviction
        links = [Link(cause.span_context, LINK_ATTRIBUTES)] if cause is not None else []
        self.violations += 1
        if self.metrics is not None:
            self.metrics.violation(code, self.gated, self.source, self.config.policy)
        return self.emit(sn.VIOLATION, {
            sn.VIOLATION_CODE: code,
            sn.VIOLATION_MESSAGE: message,
            sn.VIOLATION_IDS: list(call_ids),
            sn.VIOLATION_MESSAGE_IDS: list(message_ids),
            sn.VIOLATION_INDEX: index,
            sn.VIOLATION_EVICTED_ID: cause.message_id if cause else None,
            sn.VIOLATION_CAUSE_CHECK: cause.check if cause else None,
            _oi.CAUSE_SPAN: format(cause.span_context.span_id, "016x") if cause else None,
            _oi.CAUSE_TRACE: format(cause.span_context.trace_id, "032x") if cause else None,
            **(attributes or {}),
        }, seq=seq, links=links, error=message, parent=parent)  # status ERROR: backends list it among the failures

    def check_request(self, body: Any, provider: str, *, seq: int | None = None,
                      message_ids_of: Any = None, unrecorded: frozenset[str] = frozenset(),
                      parent: trace.Span | None = None) -> list[Violation]:
        """Validate a rendered request body; record one violation span per problem. Returns them.

        ``message_ids_of(call_ids) -> list[str]`` maps a violation's call ids to context message ids;
        ``unrecorded`` names rules the recording cannot meet (:func:`policies.validate.unrecorded`).
        """
        found = [v for v in validate(body, provider) if v.code not in unrecorded]
        for v in found:
            mids = list(message_ids_of(v.ids)) if message_ids_of is not None and v.ids else []
            self.violation(v.code, v.message, call_ids=v.ids, message_ids=mids, index=v.index, seq=seq,
                           parent=parent)
        if found:
            self._failures += 1
        return found

    def note_failure(self) -> None:
        """A request failed (invalid, or the provider answered an error): later repeats are retries."""
        self._failures += 1

    # ------------------------------------------------------------------ GenAI spans
    def chat(self, model: str | None, *, provider: str | None = None, seq: int | None = None,
             attributes: Mapping[str, Any] | None = None, start_time: int | None = None) -> ChatCall:
        """Open a ``chat {model}`` span (end it through the returned :class:`ChatCall`)."""
        return ChatCall(self, model, provider or self.provider, seq, attributes or {}, start_time)

    def tool(self, name: str, call_id: str, *, arguments: Any = None, side_effect: bool = False,
             seq: int | None = None) -> ToolCall:
        """An ``execute_tool {name}`` span as a context manager; flags a retry of a call that ran before."""
        retry, original = self._is_retry(name, call_id, arguments)
        call = ToolCall(self, name, call_id, arguments, side_effect, retry, seq)
        if retry and side_effect:
            ids = [original, call_id] if original != call_id else [call_id]
            self.violation("duplicated_side_effect",
                           f"side-effecting tool '{name}' ran again: call '{call_id}' repeats '{original}'",
                           call_ids=ids, seq=seq, cause=self.cause_of(call_ids=[original]))
        return call

    def _is_retry(self, name: str, call_id: str, arguments: Any) -> tuple[bool, str]:
        key = (name, _arguments_key(arguments))
        with self._lock:
            if call_id in self._ran_calls:
                return True, call_id
            self._ran_calls.add(call_id)
            before = self._ran_effects.get(key)
            self._ran_effects[key] = (call_id, self._failures) if before is None else before
        if before is not None and self._failures > before[1]:
            return True, before[0]
        return False, call_id

    # ------------------------------------------------------------------ end
    def note_arrival(self, role: str, text: str) -> None:
        """A message arrived (role, its text): the root's ``input.value``/``output.value`` come from
        these when content is captured (the first user text, the last answer)."""
        if self.capture and text:
            self._io.append((role, text))

    def end(self, attributes: Mapping[str, Any] | None = None) -> None:
        """End the root span (idempotent; also runs at interpreter exit)."""
        if self.ended:
            return
        self.ended = True
        try:
            atexit.unregister(self._atexit)
        except Exception:  # noqa: BLE001 - interpreter shutting down
            pass
        if self._held:  # what came after the last check span
            events = self.take_held()
            self.emit(sn.MESSAGES, {}, seq=self.seq, start_time=events[0][E_TIME], events=events)
        io = {_oi.INPUT_VALUE: self.content(lambda redact: _redact.safe_redact(_oi.first_user_text(self._io), redact)),
              _oi.OUTPUT_VALUE: self.content(lambda redact: _redact.safe_redact(_oi.last_answer_text(self._io), redact))}
        self.end_span(self.root, {sn.VIOLATIONS: self.violations, **io, **(attributes or {})})

    def __enter__(self) -> TracedSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()
