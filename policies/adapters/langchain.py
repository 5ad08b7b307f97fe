"""LangChain's ``trim_messages`` as a policy (built-in name ``langchain_trim``; extra ``prunegate[langchain]``).

The context's messages become LangChain messages carrying an id that maps back to the context's
message id; ``trim_messages`` runs unchanged; what it dropped becomes an eviction proposal. Alone
(the ungated runtime) it drops an ``AIMessage`` with tool calls and keeps its ``ToolMessage``;
under the gate the eviction grows or shrinks to whole units.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..builtin import _params
from ..errors import PolicyError
from ..messages import TEXT, TOOL_RESULT, Message
from ..policy import ContextView, Eviction, Proposal

NAME = "langchain_trim"


def _lc() -> Any:
    try:
        from langchain_core import messages  # noqa: PLC0415 - optional extra, imported on use
    except ImportError as exc:
        raise PolicyError(f"{NAME}: needs langchain-core; install the extra: pip install 'prunegate[langchain]'") from exc
    return messages


def to_langchain(messages: list[Message]) -> tuple[list[Any], dict[str, str]]:
    """LangChain messages for ``messages``, and LangChain message id -> context message id.

    A message holding several tool results (the Anthropic form) becomes one ``ToolMessage`` per
    result, ids ``<message id>#<n>``; everything else maps one to one, under its own id.
    """
    lc = _lc()
    out: list[Any] = []
    back: dict[str, str] = {}

    def add(msg: Any, mid: str) -> None:
        out.append(msg)
        back[msg.id] = mid

    for m in messages:
        text = "\n".join(b.text or "" for b in m.blocks if b.type == TEXT)
        if m.role in ("system", "developer"):
            add(lc.SystemMessage(content=m.plain_text(), id=m.id), m.id)
        elif m.role == "assistant":
            calls = [{"name": b.name or "", "args": b.input if isinstance(b.input, dict) else {"input": b.input},
                      "id": b.call_id, "type": "tool_call"} for b in m.blocks if b.call_id]
            add(lc.AIMessage(content=text, tool_calls=calls, id=m.id), m.id)
        elif any(b.type == TOOL_RESULT for b in m.blocks):
            results = [b for b in m.blocks if b.type == TOOL_RESULT]
            for n, b in enumerate(results):
                lid = m.id if len(results) == 1 and not text else f"{m.id}#{n}"
                add(lc.ToolMessage(content=b.plain_text(), tool_call_id=b.tool_use_id or "", id=lid), m.id)
            if text:
                add(lc.HumanMessage(content=text, id=f"{m.id}#text"), m.id)
        else:
            add(lc.HumanMessage(content=m.plain_text(), id=m.id), m.id)
    return out, back


class LangChainTrimPolicy:
    """Run ``langchain_core.messages.trim_messages`` over the context and evict what it dropped.

    ``max_tokens`` defaults to ``target`` × the gate's budget; ``token_counter`` defaults to the
    context's own counter (so LangChain and the gate agree on sizes); ``strategy``,
    ``include_system`` (default: on with ``last``), ``start_on``, ``end_on`` and ``allow_partial``
    are passed to ``trim_messages`` as they are. Pinned units are never proposed.
    """

    name = NAME

    def __init__(
        self,
        max_tokens: int | None = None,
        target: float = 0.8,
        strategy: str = "last",
        token_counter: Callable[..., int] | str | None = None,
        include_system: bool | None = None,
        start_on: str | list[str] | None = None,
        end_on: str | list[str] | None = None,
        allow_partial: bool = False,
    ) -> None:
        _lc()  # fail at construction, with the install hint, when the extra is missing
        self.max_tokens = _params.optional_integer(NAME, "max_tokens", max_tokens, minimum=1)
        self.target = _params.fraction(NAME, "target", target)
        self.strategy = _params.choice(NAME, "strategy", strategy, ("last", "first"))
        if token_counter is not None and not (callable(token_counter) or isinstance(token_counter, str)):
            raise PolicyError(f"{NAME}: token_counter must be a callable or 'approximate', got {token_counter!r}")
        self.token_counter = token_counter
        include_system = self.strategy == "last" if include_system is None else include_system
        self.include_system = _params.flag(NAME, "include_system", include_system)
        self.allow_partial = _params.flag(NAME, "allow_partial", allow_partial)
        if self.strategy == "first" and (self.include_system or start_on):
            raise PolicyError(f"{NAME}: include_system and start_on only apply to strategy 'last'")
        self.start_on = start_on
        self.end_on = end_on

    def trim_kwargs(self, view: ContextView, counter: Callable[..., int]) -> dict[str, Any]:
        kw: dict[str, Any] = dict(
            max_tokens=self.max_tokens if self.max_tokens is not None else int(view.budget * self.target),
            token_counter=self.token_counter if self.token_counter is not None else counter,
            strategy=self.strategy,
            allow_partial=self.allow_partial,
            start_on=self.start_on,
            end_on=self.end_on,
        )
        if self.strategy == "last":
            kw["include_system"] = self.include_system
        return kw

    def propose(self, view: ContextView) -> Proposal:
        lc = _lc()
        messages = view.messages()
        lc_messages, back = to_langchain(messages)
        sizes = _sizes(view, messages, lc_messages, back)

        def count(batch: list[Any]) -> int:
            # a partial copy (allow_partial) keeps an id but not the content: estimate it
            return sum(sizes[id(m)] if id(m) in sizes else _approx(m) for m in batch)

        kw = self.trim_kwargs(view, count)
        kept = lc.trim_messages(lc_messages, **kw)
        kept_ids = {m.id for m in kept}
        dropped = {back[m.id] for m in lc_messages if m.id not in kept_ids}
        proposal = Proposal(policy=self.name, notes=f"trim_messages(strategy={self.strategy!r}, "
                                                    f"max_tokens={kw['max_tokens']}) kept {len(kept)} "
                                                    f"of {len(lc_messages)}")
        pins = view.pinned
        for m in messages:
            if m.id not in dropped:
                continue
            unit = view.unit_of(m.id)
            if unit.id in pins:
                continue
            proposal.evictions.append(Eviction((m.id,), score=float(m.seq), reason="dropped by trim_messages"))
            proposal.scores.setdefault(unit.id, float(unit.first_seq))
        return proposal


def _sizes(view: ContextView, messages: list[Message], lc_messages: list[Any], back: dict[str, str]) -> dict[int, int]:
    """Tokens of each LangChain message (by object) by the context's counter; split messages share theirs."""
    parts: dict[str, int] = {}
    for m in lc_messages:
        parts[back[m.id]] = parts.get(back[m.id], 0) + 1
    tokens = {m.id: m.tokens or view.count_tokens(m) for m in messages}
    return {id(m): -(-tokens[back[m.id]] // parts[back[m.id]]) for m in lc_messages}


def _approx(message: Any) -> int:
    content = message.content if isinstance(message.content, str) else str(message.content)
    return 4 + len(content) // 4
