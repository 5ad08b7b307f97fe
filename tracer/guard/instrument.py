"""Production API: put the gate in front of an existing agent loop in a few lines.

::

    from tracer.guard.instrument import PruneGuard

    pg = PruneGuard(policy="salience", budget=60_000, hard_ceiling=90_000,
                    provider="anthropic", store="./prunegate-store")
    while True:
        body = pg.gate({"model": ..., "max_tokens": ..., "system": ..., "tools": ..., "messages": history})
        try:
            response = client.messages.create(**body)
        except anthropic.BadRequestError as exc:
            pg.record_response(error=exc)
            raise
        pg.record_response(response)
        history.append(assistant_message(response, "anthropic"))
        for call in tool_calls(response, "anthropic"):
            with pg.tool(call.name, call.id, arguments=call.arguments):
                ...

The agent keeps its full history and sends it all every time; the guard keeps the *gated*
context. It fingerprints the incoming messages, appends only the new suffix to its context (so a
message it pruned stays pruned), runs one budget check, and returns the body to send: the same
request keys, the gated messages. Everything is traced (docs/spans.md). A changed system prompt
is rewritten in place; if anything else in the history changes (the agent rewrote or trimmed it
itself) the guard starts a new session from that body. The guard never breaks the agent: if it cannot understand a body it logs, counts the
error and returns the body unchanged; the one loud exception is
:class:`~policies.errors.HardCeilingExceeded` when a hard ceiling was asked for and cannot hold.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Status, StatusCode

from policies import convert
from policies.context import Context
from policies.decision import Decision
from policies.errors import HardCeilingExceeded, PolicyError, SettingsError
from policies.limits import check_limits
from policies.messages import Message
from policies.policy import Policy
from policies.registry import get_policy
from policies.runtime import Runtime, build_runtime
from policies.spill import MemorySpillStore, SpillStore
from policies.tokens import TokenCounter, counter_for
from policies.validate import Violation
from tracer.contract import names as sn
from tracer.guard import _history
from tracer.guard.tracing import flush_if_owned, guard_tracer_provider, tracing_stats
from tracer.spans.genai import ChatCall, ToolCall, plain
from tracer.spans.metrics import resolve as resolve_metrics
from tracer.spans.observer import SpanObserver
from tracer.spans.redact import Redactor
from tracer.spans.session import SessionConfig, TracedSession, check_detail, sampled_detail
from tracer.store.text import scrub

log = logging.getLogger(sn.SCOPE)
PROVIDERS = (convert.ANTHROPIC, convert.OPENAI)
REWRITTEN = "history rewritten"  # the removal cause when a keyed conversation's framework rewrote its history
# what belongs to one conversation; the guard holds the current one's in these attributes, the others parked
_PER_CONVERSATION = ("_session", "_context", "runtime", "observer", "_fps", "_ids", "_out", "_chat", "_root",
                     "_next_session_id", "_requests", "_rewrites")


class PruneGuard:
    """The gate, a context and a traced session for one conversation of a production agent.

    ``policy`` is a policy name (``policy_params`` are its parameters) or a policy object.
    ``store`` is a trace store directory (spans go there through the store pipeline) and
    ``otlp_endpoint`` an OTLP/HTTP collector (either or both); or pass a ``tracer_provider`` of
    your own; none of them: the global tracer provider.
    ``gated=False`` runs the naive runtime instead of the gate (to measure what the gate prevents).
    ``side_effects`` names the tools (or a predicate) whose repetition is a duplicated side effect.
    ``budget`` is held against the whole request (``count_request=False``: the messages only) in
    ``token_counter``'s tokens (default: :func:`policies.tokens.counter_for` the provider and the
    model of the session's first request (harmony framing for gpt-5, the o-series and gpt-oss): exact for
    OpenAI with the ``tokens`` extra, calibrated for Anthropic). The session starts with the first
    request: a guard that is never used records nothing. Metrics (docs/metrics.md) go to
    ``meter_provider``, or a Prometheus endpoint on ``metrics_port`` (127.0.0.1), or the global meter
    provider when one is set up. ``detail`` is how much each session records (docs/spans.md "Detail
    levels": ``checks`` by default, ``decisions`` or ``full``); ``sample_rate`` keeps that detail for
    that share of sessions, chosen when each starts, and records the others at ``decisions`` (every
    decision span is kept). Framework adapters
    (:mod:`policies.adapters`, docs/frameworks.md) call :meth:`gate_messages`.

    One guard can serve many conversations at once: a request given a ``conversation`` key (the
    framework's own identity of it: a LangGraph thread id, an Agents SDK group id) goes to that
    conversation's own context and session, and a history the framework rewrote under the same key
    (a summary middleware) is rebuilt in the same session. Without a key, requests share one
    conversation, and a history that stops being append-only starts a new session.
    """

    def __init__(
        self,
        policy: str | Policy = "recency",
        budget: int = 100_000,
        hard_ceiling: int | None = None,
        *,
        provider: str = convert.ANTHROPIC,
        store: str | Path | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        otlp_endpoint: str | None = None,
        policy_params: Mapping[str, Any] | None = None,
        mode: str = "grow",
        gated: bool = True,
        spill_store: SpillStore | None = None,
        capture_content: bool | None = None,
        redact: Redactor | None = None,
        session_id: str | None = None,
        session_name: str | None = None,
        token_counter: TokenCounter | None = None,
        side_effects: Collection[str] | Callable[[str], bool] | None = None,
        count_request: bool = True,
        meter_provider: MeterProvider | None = None,
        metrics_port: int | None = None,
        detail: str = "checks",
        sample_rate: float = 1.0,
    ) -> None:
        if provider not in PROVIDERS:
            raise SettingsError(f"PruneGuard: provider must be one of {', '.join(PROVIDERS)}; got {provider!r}")
        check_limits(budget, hard_ceiling, mode, where="PruneGuard")
        self.provider = provider
        self.policy_params = dict(policy_params or {})
        self.policy = get_policy(policy, **self.policy_params) if isinstance(policy, str) else policy
        if not isinstance(self.policy, Policy):
            raise PolicyError(f"{policy!r} is not a policy: it needs a 'name' and a 'propose(view)' method")
        self.budget = budget
        self.hard_ceiling = hard_ceiling
        self.mode = mode
        self.gated = gated
        self.spill_store = spill_store if spill_store is not None else (MemorySpillStore() if hard_ceiling else None)
        self.capture_content = capture_content
        self.redact = redact
        self.session_name = session_name
        self.token_counter = token_counter if token_counter is not None else counter_for(provider)
        self._counter_by_model = token_counter is None  # the first request's model picks framing, encoding, image rule
        self.count_request = count_request
        self._side_effects = side_effects
        self.tracer_provider, self._owns_provider = guard_tracer_provider(store, tracer_provider, otlp_endpoint)
        self.metrics = resolve_metrics(meter_provider, metrics_port)
        self.detail = check_detail(detail)
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError(f"sample_rate must be between 0 and 1; got {sample_rate!r}")
        self.sample_rate = sample_rate
        self._lock = threading.RLock()
        self._chat: ChatCall | None = None
        self.errors = 0  # bodies passed through unchanged because the guard could not handle them
        self.last_error: str | None = None
        self.last_decision: Decision | None = None
        self.last_violations: list[Violation] = []
        self.requests = 0  # requests gated, over every conversation
        self.text_replaced = 0  # code points of the bodies that were not valid Unicode (lone surrogates)
        self._next_session_id = session_id or uuid.uuid4().hex
        self._root: dict[str, Any] = {}
        self._session: TracedSession | None = None  # started by the first request: an unused guard records nothing
        self._requests = 0  # ... of the current conversation's session
        self._rewrites = 0
        self._key: str | None = None  # the current conversation's key (None: the default conversation)
        self._parked: dict[str | None, dict[str, Any]] = {}  # the other conversations' state

    # ------------------------------------------------------------------ lifecycle
    @property
    def session(self) -> TracedSession:
        if self._session is None:
            self._start()
        assert self._session is not None
        return self._session

    @property
    def context(self) -> Context:
        self.session  # noqa: B018 - starts the session on first use
        return self._context

    def _start(self) -> None:
        session_id, self._next_session_id = self._next_session_id, uuid.uuid4().hex
        root, self._root = self._root, {}
        self._session = TracedSession(self.tracer_provider, SessionConfig(
            session_id=session_id, source="live", name=self.session_name,
            provider=self.provider, policy=self.policy.name, policy_params=self.policy_params,
            gated=self.gated, budget=self.budget, hard_ceiling=self.hard_ceiling,
            capture_content=self.capture_content, redact=self.redact, attributes=root, metrics=self.metrics,
            detail=sampled_detail(self.detail, self.sample_rate),
        ))
        self.observer = SpanObserver(self._session)
        self._context = Context(observer=self.observer, strict=self.gated, provider=self.provider,
                                session_id=self._session.session_id, token_counter=self.token_counter,
                                count_request=self.count_request)
        if self.metrics is not None:
            self._context.observer_errors.on_error = self._observer_failed
        self.runtime: Runtime = build_runtime(self.policy, self.budget, gated=self.gated,
                                              hard_ceiling=self.hard_ceiling, mode=self.mode,
                                              spill_store=self.spill_store)
        self._fps: list[str] = []  # fingerprints of the history items absorbed so far
        self._ids: list[str] = []  # their message ids in the context
        self._out: tuple[list[str], list[str]] = ([], [])  # fingerprints and ids of what the last request sent
        self._requests = self._rewrites = 0

    @property
    def session_id(self) -> str:
        """The current session's id (known before the first request starts it)."""
        return self._session.session_id if self._session is not None else self._next_session_id

    @property
    def conversations(self) -> dict[str | None, str]:
        """Each conversation key the guard has served (None: requests without one) -> its session id."""
        with self._lock:
            out = {k: st["_session"].session_id for k, st in self._parked.items() if st["_session"] is not None}
            if self._session is not None:
                out[self._key] = self._session.session_id
            return out

    def _switch(self, key: str | None) -> None:
        """Make ``key``'s conversation the current one; the current one's state is parked."""
        if key is not None and not isinstance(key, str):
            key = str(key)
        if key == self._key:
            return
        self._parked[self._key] = {a: getattr(self, a, None) for a in _PER_CONVERSATION}
        state = self._parked.pop(key, None)
        if state is None:
            state = dict.fromkeys(_PER_CONVERSATION)
            state.update(_root={sn.SESSION_KEY: key} if key is not None else {},
                         _next_session_id=uuid.uuid4().hex, _requests=0, _rewrites=0)
        for attr, value in state.items():
            setattr(self, attr, value)
        self._key = key

    def close(self) -> None:
        """End the open model calls and the sessions; flush the store pipeline the guard set up."""
        with self._lock:
            for key in [*self._parked, self._key]:
                self._switch(key)
                self._end_chat()
                if self._session is not None:
                    end = {sn.REQUESTS: self._requests, sn.GUARD_ERRORS: self.errors,
                           sn.TEXT_REPLACED: self.text_replaced or None}
                    if self._key is not None:
                        end[sn.SESSION_REWRITES] = self._rewrites
                    self._session.end(end)
        flush_if_owned(self.tracer_provider, self._owns_provider)

    def __enter__(self) -> PruneGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the request path
    def gate(self, body: Any, *, conversation: str | None = None) -> dict[str, Any]:
        """The body to send instead of ``body``: same request keys, the gated messages.

        ``conversation`` keys the conversation (see the class). Raises :class:`HardCeilingExceeded`
        when the hard ceiling cannot hold; any other trouble is logged, counted (:attr:`errors`),
        traced (a ``prunegate.passthrough`` span) and ``body`` is returned unchanged.
        """
        with self._lock:
            try:
                self._switch(conversation)
                self._end_chat()
                return self._gate(body)
            except HardCeilingExceeded:
                raise
            except Exception as exc:  # noqa: BLE001 - the guard must never break the agent
                self.passed_through(exc, "gate")
                return body if isinstance(body, dict) else plain(body)

    def _gate(self, body: Any) -> dict[str, Any]:
        if _history.is_responses_body(body):
            return self._gate_responses(body if isinstance(body, dict) else plain(body))
        items, rest = _history.split_body(body, self.provider)
        try:
            fps = [_history.fingerprint(item) for item in items]
        except UnicodeEncodeError:  # lone surrogates: the body is sent (and recorded) with U+FFFD instead
            items, replaced = scrub(items)
            rest, more = scrub(rest)
            self.text_replaced += replaced + more
            fps = [_history.fingerprint(item) for item in items]
        self._absorb(items, fps, rest, lambda new, at: _history.to_messages(new, self.provider, offset=at))
        out = self.context.render(self.provider)
        sent, _ = _history.split_body(out, self.provider)
        self._out = ([_history.fingerprint(i) for i in sent], self._sent_ids())
        self._open_chat(out, self.last_decision)
        return out

    def _gate_responses(self, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI Responses API body: its ``input`` items gated as units (docs/gate.md), every other
        key (instructions, tools, previous_response_id, context_management, ...) sent as it came."""
        messages, rest = convert.from_responses(body)
        try:
            fps = [_history.message_fingerprint(m) for m in messages]
        except UnicodeEncodeError:  # lone surrogates: the body is sent (and recorded) with U+FFFD instead
            body, replaced = scrub(body)
            self.text_replaced += replaced
            messages, rest = convert.from_responses(body)
            fps = [_history.message_fingerprint(m) for m in messages]
        self._absorb(messages, fps, rest, lambda new, at: new)
        sent = list(self.context.iter_messages())
        self._out = ([_history.message_fingerprint(m) for m in sent], [m.id for m in sent])
        out = self.context.render(convert.RESPONSES)
        self._open_chat(out, self.last_decision, convert.RESPONSES)
        return out

    def gate_messages(self, messages: Sequence[Message], extra: Mapping[str, Any] | None = None, *,
                      conversation: str | None = None) -> list[Message]:
        """The gated messages to send instead of ``messages`` (the framework adapters' entry point).

        ``messages`` is the whole history as :class:`~policies.messages.Message` objects (from a
        converter in :mod:`policies.adapters`), ``extra`` the request's other keys (tools,
        instructions). Returns copies of the context's messages, rewrites and summaries included.
        ``conversation`` keys the conversation (see the class). Like :meth:`gate`, it never breaks
        the agent: on trouble it logs, counts, traces and returns ``messages`` unchanged;
        :class:`HardCeilingExceeded` is the one exception it raises.
        """
        with self._lock:
            try:
                self._switch(conversation)
                self._end_chat()
                items = list(messages)
                fps = [_history.message_fingerprint(m) for m in items]
                self._absorb(items, fps, dict(extra or {}), lambda new, at: [m.copy() for m in new])
                sent = [m.copy() for m in self.context.iter_messages()]
                self._out = ([_history.message_fingerprint(m) for m in sent], [m.id for m in sent])
                self._open_chat(self.context.render(self.provider), self.last_decision)
                return sent
            except HardCeilingExceeded:
                raise
            except Exception as exc:  # noqa: BLE001 - the guard must never break the agent
                self.passed_through(exc, "gate_messages")
                return list(messages)

    def _observer_failed(self, exc: BaseException) -> None:
        if self.metrics is not None:
            self.metrics.error("observer")

    def passed_through(self, exc: BaseException, where: str) -> None:
        """Count, log (WARNING) and trace a request sent unchanged because it could not be handled.

        The guard calls it for a body it cannot read; framework adapters call it for a history they
        cannot convert (``where`` names them). Never raises.
        """
        with self._lock:
            self.errors += 1
            if self.metrics is not None:
                self.metrics.pass_through(exc)
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("prunegate guard (%s): passing the request through unchanged (%d so far): %s",
                        where, self.errors, self.last_error)
            attrs = {sn.GUARD_ERROR: self.last_error, sn.GUARD_WHERE: where}
            try:
                self.session.emit(sn.PASSTHROUGH, attrs, seq=self.context.seq, error=self.last_error)
            except Exception:  # noqa: BLE001 - the session itself could not start: a span of its own
                try:
                    span = self.tracer_provider.get_tracer(sn.SCOPE).start_span(
                        sn.PASSTHROUGH, attributes={**attrs, sn.SESSION_ID: self.session_id})
                    span.set_status(Status(StatusCode.ERROR, self.last_error))
                    span.end()
                except Exception as exc2:  # noqa: BLE001 - tracing never breaks the agent
                    log.warning("prunegate guard: could not trace the pass-through: %r", exc2)

    def _sent_ids(self) -> list[str]:
        """Context ids in the order :meth:`render` sends them (an Anthropic system prompt first)."""
        msgs = list(self.context.iter_messages())
        if self.provider == convert.ANTHROPIC:
            systems = [m.id for m in msgs if m.role in ("system", "developer")]
            return systems[:1] + [m.id for m in msgs if m.role not in ("system", "developer")]
        return [m.id for m in msgs]

    def _absorb(self, items: list[Any], fps: list[str], rest: dict[str, Any],
                to_messages: Callable[[list[Any], int], list[Message]]) -> None:
        """Append what is new in ``items`` to the context and run one budget check.

        New is what follows either the history seen so far or what the guard last sent (a
        framework that writes the gated history back into its state sends that next time).
        """
        self.session  # noqa: B018 - the first request starts the session
        n = len(self._fps)
        sent_fps, sent_ids = self._out
        if fps[:n] != self._fps and sent_fps and fps[:len(sent_fps)] == sent_fps \
                and all(i in self.context for i in sent_ids):
            self._fps, self._ids = list(sent_fps), list(sent_ids)
            n = len(self._fps)
        elif fps[:n] != self._fps and not self._rewrite_system(items, fps):
            if self._key is not None:
                # the framework rewrote its own history (a summary, a removal): same conversation, same
                # session; the context is rebuilt from the new history and the gate checks it afresh
                self._rewrites += 1
                log.info("prunegate guard: conversation %r rewrote its history at item %d; rebuilding the context",
                         self._key, _history.first_difference(fps, self._fps))
                self.context.remove_messages([m.id for m in self.context.iter_messages()], cause=REWRITTEN)
                self._fps, self._ids = [], []
                n = 0
            else:
                at = _history.first_difference(fps, self._fps)
                old = self.session.session_id
                self.session.end({sn.SESSION_DIVERGED_AT: at})
                log.info("prunegate guard: history changed at item %d; starting a new session", at)
                self._root = {sn.SESSION_PREVIOUS: old}
                self._start()
                n = 0
        self.context.request_extra = rest
        if self._counter_by_model and not self._ids and isinstance(rest.get("model"), str):
            self.token_counter = self.context.counter = counter_for(self.provider, rest["model"])
        for fp, msg in zip(fps[n:], to_messages(items[n:], n), strict=True):
            self.context.append(msg)
            self._fps.append(fp)
            self._ids.append(msg.id)
        self.requests += 1
        self._requests += 1
        self.last_decision = self.runtime.check(self.context)

    def _rewrite_system(self, items: list[Any], fps: list[str]) -> bool:
        """When only system prompts changed (a date, a memory block), rewrite them in place.

        Returns False when anything else changed: then the history is not an extension of what
        the guard has seen and a new session starts.
        """
        n = len(self._fps)
        if len(fps) < n:
            return False
        changed = [i for i in range(n) if fps[i] != self._fps[i]]
        if not all(_history.is_system_item(items[i]) for i in changed):
            return False
        for i in changed:
            mid = self._ids[i]
            if mid not in self.context:
                return False
        for i in changed:
            new = items[i].copy() if isinstance(items[i], Message) else \
                _history.to_messages([items[i]], self.provider, offset=i)[0]
            self.context.replace_message(self._ids[i], new, cause="system prompt changed")
            self._fps[i] = fps[i]
        return True

    def _open_chat(self, out: dict[str, Any], decision: Decision | None, api: str | None = None) -> None:
        """Open the request's ``chat`` span and validate ``out`` by ``api``'s rules (default: the provider's)."""
        ctx = self.context
        try:
            chat = self.session.chat(out.get("model"), seq=ctx.seq, attributes={
                sn.REQUEST_TOKENS: ctx.request_tokens,
                sn.REQUEST_MESSAGE_IDS: [m.id for m in ctx.iter_messages()],
                sn.REQUEST_VALID: True,
                sn.CHECK: decision.check if decision else None,
                sn.DECISION: str(decision.kind) if decision else None,
                sn.REQUEST_OVERHEAD_TOKENS: ctx.overhead_tokens,
                sn.GEN_AI_CONVERSATION_COMPACTED: decision.compacted if decision else None,
            })
            self._chat = chat
            found = self.session.check_request(out, api or self.provider, seq=ctx.seq,
                                               message_ids_of=self._message_ids_of)
            self.last_violations = found
            if found:
                chat.set_invalid(found)
            chat.set_input(ctx.messages)
        except Exception as exc:  # noqa: BLE001 - tracing must never break the agent
            ctx.observer_errors.call(_raise, exc)

    def _message_ids_of(self, call_ids: Collection[str]) -> list[str]:
        """Context messages issuing or answering these calls (a scan: only run for violations)."""
        wanted = set(call_ids)
        return [m.id for m in self.context.iter_messages() if wanted & {*m.call_ids, *m.answered_ids}]

    def record_response(self, response: Any = None, *, error: BaseException | Mapping[str, Any] | None = None,
                        conversation: str | None = None) -> None:
        """Finish the model call :meth:`gate` opened (in ``conversation``): the response (dict or SDK
        object), or the error."""
        with self._lock:
            self._switch(conversation)
            chat, self._chat = self._chat, None
            if chat is None:
                return
            try:
                if error is not None:
                    message, status, kind = _error_details(error)
                    chat.error(message, status_code=status, error_type=kind)
                else:
                    chat.response(response)
            except Exception as exc:  # noqa: BLE001
                self.context.observer_errors.call(_raise, exc)
                chat.end()

    def _end_chat(self) -> None:
        if self._chat is not None:
            self._chat.end()
            self._chat = None

    # ------------------------------------------------------------------ SDK clients
    def wrap(self, client: Any, *, conversation: str | None = None) -> Any:
        """``client`` (``anthropic.Anthropic``/``AsyncAnthropic``, ``openai.OpenAI``/``AsyncOpenAI``) with
        every model call gated and its response recorded (:mod:`tracer.guard.clients`). The client's
        provider must be the guard's; ``conversation`` keys the calls (one wrapped client per
        conversation). A wrong client is a :class:`~policies.errors.SettingsError`."""
        from tracer.guard.clients import wrap  # noqa: PLC0415 - the SDKs load with the first wrapped client

        return wrap(self, client, conversation)

    # ------------------------------------------------------------------ tools
    def tool(self, name: str, call_id: str, *, arguments: Any = None, side_effect: bool | None = None) -> ToolCall:
        """An ``execute_tool {name}`` span around the tool's execution (a context manager)."""
        if side_effect is None:
            side_effect = self._is_side_effect(name)
        return self.session.tool(name, call_id, arguments=arguments, side_effect=side_effect, seq=self.context.seq)

    def _is_side_effect(self, name: str) -> bool:
        s = self._side_effects
        if s is None:
            return False
        return bool(s(name)) if callable(s) else name in s

    # ------------------------------------------------------------------ numbers
    def stats(self) -> dict[str, Any]:
        """Requests, context size and health counters of the current session."""
        if self._session is None:
            return {"session_id": self.session_id, "requests": 0, "messages": 0, "tokens": 0, "checks": 0,
                    "violations": 0, "errors": self.errors, "observer_errors": 0, "tracer_errors": 0}
        return {
            "session_id": self.session_id,
            "requests": self.requests,
            "messages": len(self.context),
            "tokens": self.context.tokens,
            "checks": self.observer.checks,
            "violations": self.session.violations,
            "errors": self.errors,
            "observer_errors": self.context.observer_errors.count,
            "tracer_errors": self.session.tracer_errors,
            "tracing": tracing_stats(self.tracer_provider),
        }


# --------------------------------------------------------------------------- agent-loop helpers
@dataclass(frozen=True)
class ToolRequest:
    """One tool call a model response asks for."""

    id: str
    name: str
    arguments: Any


def tool_calls(response: Any, provider: str) -> list[ToolRequest]:
    """The tool calls of a response (dict or SDK object) of either provider."""
    body = plain(response)
    out: list[ToolRequest] = []
    if provider == convert.OPENAI:
        for choice in body.get("choices", [])[:1]:
            for call in (choice.get("message") or {}).get("tool_calls") or []:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = fn.get("arguments")
                out.append(ToolRequest(call["id"], fn.get("name", ""), args))
        return out
    for block in body.get("content", []):
        if block.get("type") == "tool_use":
            out.append(ToolRequest(block["id"], block["name"], block.get("input")))
    return out


def assistant_message(response: Any, provider: str) -> dict[str, Any]:
    """The assistant turn of a response, as the message dict to append to the agent's history."""
    body = plain(response)
    if provider == convert.OPENAI:
        msg = dict(body["choices"][0]["message"])
        out: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            out["tool_calls"] = [{"id": c["id"], "type": c.get("type", "function"),
                                  "function": {"name": c["function"]["name"],
                                               "arguments": c["function"].get("arguments", "")}}
                                 for c in msg["tool_calls"]]
        return out
    return {"role": "assistant", "content": [_anthropic_block(b) for b in body.get("content", [])]}


def tool_results_message(results: list[tuple[str, Any]], provider: str) -> list[dict[str, Any]]:
    """The history messages carrying ``(call id, content)`` results (one Anthropic user turn, or tool messages)."""
    if provider == convert.OPENAI:
        return [{"role": "tool", "tool_call_id": cid, "content": c if isinstance(c, str) else json.dumps(c)}
                for cid, c in results]
    return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": c}
                                         for cid, c in results]}]


_ANTHROPIC_REQUEST_KEYS = {
    "text": ("type", "text", "citations"),
    "tool_use": ("type", "id", "name", "input"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}


def _anthropic_block(block: Mapping[str, Any]) -> dict[str, Any]:
    keys = _ANTHROPIC_REQUEST_KEYS.get(block.get("type", ""))
    if keys is None:
        return dict(block)
    return {k: block[k] for k in keys if block.get(k) is not None}


def _error_details(error: Any) -> tuple[str, int | None, str | None]:
    """(message, HTTP status, error type) of an SDK exception or a provider error body."""
    status = getattr(error, "status_code", None)
    body = getattr(error, "body", None) if not isinstance(error, Mapping) else error
    if isinstance(body, Mapping):
        inner = body.get("error")
        err: Mapping[str, Any] = inner if isinstance(inner, Mapping) else body
        message = err.get("message")
        if isinstance(message, str):
            return message, status, err.get("type") if isinstance(err.get("type"), str) else None
    return str(error), status, type(error).__name__ if isinstance(error, BaseException) else None


def _raise(exc: BaseException) -> None:
    raise exc
