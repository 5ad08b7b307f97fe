"""An emulation of server-side compaction's trigger (Anthropic ``compact_20260112``), as a summarize variant.

When the request reaches ``trigger`` input tokens, the provider summarizes the conversation so far
and continues from the summary alone. Here: once the request reaches ``trigger``, every closed,
unpinned unit from the oldest up to the live turn is replaced by one summary message (the
pluggable summarizer of :mod:`~policies.builtin.summarize`; offline by default, labelled as not
model-written). Unlike ``summarize``, it does not stop at what the budget needs: compaction takes
the whole history in one go, then nothing until the request reaches the trigger again.

What it cannot reproduce is in docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import PolicyError
from ..policy import ContextView, Proposal
from . import _params
from .summarize import SummarizePolicy, Summarizer

EDIT_TYPE = "compact_20260112"


class CompactPolicy:
    """Summarize the whole closed history once the request reaches ``trigger`` tokens.

    ``trigger``: input tokens (default: the gate's budget; the provider's default is 150,000).
    ``summarizer``: ``(messages) -> str``, as for ``summarize`` (default: extractive, offline).
    ``summary_tokens``: the size a summary is expected to have.
    """

    name = "compact"

    def __init__(self, trigger: int | None = None, summarizer: Summarizer | None = None,
                 summary_tokens: int = 200) -> None:
        self.trigger = _params.optional_integer(self.name, "trigger", trigger, minimum=1)
        self._summarize = SummarizePolicy(summarizer=summarizer, summary_tokens=summary_tokens)
        self.summarizer = self._summarize.summarizer

    @classmethod
    def from_edit(cls, edit: Mapping[str, Any], summarizer: Summarizer | None = None) -> CompactPolicy:
        """The policy for a ``compact_20260112`` edit of a request's ``context_management.edits``."""
        if edit.get("type") != EDIT_TYPE:
            raise PolicyError(f"compact: not a {EDIT_TYPE} edit: {edit.get('type')!r}")
        trigger = edit.get("trigger")
        value = trigger.get("value") if isinstance(trigger, Mapping) else None
        return cls(trigger=value, summarizer=summarizer)

    def propose(self, view: ContextView) -> Proposal:
        proposal = Proposal(policy=self.name)
        trigger = self.trigger if self.trigger is not None else view.budget
        if view.tokens < trigger:
            proposal.notes = f"below the trigger ({view.tokens} < {trigger} tokens)"
            return proposal
        plan = self._summarize.plan(view, need=view.tokens)  # everything it can take: the whole closed run
        return plan.propose(proposal, view, f"trigger {trigger} tokens")
