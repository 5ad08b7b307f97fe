"""Observation masking: replace old tool results with a short placeholder that keeps the call id.

The placeholder says what was there (call id, tool, size, a preview), so the model can ask for the
call again. Proposals are :class:`~policies.policy.Rewrite` s that keep every tool id, so a
call/result pair survives by construction, gated or not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PolicyError
from ..messages import TOOL_RESULT, Message
from ..policy import ContextView, Proposal, Rewrite
from . import _params
from ._text import goal, preview, rewritten, tool_names

MASK_PREFIX = "[masked tool result for "


def placeholder(call_id: str, tool: str | None, original: str, preview_chars: int) -> str:
    """``[masked tool result for call_X (get_weather), 1,234 chars; preview: ...]``."""
    name = f" ({tool})" if tool else ""
    shown = f"; preview: {preview(original, preview_chars)}" if preview_chars and original.strip() else ""
    return f"{MASK_PREFIX}{call_id}{name}, {len(original):,} chars{shown}]"


def is_masked(message: Message) -> bool:
    results = [b for b in message.blocks if b.type == TOOL_RESULT]
    return bool(results) and all(isinstance(b.content, str) and b.content.startswith(MASK_PREFIX) for b in results)


@dataclass
class MaskPlan:
    rewrites: list[Rewrite]
    saved: dict[str, int]  # message id -> projected tokens saved


class MaskPolicy:
    """Mask the oldest tool results, keeping the newest ``keep_last`` verbatim, until ``target`` × budget.

    Results are counted one by one (an Anthropic message holding three results counts three).

    ``tools`` masks only results of these tools; ``exclude_tools`` never masks these. Results
    already masked, and results the placeholder would not shorten, are left alone.
    """

    name = "mask"

    def __init__(
        self,
        target: float = 0.8,
        keep_last: int = 3,
        preview_chars: int = 80,
        tools: list[str] | None = None,
        exclude_tools: list[str] | None = None,
    ) -> None:
        self.target = _params.fraction(self.name, "target", target)
        self.keep_last = _params.integer(self.name, "keep_last", keep_last)
        self.preview_chars = _params.integer(self.name, "preview_chars", preview_chars, maximum=2000)
        self.tools = _params.names(self.name, "tools", tools)
        self.exclude_tools = _params.names(self.name, "exclude_tools", exclude_tools) or frozenset()
        overlap = (self.tools or frozenset()) & self.exclude_tools
        if overlap:
            raise PolicyError(f"{self.name}: {sorted(overlap)[0]!r} is both in tools and in exclude_tools")

    def _allowed(self, tool: str | None) -> bool:
        if tool in self.exclude_tools:
            return False
        return self.tools is None or tool in self.tools

    def rewrite(self, message: Message, names: dict[str, str], keep: frozenset[int] = frozenset()) -> Message | None:
        """The masked copy of ``message`` (blocks at the indexes in ``keep`` stay verbatim), or None
        when no result in it may be masked."""
        new = message.copy()
        changed = False
        for i, b in enumerate(new.blocks):
            if b.type != TOOL_RESULT or not b.tool_use_id or i in keep:
                continue
            tool = names.get(b.tool_use_id) or message.extra.get("name")
            text = b.plain_text()
            if not self._allowed(tool) or text.startswith(MASK_PREFIX):
                continue
            b.content = placeholder(b.tool_use_id, tool, text, self.preview_chars)
            changed = True
        return rewritten(new, changed)

    def plan(self, view: ContextView, need: int, exclude_units: frozenset[str] = frozenset()) -> MaskPlan:
        """Rewrites of the oldest maskable results until ``need`` tokens are saved."""
        out = MaskPlan([], {})
        blocks = [(m, i) for m in view.messages() for i, b in enumerate(m.blocks) if b.type == TOOL_RESULT]
        newest = blocks[max(0, len(blocks) - self.keep_last):] if self.keep_last else []
        keep: dict[str, set[int]] = {}
        for m, i in newest:
            keep.setdefault(m.id, set()).add(i)
        pins = view.pinned
        names = tool_names(view)
        seen: set[str] = set()
        for m, _i in blocks:
            if need <= 0:
                break
            if m.id in seen:
                continue
            seen.add(m.id)
            uid = view.unit_of(m.id).id
            if uid in pins or uid in exclude_units:
                continue
            new = self.rewrite(m, names, frozenset(keep.get(m.id, ())))
            if new is None:
                continue
            saved = m.tokens - view.count_tokens(new)
            if saved <= 0:
                continue
            out.rewrites.append(Rewrite(m.id, new, reason=f"masked: {saved} tokens saved"))
            out.saved[m.id] = saved
            need -= saved
        return out

    def propose(self, view: ContextView) -> Proposal:
        need = goal(view, self.target)
        proposal = Proposal(policy=self.name, notes=f"target {self.target:g} of budget; keep_last {self.keep_last}")
        if need <= 0:
            return proposal
        plan = self.plan(view, need)
        proposal.rewrites = plan.rewrites
        for mid, saved in plan.saved.items():
            uid = view.unit_of(mid).id
            proposal.scores[uid] = proposal.scores.get(uid, 0.0) + saved
        return proposal

