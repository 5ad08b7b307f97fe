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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from opentelemetry import trace

from policies import convert
from policies.context import Context
from policies.decision import Decision
from policies.errors import HardCeilingExceeded, PolicyError
from policies.gate import Gate
from policies.naive import NaiveRuntime
from policies.policy import Policy
from policies.registry import get_policy
from policies.spill import MemorySpillStore, SpillStore
from policies.tokens import TokenCounter
from policies.validate import Violation
from tracer.guard import history as _history
from tracer.spans.genai import ChatCall, ToolCall, plain
from tracer.spans.observer import SpanObserver
from tracer.spans.redact import Redactor
from tracer.spans.session import TracedSession

log = logging.getLogger("prunegate.tracer")
PROVIDERS = (convert.ANTHROPIC, convert.OPENAI)


class PruneGuard:
    """The gate, a context and a traced session for one conversation of a production agent.

    ``policy`` is a policy name (``policy_params`` are its parameters) or a policy object.
    ``store`` is a trace store directory (spans go there through the store pipeline) and
    ``otlp_endpoint`` an OTLP/HTTP collector (either or both); or pass a ``tracer_provider`` of
    your own; none of them: the global tracer provider.
    ``gated=False`` runs the naive runtime instead of the gate (to measure what the gate prevents).
    ``side_effects`` names the tools (or a predicate) whose repetition is a duplicated side effect.
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
        mode: Literal["grow", "shrink"] = "grow",
        gated: bool = True,
        spill_store: SpillStore | None = None,
        capture_content: bool | None = None,
        redact: Redactor | None = None,
        session_id: str | None = None,
        session_name: str | None = None,
        token_counter: TokenCounter | None = None,
        side_effects: Collection[str] | Callable[[str], bool] | None = None,
    ) -> None:
        if provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}; got {provider!r}")
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
        self.token_counter = token_counter
        self._side_effects = side_effects
        self.tracer_provider, self._owns_provider = _tracer_provider(store, tracer_provider, otlp_endpoint)
        self._lock = threading.Lock()
        self._chat: ChatCall | None = None
        self.errors = 0  # bodies passed through unchanged because the guard could not handle them
        self.last_error: str | None = None
        self.last_decision: Decision | None = None
        self.last_violations: list[Violation] = []
        self.requests = 0
        self._start(session_id)

    # ------------------------------------------------------------------ lifecycle
    def _start(self, session_id: str | None, **root: Any) -> None:
        self.session = TracedSession(
            self.tracer_provider, session_id=session_id, source="live", name=self.session_name,
            provider=self.provider, policy=self.policy.name, policy_params=self.policy_params,
            gated=self.gated, budget=self.budget, hard_ceiling=self.hard_ceiling,
            capture_content=self.capture_content, redact=self.redact, attributes=root,
        )
        self.observer = SpanObserver(self.session)
        self.context = Context(observer=self.observer, strict=self.gated, provider=self.provider,
                               session_id=self.session.session_id, token_counter=self.token_counter)
        if self.gated:
            self.runtime: Gate | NaiveRuntime = Gate(self.policy, self.budget, self.hard_ceiling, mode=self.mode,
                                                     spill_store=self.spill_store)
        else:
            self.runtime = NaiveRuntime(self.policy, self.budget)
        self._fps: list[str] = []  # fingerprints of the history items absorbed so far
        self._ids: list[str] = []  # their message ids in the context

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def close(self) -> None:
        """End the open model call and the session; flush the store pipeline the guard set up."""
        with self._lock:
            self._end_chat()
            self.session.end({"prunegate.requests": self.requests, "prunegate.guard.errors": self.errors})
        if self._owns_provider:
            flush = getattr(self.tracer_provider, "force_flush", None)
            if flush is not None:
                flush()

    def __enter__(self) -> PruneGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the request path
    def gate(self, body: Any) -> dict[str, Any]:
        """The body to send instead of ``body``: same request keys, the gated messages.

        Raises :class:`HardCeilingExceeded` when the hard ceiling cannot hold; any other trouble
        is logged and counted (:attr:`errors`) and ``body`` is returned unchanged.
        """
        with self._lock:
            self._end_chat()
            try:
                return self._gate(body)
            except HardCeilingExceeded:
                raise
            except Exception as exc:  # noqa: BLE001 - the guard must never break the agent
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self.errors == 1:
                    log.warning("prunegate guard: passing the request through unchanged: %s", self.last_error)
                return body if isinstance(body, dict) else plain(body)

    def _gate(self, body: Any) -> dict[str, Any]:
        items, rest = _history.split_body(body, self.provider)
        fps = [_history.fingerprint(item) for item in items]
        n = len(self._fps)
        if fps[:n] != self._fps and not self._rewrite_system(items, fps):
            at = _history.first_difference(fps, self._fps)
            old = self.session.session_id
            self.session.end({"prunegate.session.diverged_at": at})
            log.info("prunegate guard: history changed at item %d; starting a new session", at)
            self._start(None, **{"prunegate.session.previous": old})
            n = 0
        self.context.request_extra = rest
        for fp, msg in zip(fps[n:], _history.to_messages(items[n:], self.provider, offset=n), strict=True):
            self.context.append(msg)
            self._fps.append(fp)
            self._ids.append(msg.id)
        self.requests += 1
        decision = self.runtime.check(self.context)
        self.last_decision = decision
        out = self.context.render(self.provider)
        self._open_chat(out, decision)
        return out

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
            new = _history.to_messages([items[i]], self.provider, offset=i)[0]
            self.context.replace_message(self._ids[i], new, cause="system prompt changed")
            self._fps[i] = fps[i]
        return True

    def _open_chat(self, out: dict[str, Any], decision: Decision) -> None:
        ctx = self.context
        try:
            chat = self.session.chat(out.get("model"), seq=ctx.seq, attributes={
                "prunegate.request.tokens": ctx.tokens,
                "prunegate.request.message_ids": [m.id for m in ctx.iter_messages()],
                "prunegate.request.valid": True,
                "prunegate.check": decision.check,
                "prunegate.decision": str(decision.kind),
            })
            self._chat = chat
            found = self.session.check_request(out, self.provider, seq=ctx.seq, message_ids_of=self._message_ids_of)
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

    def record_response(self, response: Any = None, *, error: BaseException | Mapping[str, Any] | None = None) -> None:
        """Finish the model call opened by :meth:`gate`: the response (dict or SDK object), or the error."""
        with self._lock:
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
        err = inner if isinstance(inner, Mapping) else body
        message = err.get("message")
        if isinstance(message, str):
            return message, status, err.get("type") if isinstance(err.get("type"), str) else None
    return str(error), status, type(error).__name__ if isinstance(error, BaseException) else None


def _raise(exc: BaseException) -> None:
    raise exc


_SHARED: dict[tuple[str, str | None], Any] = {}
_SHARED_LOCK = threading.Lock()


def _tracer_provider(store: str | Path | None, tracer_provider: trace.TracerProvider | None,
                     otlp_endpoint: str | None = None) -> tuple[trace.TracerProvider, bool]:
    """The provider to trace into, and whether the guard set it up (and so flushes it on close).

    Guards given the same store (and OTLP endpoint) share one pipeline for the whole process: a
    guard per conversation costs no extra threads. The pipeline flushes at exit.
    """
    if tracer_provider is not None:
        return tracer_provider, False
    if store is None and otlp_endpoint is None:
        return trace.get_tracer_provider(), False
    from tracer.spans.setup import setup_tracing  # noqa: PLC0415 - the store pipeline is only needed with a store

    key = (str(Path(store).resolve()) if store is not None else "", otlp_endpoint)
    with _SHARED_LOCK:
        tracing = _SHARED.get(key)
        if tracing is None:
            tracing = _SHARED[key] = setup_tracing(store if store is not None else False,
                                                   otlp_endpoint if otlp_endpoint is not None else False)
    return tracing.provider, True
