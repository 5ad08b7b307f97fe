"""Keep the first ``head`` units and the newest ``tail`` units, with one elision marker between.

The marker is a :class:`~policies.policy.Summary` over the elided units whose text says how many
messages were elided, so the model knows something is missing. A later elision that swallows an
earlier marker counts the messages that marker stood for.
"""

from __future__ import annotations

import re

from ..messages import text_message
from ..policy import ContextView, Proposal, Summary, UnitView
from . import _params

_COUNT = re.compile(r"^\[(\d+) earlier messages? elided")


def marker_text(count: int) -> str:
    noun = "message" if count == 1 else "messages"
    return f"[{count} earlier {noun} elided here to fit the context window]"


class HeadTailPolicy:
    """Elide the middle of the conversation.

    ``head``: oldest units kept (default 2: the system prompt and the first question). ``tail``:
    newest units kept; ``None`` keeps as many newest units as fit in ``target`` × budget. Pinned
    units in the middle are kept too; the units between them form separate elided runs.
    """

    name = "head_tail"

    def __init__(self, head: int = 2, tail: int | None = None, target: float = 0.8) -> None:
        self.head = _params.integer(self.name, "head", head)
        self.tail = _params.optional_integer(self.name, "tail", tail, minimum=1)
        self.target = _params.fraction(self.name, "target", target)

    def _tail_start(self, units: list[UnitView], marker_tokens: int, goal_tokens: int) -> int:
        n = len(units)
        if self.tail is not None:
            return max(self.head, n - self.tail)
        kept = sum(u.tokens for u in units[: self.head]) + sum(u.tokens for u in units[self.head:] if u.pinned)
        room = goal_tokens - kept - marker_tokens
        start = n
        for i in range(n - 1, self.head - 1, -1):
            u = units[i]
            if u.pinned:
                start = i
                continue
            if u.tokens > room:
                break
            room -= u.tokens
            start = i
        return start

    def _elided(self, view: ContextView, run: list[UnitView]) -> int:
        count = 0
        for u in run:
            if u.kind == "summary" and len(u.message_ids) == 1:
                found = _COUNT.match(view.message(u.message_ids[0]).plain_text())
                if found:
                    count += int(found.group(1))
                    continue
            count += len(u.message_ids)
        return count

    def propose(self, view: ContextView) -> Proposal:
        proposal = Proposal(policy=self.name, notes=f"head {self.head}, tail {self.tail or 'fit'}")
        units = list(view.units())
        marker_tokens = view.count_tokens(text_message("", "user", marker_text(10_000)))
        start = self._tail_start(units, marker_tokens, int(view.budget * self.target))
        runs: list[list[UnitView]] = [[]]
        for u in units[self.head: start]:
            if u.pinned:
                runs.append([])
            else:
                runs[-1].append(u)
        for run in runs:
            if not run:
                continue
            count = self._elided(view, run)
            message = text_message("", "user", marker_text(count))
            tokens = sum(u.tokens for u in run)
            if tokens <= view.count_tokens(message):
                continue
            proposal.summaries.append(
                Summary(tuple(u.id for u in run), message, reason=f"elided {count} messages ({tokens} tokens)",
                        summarizer=self.name)
            )
            for u in run:
                proposal.scores[u.id] = float(u.first_seq)
        return proposal
