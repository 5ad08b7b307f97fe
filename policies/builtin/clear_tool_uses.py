"""An emulation of Anthropic's server-side context editing ``clear_tool_uses_20250919``.

So that a compare can answer "our gate against what the provider would do on its side". When the
request reaches ``trigger`` (input tokens, or a number of tool uses), the oldest tool results are
replaced by a placeholder, keeping the ``keep`` most recent tool uses, never those of
``exclude_tools``; with ``clear_tool_inputs`` (all, or a list of tools) the calls' inputs are
cleared too. If a clearing would free fewer than ``clear_at_least`` tokens, nothing is cleared (the
provider's rule: a clearing invalidates the prompt cache, so it must be worth it).

Proposals are :class:`~policies.policy.Rewrite` s that keep every tool id, so the pair stays whole.
What it cannot reproduce is in docs/policies.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import PolicyError
from ..messages import TOOL_RESULT, Message
from ..policy import ContextView, Proposal, Rewrite
from . import _params
from ._text import rewritten, tool_names

EDIT_TYPE = "clear_tool_uses_20250919"
PLACEHOLDER = "[tool result cleared by context editing]"
DEFAULT_KEEP = 3  # Anthropic's default: the three most recent tool uses


class ClearToolUsesPolicy:
    """Clear old tool results (and optionally inputs) once the request reaches ``trigger``.

    ``trigger``: input tokens (default: the gate's budget, the point where the gate asks; the
    provider's own default is 100,000); ``trigger_tool_uses``: trigger on this many tool uses
    instead. ``keep``: the most recent tool uses left whole. ``clear_at_least``: the fewest tokens
    worth a clearing. ``exclude_tools``: tools never cleared. ``clear_tool_inputs``: ``True`` clears
    every cleared call's input too, a list only those tools' inputs.
    """

    name = "clear_tool_uses"

    def __init__(
        self,
        trigger: int | None = None,
        trigger_tool_uses: int | None = None,
        keep: int = DEFAULT_KEEP,
        clear_at_least: int = 0,
        exclude_tools: list[str] | None = None,
        clear_tool_inputs: bool | list[str] = False,
    ) -> None:
        self.trigger = _params.optional_integer(self.name, "trigger", trigger, minimum=1)
        self.trigger_tool_uses = _params.optional_integer(self.name, "trigger_tool_uses", trigger_tool_uses,
                                                          minimum=1)
        if self.trigger is not None and self.trigger_tool_uses is not None:
            raise PolicyError(f"{self.name}: give trigger (input tokens) or trigger_tool_uses, not both")
        self.keep = _params.integer(self.name, "keep", keep)
        self.clear_at_least = _params.integer(self.name, "clear_at_least", clear_at_least)
        self.exclude_tools = _params.names(self.name, "exclude_tools", exclude_tools) or frozenset()
        if isinstance(clear_tool_inputs, bool):
            self.clear_inputs: bool | frozenset[str] = clear_tool_inputs
        else:
            self.clear_inputs = _params.names(self.name, "clear_tool_inputs", clear_tool_inputs) or frozenset()

    @classmethod
    def from_edit(cls, edit: Mapping[str, Any]) -> ClearToolUsesPolicy:
        """The policy for one edit of a request's ``context_management.edits`` (Anthropic's shape)."""
        if edit.get("type") != EDIT_TYPE:
            raise PolicyError(f"clear_tool_uses: not a {EDIT_TYPE} edit: {edit.get('type')!r}")
        kwargs: dict[str, Any] = {}
        trigger = edit.get("trigger")
        if isinstance(trigger, Mapping):
            key = "trigger_tool_uses" if trigger.get("type") == "tool_uses" else "trigger"
            kwargs[key] = trigger.get("value")
        for key in ("keep", "clear_at_least"):
            value = edit.get(key)
            if isinstance(value, Mapping):
                kwargs[key] = value.get("value")
        for key in ("exclude_tools", "clear_tool_inputs"):
            if edit.get(key) is not None:
                kwargs[key] = edit[key]
        return cls(**kwargs)

    def _triggered(self, view: ContextView, uses: int) -> bool:
        if self.trigger_tool_uses is not None:
            return uses >= self.trigger_tool_uses
        return view.tokens >= (self.trigger if self.trigger is not None else view.budget)

    def _clears_input(self, tool: str | None) -> bool:
        if isinstance(self.clear_inputs, bool):
            return self.clear_inputs
        return tool in self.clear_inputs

    def propose(self, view: ContextView) -> Proposal:
        proposal = Proposal(policy=self.name)
        names = tool_names(view)
        messages = view.messages()
        calls = [b.call_id for m in messages for b in m.blocks if b.call_id]
        if not self._triggered(view, len(calls)):
            proposal.notes = "below the trigger"
            return proposal
        kept = set(calls[max(0, len(calls) - self.keep):]) if self.keep else set()
        pins = view.pinned
        clear = {c for c in calls if c not in kept and names.get(c) not in self.exclude_tools}
        rewrites: list[Rewrite] = []
        saved = 0
        for m in messages:
            uid = view.unit_of(m.id).id
            if uid in pins or not (set(m.call_ids) | set(m.answered_ids)) & clear:
                continue
            new = self._cleared(m, clear, names)
            if new is None:
                continue
            gain = m.tokens - view.count_tokens(new)
            if gain <= 0:
                continue
            rewrites.append(Rewrite(m.id, new, reason=f"cleared: {gain} tokens"))
            proposal.scores[uid] = proposal.scores.get(uid, 0.0) + gain
            saved += gain
        if saved < max(1, self.clear_at_least):
            proposal.scores.clear()
            proposal.notes = f"a clearing would free {saved} tokens, under clear_at_least {self.clear_at_least}"
            return proposal
        proposal.rewrites = rewrites
        proposal.notes = f"cleared {len(rewrites)} messages ({saved} tokens); kept the last {self.keep} tool uses"
        return proposal

    def _cleared(self, message: Message, clear: set[str], names: dict[str, str]) -> Message | None:
        new = message.copy()
        changed = False
        for b in new.blocks:
            if b.type == TOOL_RESULT and b.tool_use_id in clear and b.content != PLACEHOLDER:
                b.content = PLACEHOLDER
                changed = True
            elif b.call_id in clear and self._clears_input(names.get(b.call_id or "")) and b.input not in ({}, None):
                b.input = {}
                changed = True
        return rewritten(new, changed)
