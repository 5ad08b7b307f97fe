"""Replay a recorded conversation through a policy, under the gate or the way naive runtimes do.

The conversation becomes an event stream (:mod:`tracer.traffic.events`); every append, open, delta and
close is followed by a budget check; every model call renders the context for the session's
provider and validates it, which is what would have been sent. Ungated, a
:class:`~policies.naive.NaiveRuntime` applies the policy's proposal to raw messages after every
append and, on an invalid request, retries the whole batch (re-issues every call of the last
assistant turn; the side-effecting ones are duplicated side effects). Gated, a
:class:`~policies.gate.Gate` decides; :class:`~policies.errors.HardCeilingExceeded` ends that
session as a failure.

A replay is recorded as a new traced session (root ``prunegate.session`` with source ``replay``)
through :class:`~tracer.spans.observer.SpanObserver` when a tracer provider is given; its metrics are
counted here either way (:class:`SessionResult`), so comparisons do not need to read traces back.
"""

from __future__ import annotations

import copy
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from policies import Context, MemorySpillStore, Runtime, build_runtime, get_policy
from policies.decision import Decision, DecisionKind
from policies.errors import EvictedMessageError, HardCeilingExceeded, PrunegateError
from policies.messages import TOOL_RESULT, Block, Message
from policies.observer import MultiObserver
from policies.validate import MISSING_TOOL_RESULT, ORPHAN_TOOL_RESULT, Violation, unrecorded, validate
from tracer.contract import names as sn
from tracer.lab import attribution, metrics
from tracer.lab.attribution import LostReference, RemovalTracker
from tracer.traffic.events import (
    APPEND,
    CLOSE,
    DELTA,
    MODEL_CALL,
    OPEN,
    TOOL,
    Event,
    EventStream,
    Reference,
    build_events,
)
from tracer.traffic.importers import Conversation

if TYPE_CHECKING:
    from tracer.spans.genai import ChatCall

DEFAULT_BUDGET_SHARE = 0.6  # no --budget: prune at 60% of the session's full size
DEFERRAL_REASONS = metrics.DEFERRAL_REASONS
LOST_STREAM_HEAD = "lost_stream_head"


@dataclass(frozen=True)
class ReplaySpec:
    """How to replay: which policy (and parameters), gated or not, budget, ceiling, arrival order.

    ``budget`` None means :data:`DEFAULT_BUDGET_SHARE` of each session's full token count.
    ``label`` names the arm in comparisons (default: the policy name, with its parameters).
    ``detail`` is how much a traced replay records: ``full`` (every message event a span, the
    default here: what ``prunegate replay`` stores for stepping through), ``checks`` or ``decisions``.
    """

    policy: str
    params: tuple[tuple[str, Any], ...] = ()
    gated: bool = True
    budget: int | None = None
    hard_ceiling: int | None = None
    stream_results: int = 0
    seed: int | None = None
    mode: str = "grow"
    label: str | None = None
    detail: str = "full"  # how much the replay records (docs/spans.md "Detail levels"); not part of the arm
    rerun_of: str | None = None  # the replay this one re-runs at another detail (tracer.lab.rerun); not the arm

    def __post_init__(self) -> None:
        """Refuse impossible numbers before any session is replayed (not part way through)."""
        from tracer.spans.session import check_detail

        check_detail(self.detail)
        for name in ("budget", "hard_ceiling"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        if self.budget is not None and self.hard_ceiling is not None and self.hard_ceiling < self.budget:
            raise ValueError(f"hard_ceiling ({self.hard_ceiling}) must be at least the budget ({self.budget})")

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        if not self.params:
            return self.policy
        return self.policy + "@" + "@".join(f"{k}={v}" for k, v in self.params)

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass
class SessionResult:
    """What one replay of one session measured (see docs/replay.md for each definition)."""

    source_id: str | None
    name: str
    policy: str
    gated: bool
    budget: int
    replay_id: str | None = None
    events: int = 0
    model_calls: int = 0
    invalid_requests: int = 0
    orphan_results: int = 0
    dangling_calls: int = 0
    duplicated_side_effects: int = 0
    tokens_sent: int = 0
    peak_tokens: int = 0
    prunes: int = 0
    deferrals: int = 0
    spills: int = 0
    reinjects: int = 0
    failures: int = 0
    references: int = 0
    retained: int = 0
    lost_stream_heads: int = 0
    error: str | None = None
    seconds: float = 0.0
    # every lost reference, charged to the decision that removed its source (tracer.lab.attribution)
    lost_references: list[LostReference] = field(default_factory=list)
    # per model call: (input tokens, tokens of the prefix shared with the previous request, output
    # tokens of the message it produced); tracer.lab.cost turns them into money
    calls: list[tuple[int, int, int]] = field(default_factory=list)
    cost: float | None = None  # set by tracer.lab.cost.price_results (None: the model has no price)

    @property
    def retention(self) -> float | None:
        return self.retained / self.references if self.references else None

    @property
    def first_lost_step(self) -> int | None:
        """The step (prunegate.seq) of the first model call that had lost a reference."""
        return self.lost_references[0].step if self.lost_references else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["retention"] = self.retention
        d["lost_references"] = [x.to_dict() for x in self.lost_references]
        d["first_lost_step"] = self.first_lost_step
        return d

    def comparable_dict(self) -> dict[str, Any]:
        """What two runs of the same replay must agree on (same seed, or another engine or worker
        count): :meth:`to_dict` without the replay's id, its timing and the pruning spans' ids
        (which exist only when the replay is traced)."""
        d = {k: v for k, v in self.to_dict().items() if k not in ("replay_id", "seconds")}
        d["lost_references"] = [{k: v for k, v in x.items() if k != "prune_span_id"} for x in d["lost_references"]]
        return d


def full_tokens(conv: Conversation) -> int:
    """The token count of the whole conversation held in one context (no pruning)."""
    ctx = Context(provider=conv.provider, strict=False)
    for m in conv.messages:
        ctx.append(m.shallow_copy())
    return ctx.tokens


def budget_for(conv: Conversation, spec: ReplaySpec) -> int:
    """The spec's budget, else a share of the session's size (never above the spec's hard ceiling)."""
    if spec.budget is not None:
        return spec.budget
    budget = max(1, int(full_tokens(conv) * DEFAULT_BUDGET_SHARE))
    return budget if spec.hard_ceiling is None else min(budget, spec.hard_ceiling)


def events_for(conv: Conversation, spec: ReplaySpec) -> EventStream:
    """The event stream a spec asks for (arrival order, streaming) of one conversation."""
    return build_events(
        conv.messages, conv.provider, shuffle_seed=spec.seed, stream_chunks=spec.stream_results,
        streamed_calls=conv.streamed_calls, side_effect_tools=conv.side_effect_tools,
        ambient_text=ambient_text(conv.request_extra),
    )


def ambient_text(request_extra: dict[str, Any]) -> str:
    """Text always present in the request besides messages (tool definitions): never a reference."""
    tools = request_extra.get("tools")
    if not tools:
        return ""
    import json

    return json.dumps(tools, ensure_ascii=False)


def replay_session(
    conv: Conversation,
    spec: ReplaySpec,
    *,
    tracer_provider: Any = None,
    capture_content: bool = False,
    stream: EventStream | None = None,
) -> SessionResult:
    """Replay one conversation; record it as a traced session when ``tracer_provider`` is given."""
    from tracer.traffic.jsonparse import deep_enough

    with deep_enough():  # recorded tool inputs may nest a few thousand levels
        return _replay_session(conv, spec, tracer_provider, capture_content, stream)


def _replay_session(conv: Conversation, spec: ReplaySpec, tracer_provider: Any, capture_content: bool,
                    stream: EventStream | None) -> SessionResult:
    started = time.perf_counter()
    budget = budget_for(conv, spec)
    if stream is None:
        stream = events_for(conv, spec)
    result = SessionResult(conv.session_id, conv.name, spec.name, spec.gated, budget)
    run = _Run(conv, spec, budget, stream, result, tracer_provider, capture_content)
    try:
        run.play()
    finally:
        result.seconds = time.perf_counter() - started
    return result


class _Run:
    """One replay in progress: the context, the runtime, the tracing and the counters."""

    def __init__(self, conv: Conversation, spec: ReplaySpec, budget: int, stream: EventStream,
                 result: SessionResult, tracer_provider: Any, capture: bool) -> None:
        self.conv, self.spec, self.stream, self.r = conv, spec, stream, result
        self.session = None
        spans = None
        replay_id = "replay-" + uuid.uuid4().hex[:16]
        if tracer_provider is not None:
            from tracer.spans.observer import SpanObserver
            from tracer.spans.session import SessionConfig, TracedSession

            self.session = TracedSession(tracer_provider, SessionConfig(
                session_id=replay_id, source="replay", name=conv.name, provider=conv.provider,
                policy=spec.policy, policy_params=spec.param_dict, gated=spec.gated, budget=budget,
                hard_ceiling=spec.hard_ceiling, capture_content=capture, source_id=conv.session_id,
                attributes={sn.REPLAY_LABEL: spec.name, sn.REPLAY_SEED: spec.seed,
                            sn.REPLAY_STREAM_RESULTS: spec.stream_results, sn.REPLAY_MODE: spec.mode,
                            sn.REPLAY_RERUN_OF: spec.rerun_of, sn.GEN_AI_REQUEST_MODEL: conv.model},
                detail=spec.detail,
            ))
            spans = SpanObserver(self.session, hold_decisions=True)  # a prune's lost references come later
        self.spans = spans
        self.removals = RemovalTracker(spans)
        observer = MultiObserver(spans, self.removals) if spans is not None else self.removals
        result.replay_id = replay_id
        self.ctx = Context(observer=observer, strict=spec.gated, provider=conv.provider,
                           request_extra=dict(conv.request_extra), session_id=replay_id)
        policy = get_policy(spec.policy, **spec.param_dict)
        spill = MemorySpillStore() if spec.gated and spec.hard_ceiling is not None else None
        self.runtime: Runtime = build_runtime(policy, budget, gated=spec.gated, hard_ceiling=spec.hard_ceiling,
                                              mode=spec.mode, spill_store=spill)
        self.appended: dict[str, Message] = {}
        self.alias: dict[str, str] = {}  # evicted stream -> the message its tail went into
        self.summaries: list[str] = []
        self.orphans: set[str] = set()
        self.dangling: set[str] = set()
        self.inputs = {b.id: b.input for m in conv.messages for b in m.blocks if b.call_id is not None}
        self.unrecorded = unrecorded(conv.messages)  # rules the recording itself cannot meet
        templates = [e.message for e in stream.events if e.message is not None]
        self.tools = attribution.tool_names(templates)
        self.templates = {m.id: m for m in templates}
        self.prev_request: list[tuple[str, int]] = []
        # The tree (docs/spans.md "Replay timing and tree"): a request's ``chat`` span opens at the
        # first check after the previous model call, and that request's checks are its children.
        self.chat: ChatCall | None = None
        self.calls_left = sum(1 for e in stream.events if e.kind == MODEL_CALL)

    # ------------------------------------------------------------------ the loop
    def play(self) -> None:
        r, ctx = self.r, self.ctx
        try:
            for ev in self.stream.events:
                r.events += 1
                kind = ev.kind
                if kind == APPEND or kind == OPEN:
                    msg = _fresh(ev.message, deep=kind == OPEN)  # type: ignore[arg-type]  # APPEND/OPEN events carry a message
                    ctx.append(msg, closed=kind == APPEND)
                    self.appended[msg.id] = msg
                    self._check()
                elif kind == DELTA:
                    self._delta(ev)
                    self._check()
                elif kind == CLOSE:
                    mid = self.alias.get(ev.message_id or "", ev.message_id or "")
                    if mid in ctx:
                        ctx.close(mid)
                    self._check()
                elif kind == TOOL:
                    self._tool(ev, retry=False)
                elif kind == MODEL_CALL:
                    self._model_call(ev)
                if ctx.tokens > r.peak_tokens:
                    r.peak_tokens = ctx.tokens
        except HardCeilingExceeded as exc:
            r.failures = 1
            r.error = f"hard ceiling: {exc}"
            if exc.decision is not None:
                self._count(exc.decision)
        except (PrunegateError, ValueError) as exc:
            r.failures = 1
            r.error = f"{type(exc).__name__}: {exc}"
            if self.session is not None:
                self.session.violation("replay_failed", r.error, seq=ctx.seq,
                                       parent=self.chat.span if self.chat is not None else None)
        finally:
            r.orphan_results = len(self.orphans)
            r.dangling_calls = len(self.dangling)
            if ctx.tokens > r.peak_tokens:
                r.peak_tokens = ctx.tokens
            if self.session is not None:
                from opentelemetry.trace import Status, StatusCode

                chat, self.chat = self.chat, None
                if chat is not None:  # the gate failed before this request went out: no model call
                    chat.span.update_name(sn.UNSENT_REQUEST)
                    chat.set_attributes({sn.GEN_AI_OPERATION_NAME: "none", sn.OI_SPAN_KIND: "CHAIN"})
                    chat.span.set_status(Status(StatusCode.ERROR, r.error or "failed"))
                    chat.end()
                if r.failures:
                    self.session.root.set_status(Status(StatusCode.ERROR, r.error or "failed"))
                self._end_held()
                self.session.end({
                    sn.REPLAY_FAILED: bool(r.failures),
                    sn.REPLAY_ERROR: r.error,
                    **metrics.root_attributes(r),  # what a reader of the store compares (tracer.lab.metrics)
                })

    def _check(self) -> None:
        if self.ctx.tokens > self.r.peak_tokens:  # the peak counts the context before a check prunes it
            self.r.peak_tokens = self.ctx.tokens
        spans = self.spans
        if spans is not None:
            self._open_chat()
            spans.begin_check()
        self._count(self.runtime.check(self.ctx))

    def _open_chat(self) -> None:
        """Open the ``chat`` span of the next request (if one follows) for the checks that gate it."""
        if self.chat is None and self.calls_left > 0 and self.session is not None and self.spans is not None:
            self.chat = self.session.chat(self.conv.model, provider=self.conv.provider, seq=self.ctx.seq)
            self.spans.parent = self.chat.span

    def _count(self, d: Decision) -> None:
        r = self.r
        kind = d.kind
        if kind == DecisionKind.PRUNED:
            r.prunes += 1
        elif kind == DecisionKind.DEFERRED:
            r.deferrals += 1
        elif kind in (DecisionKind.SPILLED, DecisionKind.FAILED) and d.reason.startswith(DEFERRAL_REASONS):
            r.deferrals += 1
        if d.summary_id:
            self.summaries.append(d.summary_id)
        r.spills += len(d.spilled_units)
        r.reinjects += len(d.reinjected_units)

    # ------------------------------------------------------------------ streams
    def _delta(self, ev: Event) -> None:
        ctx = self.ctx
        mid = self.alias.get(ev.message_id or "", ev.message_id or "")
        try:
            ctx.append_delta(mid, ev.text)
        except EvictedMessageError:
            if self.spec.gated:
                raise
            # What a naive runtime does: the stream keeps writing; its tail becomes a new message
            # for the same call, the head is gone and nothing raises.
            tail = Message(id=f"{mid}+", role="tool",
                           blocks=[Block(TOOL_RESULT, tool_use_id=ev.call_id, content=ev.text)], closed=False)
            ctx.append(tail, closed=False)
            self.alias[ev.message_id or ""] = tail.id
            self.r.lost_stream_heads += 1
            if self.session is not None:
                self.session.violation(
                    LOST_STREAM_HEAD,
                    f"stream for tool call '{ev.call_id}' kept writing after message '{mid}' was evicted; "
                    "the result lost its head",
                    call_ids=[ev.call_id or ""], message_ids=[mid], seq=ctx.seq)

    # ------------------------------------------------------------------ tools and model calls
    def _tool(self, ev: Event, *, retry: bool) -> None:
        if retry and ev.side_effect:
            self.r.duplicated_side_effects += 1
        if self.session is not None:
            with self.session.tool(ev.tool_name or "", ev.call_id or "", arguments=self.inputs.get(ev.call_id),
                                   side_effect=ev.side_effect, seq=self.ctx.seq):
                pass

    def _model_call(self, ev: Event) -> None:
        ctx, r, provider = self.ctx, self.r, self.conv.provider
        body = ctx.render(provider)
        r.model_calls += 1
        self.calls_left -= 1
        r.tokens_sent += ctx.tokens
        request = [(m.id, m.tokens) for m in ctx.iter_messages()]
        produced = self.templates.get(ev.message_id or "")
        r.calls.append((ctx.tokens, _shared_prefix(self.prev_request, request),
                        ctx.counter.count(produced) if produced is not None else 0))
        self.prev_request = request
        refs = self.stream.references.get(ev.message_id or "", ())
        lost = []
        for ref in refs:
            r.references += 1
            if self._available(ref):
                r.retained += 1
            else:
                lost.append(attribution.lost_reference(ctx.seq, ref.referrer, ref.source, ref.tokens,
                                                       self.tools.get(ref.source),
                                                       self.removals.by_message.get(ref.source)))
        r.lost_references.extend(lost)
        if self.session is not None and self.spans is not None:
            if self.chat is None:
                self.calls_left += 1  # this call is still to come: open its span now
                self._open_chat()
                self.calls_left -= 1
            chat, self.chat = self.chat, None
            self.spans.parent = None
            assert chat is not None  # opened just above
            chat.set_attributes({
                sn.SEQ: ctx.seq,
                sn.REQUEST_TOKENS: ctx.tokens,
                sn.REQUEST_MESSAGE_IDS: [mid for mid, _ in request],
                sn.REQUEST_VALID: True,
                sn.GEN_AI_USAGE_INPUT_TOKENS: ctx.tokens,
                **attribution.chat_attributes(len(refs), lost),
            })
            chat.set_input(list(ctx.iter_messages()))  # gen_ai.input.messages, when content is captured
            found = self.session.check_request(body, provider, seq=ctx.seq, message_ids_of=self._message_ids_of,
                                               unrecorded=self.unrecorded, parent=chat.span)
            if found:
                chat.set_invalid(found)
            chat.end()
        else:
            found = [v for v in validate(body, provider) if v.code not in self.unrecorded]
        if not found:
            return
        r.invalid_requests += 1
        self._note(found)
        if not self.spec.gated:  # the naive retry: re-issue the whole last batch
            for call_id in ev.call_ids:
                tool_ev = self._tool_event(call_id)
                if tool_ev is not None:
                    self._tool(tool_ev, retry=True)

    def _note(self, found: list[Violation]) -> None:
        for v in found:
            if v.code == ORPHAN_TOOL_RESULT:
                self.orphans.update(v.ids)
            elif v.code == MISSING_TOOL_RESULT:
                self.dangling.update(v.ids)

    def _tool_event(self, call_id: str) -> Event | None:
        cache = self.__dict__.setdefault("_tool_events", {
            e.call_id: e for e in self.stream.events if e.kind == TOOL})
        return cache.get(call_id)

    def _message_ids_of(self, call_ids: Any) -> list[str]:
        wanted = set(call_ids)
        return [m.id for m in self.ctx.iter_messages() if wanted & set(m.call_ids + m.answered_ids)]

    def _end_held(self) -> None:
        """End the held decision spans, each with the references lost because it removed their source."""
        if self.spans is None:
            return
        by_span: dict[str, list[LostReference]] = {}
        for x in self.r.lost_references:
            if x.prune_span_id:
                by_span.setdefault(x.prune_span_id, []).append(x)
        self.spans.end_held(lambda span: attribution.decision_attributes(
            by_span.get(attribution.span_id_of(span) or "", ())))

    # ------------------------------------------------------------------ retention
    def _available(self, ref: Reference) -> bool:
        ctx = self.ctx
        for h in ref.holders:
            if h not in ctx:
                continue
            msg = ctx.message(h)
            if msg is self.appended.get(h):  # unchanged since it arrived: it holds the value
                return True
            if _holds(msg, ref.tokens):
                return True
        for sid in self.summaries:
            if sid in ctx and _holds(ctx.message(sid), ref.tokens):
                return True
        return False


def _fresh(template: Message, *, deep: bool) -> Message:
    """A message to append: a new object (the context sets its seq and tokens) sharing the template's
    blocks when it arrives closed (nothing writes into a closed message's blocks), copying them when
    it arrives open (deltas write into them)."""
    msg = copy.copy(template)
    msg.blocks = [b.copy() for b in template.blocks] if deep else list(template.blocks)
    msg.extra = dict(template.extra)
    return msg


def _shared_prefix(before: list[tuple[str, int]], now: list[tuple[str, int]]) -> int:
    """Tokens of the leading messages two requests share unchanged (id and size): what a provider's
    prefix cache could serve."""
    total = 0
    for a, b in zip(before, now):  # noqa: B905 - requests differ in length
        if a != b:
            break
        total += b[1]
    return total


def _holds(msg: Message, tokens: tuple[str, ...]) -> bool:
    text = msg.plain_text().lower()
    return any(t in text for t in tokens)
