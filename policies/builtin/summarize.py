"""Replace the oldest run of closed units with one summary message.

The summarizer is pluggable: in production an LLM call, ``(messages) -> str``. The default is
extractive and offline, and says so in its text. A summarizer that fails leaves the context as it
was and the failure is reported in ``Proposal.error``: an error text never poses as a summary.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from ..messages import TOOL_RESULT, Message, text_message
from ..policy import ContextView, Proposal, Summary
from . import _params
from ._text import goal, preview, salient_terms

Summarizer = Callable[[list[Message]], str]

EXTRACTIVE_LABEL = "[extractive summary, not model-generated]"


class ExtractiveSummarizer:
    """One line per message (who said or called what, a preview of it) and the ids mentioned.

    Offline and deterministic; labelled so that nobody mistakes it for a model's summary.
    """

    name = "extractive"

    def __init__(self, max_chars: int = 1200, line_chars: int = 100, max_terms: int = 20) -> None:
        self.max_chars = _params.integer("summarize", "max_chars", max_chars, minimum=200)
        self.line_chars = _params.integer("summarize", "line_chars", line_chars, minimum=20)
        self.max_terms = _params.integer("summarize", "max_terms", max_terms)

    def line(self, m: Message, names: dict[str, str]) -> str:
        text = m.plain_text()
        if text.startswith(EXTRACTIVE_LABEL):
            return "earlier: " + preview(text[len(EXTRACTIVE_LABEL):], self.line_chars)
        if m.call_ids:
            calls = ", ".join(f"{b.name}({preview(_args(b.input), 60)})" for b in m.blocks if b.call_id)
            said = " ".join(b.text or "" for b in m.blocks if b.type == "text").strip()
            head = f"{m.role}: {preview(said, self.line_chars // 2)}; " if said else f"{m.role} "
            return f"{head}called {calls}"[: self.line_chars + 80]
        if any(b.type == TOOL_RESULT for b in m.blocks):
            parts = [f"{names.get(b.tool_use_id or '', 'tool')} returned: {preview(b.plain_text(), self.line_chars)}"
                     for b in m.blocks if b.type == TOOL_RESULT]
            return "; ".join(parts)
        return f"{m.role}: {preview(text, self.line_chars)}"

    def __call__(self, messages: list[Message]) -> str:
        names = {b.call_id: b.name or "tool" for m in messages for b in m.blocks if b.call_id}
        terms: list[str] = []
        for m in messages:
            for t in sorted(salient_terms(m.plain_text(), lower=False)):
                if t not in terms and t not in names.values():
                    terms.append(t)
        head = f"{EXTRACTIVE_LABEL} {len(messages)} earlier messages:"
        tail = f"\nids and numbers mentioned: {', '.join(terms[: self.max_terms])}" if terms and self.max_terms else ""
        room = self.max_chars - len(head) - len(tail)
        lines: list[str] = []
        for i, m in enumerate(messages):
            line = "\n- " + self.line(m, names)
            more = f"\n- … {len(messages) - i} more"
            if sum(map(len, lines)) + len(line) + len(more) > room:
                lines.append(more)
                break
            lines.append(line)
        return head + "".join(lines) + tail


def _args(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str) if value is not None else ""


@dataclass
class SummaryPlan:
    summary: Summary | None
    saved: int
    error: str | None
    note: str

    def propose(self, proposal: Proposal, view: ContextView, why: str) -> Proposal:
        """``proposal`` carrying this plan: its error, ``why`` and the plan's note, the summary (if
        any) with each unit it replaces scored by its tokens."""
        proposal.error = self.error
        proposal.notes = f"{why}; {self.note}"
        if self.summary is not None:
            proposal.summaries.append(self.summary)
            for uid in self.summary.unit_ids:
                proposal.scores[uid] = float(view.unit(uid).tokens)
        return proposal


def summarizer_name(summarizer: Summarizer) -> str:
    return str(getattr(summarizer, "name", None) or getattr(summarizer, "__name__", None) or type(summarizer).__name__)


class SummarizePolicy:
    """Summarize the oldest run of closed, unpinned units until the context is at ``target`` × budget.

    ``summary_tokens`` is the size a summary is expected to have: the run grows until it frees
    ``need + summary_tokens``; a summary that turns out no shorter than its run is not proposed.
    ``min_units`` is the shortest run worth a summarizer call. Summary messages are ``user`` text
    messages.
    """

    name = "summarize"

    def __init__(
        self,
        target: float = 0.8,
        summarizer: Summarizer | None = None,
        summary_tokens: int = 200,
        min_units: int = 1,
    ) -> None:
        self.target = _params.fraction(self.name, "target", target)
        self.summarizer: Summarizer = (
            ExtractiveSummarizer() if summarizer is None
            else _params.function(self.name, "summarizer", summarizer, "(messages) -> str")
        )
        self.summary_tokens = _params.integer(self.name, "summary_tokens", summary_tokens)
        self.min_units = _params.integer(self.name, "min_units", min_units, minimum=1)

    def plan(self, view: ContextView, need: int, exclude_units: frozenset[str] = frozenset(),
             credit: dict[str, int] | None = None) -> SummaryPlan:
        """A summary of the oldest closed run freeing ``need`` tokens (``credit``: tokens already
        saved per unit by another stage, lost if the unit is summarized instead)."""
        run: list[str] = []
        tokens = 0
        credit = credit or {}
        lost = 0
        for unit in view.units():
            if not run and (unit.pinned or unit.id in exclude_units):
                continue  # the run starts after the pinned head (system prompt, first question)
            if unit.pinned or not unit.closed or unit.id in exclude_units:
                break
            run.append(unit.id)
            tokens += unit.tokens
            lost += credit.get(unit.id, 0)
            if tokens - self.summary_tokens - lost >= need and len(run) >= self.min_units:
                break
        if len(run) < self.min_units:
            return SummaryPlan(None, 0, None, "no run of closed units to summarize")
        if all(view.unit(u).kind == "summary" for u in run):
            return SummaryPlan(None, 0, None, "nothing but earlier summaries to summarize")
        messages = [m.copy() for uid in run for m in view.messages(uid)]
        try:
            text = self.summarizer(messages)
        except Exception as exc:  # noqa: BLE001 - reported, never summarized over
            return SummaryPlan(None, 0, f"summarizer {summarizer_name(self.summarizer)} failed: "
                                        f"{type(exc).__name__}: {exc}", "summarizer failed")
        if not isinstance(text, str) or not text.strip():
            return SummaryPlan(None, 0, f"summarizer {summarizer_name(self.summarizer)} returned "
                                        f"{type(text).__name__} {text!r:.40}, not a summary text", "summarizer failed")
        message = text_message("", "user", text)
        saved = tokens - view.count_tokens(message)
        if saved <= 0:
            return SummaryPlan(None, 0, None, f"a {view.count_tokens(message)}-token summary would not shorten "
                                              f"{tokens} tokens")
        summary = Summary(tuple(run), message, reason=f"{len(messages)} messages in {len(run)} units, "
                                                      f"{saved} tokens saved",
                          summarizer=summarizer_name(self.summarizer))
        return SummaryPlan(summary, saved, None, f"summarized {len(run)} units")

    def propose(self, view: ContextView) -> Proposal:
        need = goal(view, self.target)
        proposal = Proposal(policy=self.name)
        if need <= 0:
            return proposal
        return self.plan(view, need).propose(proposal, view, f"target {self.target:g} of budget")

