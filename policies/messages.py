"""Provider-neutral messages made of content blocks.

Every field a provider sends that the model does not interpret is kept in ``extra`` so that a
request body converted into a :class:`Message` list and back comes out equal to what went in.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

TEXT = "text"
TOOL_USE = "tool_use"
TOOL_RESULT = "tool_result"
THINKING = "thinking"
REDACTED_THINKING = "redacted_thinking"
SERVER_TOOL_USE = "server_tool_use"
SERVER_TOOL_RESULT = "server_tool_result"
OTHER = "other"
COMPACTION = "compaction"  # the type of an Anthropic compaction block and of a Responses compaction item
PINNED = "_pinned"  # on a message's ``extra``: the unit holding it is never pruned, rewritten or spilled

BLOCK_TYPES = (
    TEXT,
    TOOL_USE,
    TOOL_RESULT,
    THINKING,
    REDACTED_THINKING,
    SERVER_TOOL_USE,
    SERVER_TOOL_RESULT,
    OTHER,
)

_CALLS = frozenset((TOOL_USE, SERVER_TOOL_USE))  # the block types that open a call (Block.call_id)
_RESULTS = frozenset((TOOL_RESULT, SERVER_TOOL_RESULT))  # the block types that answer one (Block.answers)


@dataclass
class Block:
    """One content block.

    ``type`` is one of :data:`BLOCK_TYPES`. Fields that do not apply to a type stay ``None``. A tool
    result's ``name`` is the name of the call it answers when the same request holds that call (OpenAI
    speaks a result as ``functions.NAME``; the token counters read it).
    ``extra`` holds provider keys kept verbatim (``signature``, ``cache_control``, an OpenAI
    ``arguments`` string, the exact ``type`` of a server tool result, ...).
    """

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    tool_use_id: str | None = None
    content: Any = None
    is_error: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def call_id(self) -> str | None:
        """The id this block opens (a call) — tool_use and server_tool_use."""
        return self.id if self.type in _CALLS else None

    @property
    def answers(self) -> str | None:
        """The call id this block answers — tool_result and server tool results."""
        return self.tool_use_id if self.type in _RESULTS else None

    def plain_text(self) -> str:
        """All text a token counter or a lexical scorer should see."""
        if self.type == TEXT:
            return self.text or ""
        if self.type == THINKING:
            return self.text or ""
        if self.type in (TOOL_USE, SERVER_TOOL_USE):
            return f"{self.name or ''} {_as_text(self.input)}"
        if self.type in (TOOL_RESULT, SERVER_TOOL_RESULT):
            return _as_text(self.content)
        if self.type == REDACTED_THINKING:
            return str(self.extra.get("data", ""))
        return _as_text(self.extra)

    def copy(self) -> Block:
        return copy.deepcopy(self)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            else:
                parts.append(_as_text(item))
        return "\n".join(parts)
    if isinstance(value, dict):
        import json

        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


@dataclass
class Message:
    """A message in the context window.

    ``role`` is ``system``, ``user``, ``assistant`` or ``tool`` (an OpenAI tool message; in the
    Anthropic form tool results are blocks of a ``user`` message). ``closed`` is False while the
    message is still streaming. ``extra`` keeps the provider's other message keys verbatim;
    ``form`` remembers the shape the content came in (``str``, ``list``, ``null`` or ``absent``).
    """

    id: str
    role: str
    blocks: list[Block] = field(default_factory=list)
    closed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    form: str = "list"
    seq: int = -1
    tokens: int = 0
    origin: str | None = None

    @property
    def call_ids(self) -> list[str]:
        return [b.id for b in self.blocks if b.call_id is not None]  # type: ignore[misc]  # call_id not None: id is set

    @property
    def answered_ids(self) -> list[str]:
        return [b.tool_use_id for b in self.blocks if b.answers is not None]  # type: ignore[misc]  # answers is tool_use_id

    def tool_links(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """(:attr:`call_ids`, :attr:`answered_ids`, the name of each call, ``""`` when it has none) as
        tuples, in one pass over the blocks: a tracer reads all three for every message event."""
        calls: tuple[str, ...] = ()
        answers: tuple[str, ...] = ()
        names: tuple[str, ...] = ()
        for b in self.blocks:
            kind = b.type
            if kind in _CALLS:
                if b.id is not None:
                    calls += (b.id,)
                    names += (b.name or "",)
            elif kind in _RESULTS and b.tool_use_id is not None:
                answers += (b.tool_use_id,)
        return calls, answers, names

    def plain_text(self) -> str:
        return "\n".join(b.plain_text() for b in self.blocks)

    def has_user_text(self) -> bool:
        return self.role == "user" and any(b.type == TEXT for b in self.blocks) and not self.answered_ids

    def copy(self) -> Message:
        return copy.deepcopy(self)

    @property
    def pinned(self) -> bool:
        """Structurally pinned: it holds a compaction (the conversation's only summary of what came
        before it) or was marked :data:`PINNED` by a converter (an output the server's own history needs)."""
        return bool(self.extra.get(PINNED)) or any(is_compaction(b) for b in self.blocks)

    def shallow_copy(self) -> Message:
        """A copy with its own block objects that shares their payloads (tool input, result
        content, extra values). Enough to append to a context (which sets message and block
        fields, never edits payloads in place), and no recursion: payloads may be deeply nested.
        Fields copied as a dict (no ``__post_init__`` to rerun): ``dataclasses.replace`` took 10% of
        serve's session process (two copies a message; docs/scale.md)."""
        new = _same_fields(self)
        new.blocks = [_same_fields(b) for b in self.blocks]
        for obj in (new, *new.blocks):
            obj.extra = dict(obj.extra)
        return new


def _same_fields(obj: Any) -> Any:
    """A new instance of ``obj``'s dataclass with the same field values (shared, not copied)."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


def is_compaction(block: Block) -> bool:
    """An Anthropic ``compaction`` block or a Responses ``compaction`` item (kept opaque, whole)."""
    return block.type == OTHER and block.extra.get("type") == COMPACTION


def content_digest(message: Message) -> str:
    """A digest of what a message says (role, blocks, call ids, content), not how a framework holds it.

    Converters keep different bookkeeping (ids, provider keys, content shapes) on the way in and out
    of a framework; a message that comes back unchanged digests the same, a rewritten one does not.
    """
    import hashlib  # noqa: PLC0415
    import json  # noqa: PLC0415

    blocks = [[b.type, b.plain_text() if b.type != OTHER else json.dumps(b.extra, sort_keys=True, default=str),
               b.id if b.call_id else None, b.name if b.call_id else None, b.answers, bool(b.is_error)]
              for b in message.blocks]
    role = "tool" if message.role == "user" and message.answered_ids and not message.has_user_text() else message.role
    raw = json.dumps([role, blocks], separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(raw.encode("utf-8"), digest_size=12).hexdigest()


def text_message(mid: str, role: str, text: str, *, closed: bool = True) -> Message:
    """A message holding one text block, in the plain-string form both providers accept."""
    return Message(id=mid, role=role, blocks=[Block(TEXT, text=text)], closed=closed, form="str")


def tool_use(call_id: str, name: str, input: Any) -> Block:
    return Block(TOOL_USE, id=call_id, name=name, input=input)


def tool_result(call_id: str, content: Any, *, is_error: bool | None = None) -> Block:
    return Block(TOOL_RESULT, tool_use_id=call_id, content=content, is_error=is_error)
