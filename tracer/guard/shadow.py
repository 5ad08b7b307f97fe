"""Shadow mode: watch an agent's own trimmer without changing what it does.

Give :meth:`ShadowGuard.observe` the message list before and after the agent's trimmer ran (or
wrap the trimmer with :meth:`ShadowGuard.wrap`). The guard records, in a session with source
``shadow``:

- the agent's history as ``prunegate.message`` append spans (so the session can be replayed
  under a gated policy later);
- each trimmer run as a ``prunegate.budget_check`` whose ``prunegate.prune`` child has
  ``prunegate.gated=false`` and lists what the trimmer removed;
- the violations the trimmed list carries (validated as the provider would), each linked to
  that prune span;
- what the gate would have done with the same removal, as ``prunegate.shadow.*`` attributes of
  the prune span: the verdict of the reference check (:func:`policies.prune_context`), the
  removal grown to whole units and shrunk to whole units, their tokens and their validity.

The trimmer's output is never touched; shadow mode only observes. Lists of LangChain messages
are accepted (converted to OpenAI messages and validated as OpenAI would).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import MeterProvider

from policies import convert
from policies.context import Context
from policies.decision import Decision, DecisionKind
from policies.errors import PruneBoundaryViolation, SettingsError
from policies.limits import check_limits
from policies.reference import prune_context
from policies.tokens import DEFAULT_COUNTER, TokenCounter
from policies.validate import Violation, validate
from tracer.contract import names as sn
from tracer.guard import _history
from tracer.guard.tracing import flush_if_owned, guard_tracer_provider, tracing_stats
from tracer.spans.metrics import resolve as resolve_metrics
from tracer.spans.observer import SpanObserver
from tracer.spans.redact import Redactor
from tracer.spans.session import SessionConfig, TracedSession

log = logging.getLogger(sn.SCOPE)


@dataclass
class ShadowReport:
    """What one trimmer run did, and what the gate would have done instead."""

    removed: list[str] = field(default_factory=list)  # message ids the trimmer removed
    inserted: int = 0  # messages in the output that were not in the input (summaries, edits)
    violations: list[Violation] = field(default_factory=list)  # of the trimmed list
    verdict: str = "valid"  # the reference check's verdict on the removal
    split_units: list[str] = field(default_factory=list)  # units the removal cut
    grown: list[str] = field(default_factory=list)  # the gate's removal in grow mode (message ids)
    shrunk: list[str] = field(default_factory=list)  # ... in shrink mode
    grown_valid: bool = True
    shrunk_valid: bool = True
    tokens_before: int = 0
    tokens_after: int = 0
    error: str | None = None  # the observation failed (the agent is not affected)


class ShadowGuard:
    """Observe an agent's trimmer: its removals, the violations they cause, the gate's alternative."""

    def __init__(
        self,
        *,
        provider: str = convert.OPENAI,
        trimmer: str = "trimmer",
        budget: int | None = None,
        store: str | Path | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        otlp_endpoint: str | None = None,
        capture_content: bool | None = None,
        redact: Redactor | None = None,
        session_id: str | None = None,
        session_name: str | None = None,
        token_counter: TokenCounter | None = None,
        meter_provider: MeterProvider | None = None,
        metrics_port: int | None = None,
        detail: str = "checks",
    ) -> None:
        if provider not in (convert.ANTHROPIC, convert.OPENAI):
            raise SettingsError(f"ShadowGuard: provider must be one of anthropic, openai; got {provider!r}")
        check_limits(budget, where="ShadowGuard", budget_required=False)
        self.provider = provider
        self.trimmer = trimmer
        self.budget = budget
        self.counter = token_counter or DEFAULT_COUNTER
        self.tracer_provider, self._owns_provider = guard_tracer_provider(store, tracer_provider, otlp_endpoint)
        self.session = TracedSession(self.tracer_provider, SessionConfig(
            session_id=session_id, source="shadow", name=session_name, provider=provider,
            policy=trimmer, gated=False, budget=budget, capture_content=capture_content, redact=redact,
            metrics=resolve_metrics(meter_provider, metrics_port), detail=detail,
        ))
        self.observer = SpanObserver(self.session, gated=False)
        self.history = Context(observer=self.observer, strict=False, provider=provider,
                               session_id=self.session.session_id, token_counter=self.counter)
        self._fps: list[str] = []
        self._ids: list[str] = []
        self.runs = 0
        self.errors = 0

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def stats(self) -> dict[str, Any]:
        """Runs observed, observations that failed, and the span pipeline's counters (as at exit)."""
        return {"session_id": self.session_id, "runs": self.runs, "errors": self.errors,
                "tracer_errors": self.session.tracer_errors, "tracing": tracing_stats(self.tracer_provider)}

    def wrap(self, trim: Callable[..., Any]) -> Callable[..., Any]:
        """``trim`` unchanged, observed: ``trim(messages, ...)``'s result is returned as is."""

        @functools.wraps(trim)
        def observed(messages: Any, *args: Any, **kwargs: Any) -> Any:
            result = trim(messages, *args, **kwargs)
            self.observe(messages, result)
            return result

        return observed

    def observe(self, before: Any, after: Any) -> ShadowReport:
        """Record one trimmer run. Never raises: a failure is logged, counted and reported."""
        try:
            return self._observe(before, after)
        except Exception as exc:  # noqa: BLE001 - shadow mode must never break the agent
            self.errors += 1
            if self.errors == 1:
                log.warning("prunegate shadow: observation failed (the agent is not affected): %r", exc)
            return ShadowReport(error=f"{type(exc).__name__}: {exc}")

    def _observe(self, before: Any, after: Any) -> ShadowReport:
        provider = self.provider
        lc_before, lc_after = _history.langchain_to_openai(_as_list(before)), _history.langchain_to_openai(_as_list(after))
        if lc_before is not None:
            before, after, provider = lc_before, lc_after if lc_after is not None else after, convert.OPENAI
        items_b, rest = _history.split_body(before, provider)
        items_a, _ = _history.split_body(after, provider)
        fps_b = [_history.fingerprint(i) for i in items_b]
        ids_b = self._absorb(items_b, fps_b, provider)
        self.runs += 1

        scratch = Context(strict=False, provider=provider, token_counter=self.counter)
        for mid, msg in zip(ids_b, _history.to_messages(items_b, provider), strict=True):
            msg.id = mid
            scratch.append(msg)
        kept = _history.match(fps_b, [_history.fingerprint(i) for i in items_a])
        kept_idx = {k for k in kept if k is not None}
        removed = [ids_b[i] for i in range(len(ids_b)) if i not in kept_idx]
        new_msgs = _history.to_messages([i for i, k in zip(items_a, kept, strict=True) if k is None], provider)
        report = ShadowReport(removed=removed, inserted=len(new_msgs), tokens_before=scratch.tokens)
        gone_tokens = sum(scratch.message(m).tokens for m in removed)
        report.tokens_after = scratch.tokens - gone_tokens + sum(self.counter.count(m) for m in new_msgs)

        extra = self._counterfactual(scratch, removed, rest, provider, report) if removed else {}
        self.history.seq += 1  # a trimmer run is a check of its own in the session's order
        changed = bool(removed or new_msgs)
        d = Decision(
            kind=DecisionKind.PRUNED if changed else DecisionKind.WITHIN_BUDGET,
            check=self.runs, seq=self.history.seq, tokens_before=report.tokens_before,
            tokens_after=report.tokens_after, budget=self.budget or report.tokens_before, hard_ceiling=None,
            policy=self.trimmer, reason="trimmer" if changed else "", proposed_ids=list(removed),
            pruned_ids=list(removed), budget_met=self.budget is None or report.tokens_after <= self.budget,
        )
        pairs = [(m, scratch.message(m).call_ids + scratch.message(m).answered_ids) for m in removed]
        extra[sn.SHADOW_INSERTED] = report.inserted
        self.observer.record_decision(self.history, d, gated=False, extra=extra, removed=pairs)

        body = _history.join_body(items_a, rest, provider)
        report.violations = self.session.check_request(
            body, provider, seq=self.history.seq, message_ids_of=lambda ids: _message_ids_of(scratch, ids))
        self._fps, self._ids = fps_b, ids_b
        return report

    def _absorb(self, items: list[Any], fps: list[str], provider: str) -> list[str]:
        """Context ids of the history items; new ones are appended to the session's history."""
        matched = _history.match(self._fps, fps)
        ids: list[str] = []
        fresh = [i for i, k in enumerate(matched) if k is None]
        msgs = iter(_history.to_messages([items[i] for i in fresh], provider))
        for k in matched:
            if k is not None:
                ids.append(self._ids[k])
            else:
                ids.append(self.history.append(next(msgs)).id)
        return ids

    def _counterfactual(self, ctx: Context, removed: list[str], rest: Mapping[str, Any], provider: str,
                        report: ShadowReport) -> dict[str, Any]:
        """What the gate would have done with the same removal (grow and shrink), before it happens."""
        rows = [{"id": m.id, "unit_id": ctx.unit_id_of(m.id), "role": m.role, "closed": m.closed}
                for m in ctx.iter_messages()]
        try:
            prune_context(rows, set(removed), set(ctx.pending.values()), set(ctx.open_ids))
        except PruneBoundaryViolation as exc:
            report.verdict = str(exc)
        pins = ctx.pinned_unit_ids()
        touched: dict[str, set[str]] = {}
        for mid in removed:
            uid = ctx.unit_id_of(mid)
            if uid is not None:
                touched.setdefault(uid, set()).add(mid)
        grow: list[str] = []
        shrink: list[str] = []
        skipped: list[str] = []
        for uid, mids in touched.items():
            unit = ctx.units[uid]
            if uid in pins or not unit.closed:
                skipped.append(uid)
                continue
            grow.extend(unit.message_ids)
            if len(mids) == len(unit.message_ids):
                shrink.extend(unit.message_ids)
            else:
                report.split_units.append(uid)
        order = {m.id: i for i, m in enumerate(ctx.iter_messages())}
        report.grown = sorted(grow, key=order.__getitem__)
        report.shrunk = sorted(shrink, key=order.__getitem__)
        attrs: dict[str, Any] = {
            sn.SHADOW_VERDICT: report.verdict,
            sn.SHADOW_SPLIT_UNITS: list(report.split_units),
            sn.SHADOW_SKIPPED_UNITS: skipped,
        }
        for name, ids in (("grow", report.grown), ("shrink", report.shrunk)):
            ids_key, tokens_key, valid_key, met_key = sn.SHADOW_OPTIONS[name]
            gone = set(ids)
            left = [m for m in ctx.iter_messages() if m.id not in gone]
            body = convert.to_openai(left, dict(rest)) if provider == convert.OPENAI else convert.to_anthropic(left, dict(rest))
            valid = not validate(body, provider)
            tokens = sum(m.tokens for m in left)
            setattr(report, f"{'grown' if name == 'grow' else 'shrunk'}_valid", valid)
            attrs[ids_key] = list(ids)
            attrs[tokens_key] = tokens
            attrs[valid_key] = valid
            if self.budget is not None:
                attrs[met_key] = tokens <= self.budget
        return attrs

    def close(self) -> None:
        """End the session; flush the store pipeline the guard set up."""
        self.session.end({sn.SHADOW_RUNS: self.runs, sn.GUARD_ERRORS: self.errors})
        flush_if_owned(self.tracer_provider, self._owns_provider)

    def __enter__(self) -> ShadowGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        messages = value.get("messages")
        return list(messages) if isinstance(messages, list) else []
    return list(value) if isinstance(value, (list, tuple)) else []


def _message_ids_of(ctx: Context, call_ids: Collection[str]) -> list[str]:
    """Context ids of the messages (still present or just removed) that issue or answer these calls."""
    out = []
    for m in ctx.iter_messages():
        if any(c in m.call_ids or c in m.answered_ids for c in call_ids):
            out.append(m.id)
    return out
