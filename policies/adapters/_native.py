"""What every framework adapter shares: the gate it talks to, and its way back to native messages.

An adapter converts the framework's messages to :class:`~policies.messages.Message` objects, hands
the whole history to a :class:`MessageGate` (``tracer``'s ``PruneGuard``: traced, one session per
conversation) and converts what comes back. Going back, a message the gate left as it was returns
as the framework's own object (its ids and metadata intact); a message the gate rewrote, a summary,
a masked or spilled stand-in has no such object and is built from its current content. Looking
originals up by what they *say* (never by id) is what keeps a rewrite from being silently undone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ..errors import HardCeilingExceeded, SettingsError
from ..messages import Block, Message, content_digest

T = TypeVar("T")
log = logging.getLogger("prunegate.adapters")


class MessageGate(Protocol):
    """The gate an adapter hands the history to (``tracer.guard.instrument.PruneGuard`` is one)."""

    def gate_messages(self, messages: Sequence[Message], extra: Mapping[str, Any] | None = None, *,
                      conversation: str | None = None) -> list[Message]:
        """The messages to send instead of ``messages``; ``extra`` holds tools and instructions;
        ``conversation`` is the framework's identity of the conversation (one session each)."""
        ...

    def passed_through(self, exc: BaseException, where: str) -> None:
        """Count, log and trace a request the adapter sends unchanged because it could not convert it."""
        ...


Conversation = str | Callable[..., "str | None"] | None  # a fixed key, or how to find it per request


def require_gate(guard: Any, where: str, needs: tuple[str, ...] = ("gate_messages", "passed_through")) -> Any:
    """``guard`` if it has the methods an adapter calls (a ``PruneGuard`` does); else one clear error,
    at construction."""
    if not all(callable(getattr(guard, name, None)) for name in needs):
        raise SettingsError(f"{where}: expected a PruneGuard (something with {' and '.join(needs)}), "
                            f"got {type(guard).__name__}")
    return guard


def require_conversation(conversation: Any, where: str) -> Conversation:
    if conversation is not None and not isinstance(conversation, str) and not callable(conversation):
        raise SettingsError(f"{where}: conversation must be a string, a callable or None, "
                            f"got {type(conversation).__name__}")
    return conversation


class PassThrough(Protocol):
    """What :func:`gate_or_pass` needs of a guard."""

    def passed_through(self, exc: BaseException, where: str) -> None: ...


def gate_or_pass(guard: PassThrough, where: str, run: Callable[[], T], fallback: Callable[[], T]) -> T:
    """``run()`` (convert, gate, convert back); on any trouble but the hard ceiling, ``fallback()``:
    the framework's request unchanged, counted, logged and traced by the guard. Never breaks the agent."""
    try:
        return run()
    except HardCeilingExceeded:
        raise
    except Exception as exc:  # noqa: BLE001 - the guard must never break the agent
        try:
            guard.passed_through(exc, where)
        except Exception as exc2:  # noqa: BLE001 - nor must its bookkeeping
            log.warning("prunegate %s: passing the request through unchanged: %r (then %r)", where, exc, exc2)
        return fallback()


class Originals:
    """Native messages remembered by what they say, to send unchanged ones back as themselves."""

    def __init__(self) -> None:
        self._by_digest: dict[str, list[Any]] = {}
        self.natives: list[Any] = []  # the framework's messages in order, for a converter's index hints
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
        key = "block:" + content_digest(Message(id="", role=role, blocks=[block]))
        self._by_digest.setdefault(key, []).append(native)

    def lookup_block(self, role: str, block: Block, parent: Any = None) -> Any | None:
        """The native part that said exactly this: ``(message, part)`` from ``parent`` when it has one
        (parts that say the same thing in several messages), else the first."""
        found = self._by_digest.get("block:" + content_digest(Message(id="", role=role, blocks=[block])))
        if not found:
            return None
        return next((f for f in found if parent is not None and f[0] is parent), found[0])
