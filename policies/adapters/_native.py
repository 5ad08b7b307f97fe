"""What every framework adapter shares: the gate it talks to, and its way back to native messages.

An adapter converts the framework's messages to :class:`~policies.messages.Message` objects, hands
the whole history to a :class:`MessageGate` (``tracer``'s ``PruneGuard``: traced, one session per
conversation) and converts what comes back. Going back, a message the gate left as it was returns
as the framework's own object (its ids and metadata intact); a message the gate rewrote, a summary,
a masked or spilled stand-in has no such object and is built from its current content. Looking
originals up by what they *say* (never by id) is what keeps a rewrite from being silently undone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..messages import Block, Message, content_digest


class MessageGate(Protocol):
    """The gate an adapter hands the history to (``tracer.guard.instrument.PruneGuard`` is one)."""

    def gate_messages(self, messages: Sequence[Message], extra: Mapping[str, Any] | None = None) -> list[Message]:
        """The messages to send instead of ``messages``; ``extra`` holds tools and instructions."""
        ...


class Originals:
    """Native messages remembered by what they say, to send unchanged ones back as themselves."""

    def __init__(self) -> None:
        self._by_digest: dict[str, Any] = {}
        self._messages: dict[str, list[Any]] = {}

    def remember(self, message: Message, native: Any) -> None:
        self._messages.setdefault(content_digest(message), []).append(native)

    def lookup(self, message: Message) -> Any | None:
        """The native object that said exactly this, or None (rewritten, summary, new).

        Messages that say the same thing (a repeated "go on") come back in their order, each once.
        """
        found = self._messages.get(content_digest(message))
        if not found:
            return None
        return found.pop(0) if len(found) > 1 else found[0]

    def remember_block(self, role: str, block: Block, native: Any) -> None:
        """One block's native part (a message whose other blocks change keeps this one as it was)."""
        self._by_digest["block:" + content_digest(Message(id="", role=role, blocks=[block]))] = native

    def lookup_block(self, role: str, block: Block) -> Any | None:
        return self._by_digest.get("block:" + content_digest(Message(id="", role=role, blocks=[block])))
