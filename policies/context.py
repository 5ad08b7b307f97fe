"""The context window as structural units, kept incrementally.

A unit is the transitive closure of messages linked by call/result and by parallel-batch
membership (all calls of one assistant message share a unit). The index is updated on every
append, so a budget check never rescans the context.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import convert
from .errors import DuplicateToolIdError, EvictedMessageError, OrphanResultError, StructureError
from .messages import SERVER_TOOL_RESULT, SERVER_TOOL_USE, TEXT, TOOL_RESULT, TOOL_USE, Block, Message
from .observer import APPEND, CLOSE, DELTA, OPEN, REINJECT, REMOVE, REWRITE, Observer, ObserverErrors
from .tokens import DEFAULT_COUNTER, TokenCounter, request_overhead

SYSTEM_ROLES = ("system", "developer")
_TOOL_BLOCKS = (TOOL_USE, SERVER_TOOL_USE, TOOL_RESULT, SERVER_TOOL_RESULT)


@dataclass
class Unit:
    """A structural unit: pruned, spilled and re-injected whole or not at all."""

    id: str
    message_ids: list[str] = field(default_factory=list)
    call_ids: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)  # calls without a closed result
    open_ids: set[str] = field(default_factory=set)  # messages still streaming
    tokens: int = 0
    first_seq: int = 0
    last_seq: int = 0
    roles: set[str] = field(default_factory=set)
    summary: bool = False
    orphan: bool = False  # holds a result whose call is not in the context (ungated runs only)
    partial: bool = False  # lost a member to an ungated removal

    @property
    def closed(self) -> bool:
        return not self.pending and not self.open_ids

    @property
    def kind(self) -> str:
        if self.summary:
            return "summary"
        if self.roles & set(SYSTEM_ROLES):
            return "system"
        if len(self.call_ids) > 1:
            return "batch"
        if self.call_ids:
            return "tool"
        if "assistant" in self.roles:
            return "assistant"
        return "user"


@dataclass
class Spilled:
    """A unit moved to the spill store: where it was, so it can come back in place."""

    unit_id: str
    key: str
    message_ids: list[str]
    call_ids: list[str]
    tokens: int
    first_seq: int
    summary: bool = False


class Context:
    """An ordered context window with a unit index, pending calls and open (streaming) messages.

    ``strict`` (default) refuses duplicate tool ids and results for unknown calls with a
    :class:`~policies.errors.StructureError` naming the message; ungated replays of naive runtimes
    use ``strict=False`` so that orphans can be observed instead of refused.
    """

    def __init__(
        self,
        *,
        token_counter: TokenCounter | None = None,
        observer: Observer | None = None,
        strict: bool = True,
        provider: str | None = None,
        request_extra: dict | None = None,
        session_id: str | None = None,
        count_request: bool = False,
    ) -> None:
        self.counter = token_counter or DEFAULT_COUNTER
        self.count_request = count_request
        self._overhead: dict[bool, int] = {}
        self.observer = observer
        self.observer_errors = ObserverErrors()
        self.strict = strict
        self.provider = provider
        self.request_extra = dict(request_extra or {})
        self.session_id = session_id
        self.seq = 0  # event counter: every append, delta, close and decision advances it
        self.tokens = 0
        self.units: dict[str, Unit] = {}
        self.pending: dict[str, str] = {}  # call id -> unit id
        self.open_ids: set[str] = set()
        self.spilled: dict[str, Spilled] = {}
        self._messages: dict[str, Message] = {}
        self._unit_of: dict[str, str] = {}
        self._call_owner: dict[str, str] = {}  # call id -> unit id
        self._answered: dict[str, str] = {}  # call id -> message id of its result
        self._gone: dict[str, str] = {}  # message id -> why it left the context
        self._gone_calls: set[str] = set()
        self._next_msg = 0
        self._next_unit = 0
        self._first_user: str | None = None
        self._last_user: str | None = None
        self._last_msg: str | None = None
        self._pinned_msgs: set[str] = set()
        self._system_units: set[str] = set()  # units holding a system/developer message
        self._needs_reorder = False  # a message was admitted at an older position (re-injection, summary)

    # ------------------------------------------------------------------ the request around the messages
    @property
    def request_extra(self) -> dict:
        """The request body's other keys (model, tools, instructions, ...)."""
        return self._request_extra

    @request_extra.setter
    def request_extra(self, extra: dict) -> None:
        self._request_extra = extra
        self._overhead = {}

    @property
    def overhead_tokens(self) -> int:
        """Tokens the request costs besides its messages (tool definitions, instructions, framing).

        Counted only with ``count_request=True``; the system prompt is a message and always counts.
        """
        if not self.count_request:
            return 0
        has_system = bool(self._system_units)
        n = self._overhead.get(has_system)
        if n is None:
            n = self._overhead[has_system] = request_overhead(self.counter, self._request_extra,
                                                              has_system=has_system)
        return n

    @property
    def request_tokens(self) -> int:
        """What the budget is held against: the messages plus :attr:`overhead_tokens`."""
        return self.tokens + self.overhead_tokens

    # ------------------------------------------------------------------ construction
    @classmethod
    def _from(cls, provider: str, parsed: tuple[list[Message], dict], kwargs: dict[str, Any]) -> Context:
        """A context holding ``parsed`` (messages, the body's other keys) for ``provider``."""
        messages, rest = parsed
        ctx = cls(provider=provider, request_extra=rest, **kwargs)
        ctx.extend(messages)
        return ctx

    @classmethod
    def from_anthropic(cls, body: dict, **kwargs: Any) -> Context:
        return cls._from(convert.ANTHROPIC, convert.from_anthropic(body), kwargs)

    @classmethod
    def from_openai(cls, body: dict, **kwargs: Any) -> Context:
        return cls._from(convert.OPENAI, convert.from_openai(body), kwargs)

    @classmethod
    def from_responses(cls, body: dict, **kwargs: Any) -> Context:
        """A context for an OpenAI Responses API body (``input`` items; the other keys kept as they are)."""
        return cls._from(convert.RESPONSES, convert.from_responses(body), kwargs)

    def to_anthropic(self) -> dict:
        return convert.to_anthropic(list(self._messages.values()), self.request_extra)

    def to_openai(self) -> dict:
        return convert.to_openai(list(self._messages.values()), self.request_extra)

    def to_responses(self) -> dict:
        return convert.to_responses(list(self._messages.values()), self.request_extra)

    def render(self, provider: str | None = None) -> dict:
        """The request body for ``provider`` (default: the one the context came from, else Anthropic)."""
        provider = provider or self.provider or convert.ANTHROPIC
        if provider == convert.RESPONSES:
            return self.to_responses()
        return self.to_openai() if provider == convert.OPENAI else self.to_anthropic()

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    # ------------------------------------------------------------------ read access
    def __len__(self) -> int:
        return len(self._messages)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._messages

    @property
    def messages(self) -> list[Message]:
        return list(self._messages.values())

    def iter_messages(self, *, newest_first: bool = False) -> Iterator[Message]:
        """Messages in context order without copying the list (O(1) to start)."""
        return iter(reversed(self._messages.values()) if newest_first else self._messages.values())

    def message(self, message_id: str) -> Message:
        try:
            return self._messages[message_id]
        except KeyError:
            raise self._missing(message_id) from None

    def unit_of(self, message_id: str) -> Unit:
        try:
            return self.units[self._unit_of[message_id]]
        except KeyError:
            raise self._missing(message_id) from None

    def unit_id_of(self, message_id: str) -> str | None:
        return self._unit_of.get(message_id)

    def unit_of_call(self, call_id: str) -> Unit | None:
        uid = self._call_owner.get(call_id)
        return self.units.get(uid) if uid else None

    def gone_reason(self, message_id: str) -> str | None:
        return self._gone.get(message_id)

    @property
    def at_commit_boundary(self) -> bool:
        """No tool call in flight and no message streaming."""
        return not self.pending and not self.open_ids

    def pinned_unit_ids(self) -> set[str]:
        """System units, the first user message, the live turn (last user message and last message),
        and units holding a structurally pinned message (a compaction; see ``Message.pinned``)."""
        pins: set[str] = set()
        for mid in (self._first_user, self._last_user, self._last_msg, *self._pinned_msgs):
            if mid is not None and mid in self._unit_of:
                pins.add(self._unit_of[mid])
        for uid in self._system_units:
            pins.add(uid)
        return pins

    def pin(self, message_id: str) -> None:
        """Never prune the unit holding this message."""
        self.message(message_id)
        self._pinned_msgs.add(message_id)

    # ------------------------------------------------------------------ mutation: arrivals
    def append(
        self,
        message: Message | None = None,
        *,
        role: str | None = None,
        text: str | None = None,
        blocks: list[Block] | None = None,
        closed: bool = True,
        id: str | None = None,
    ) -> Message:
        """Add a message at the end. Calls it issues become pending; results it holds answer them."""
        if message is None:
            if role is None:
                raise StructureError("append: give a Message or a role")
            if blocks is None:
                blocks = [Block(TEXT, text=text or "")]
                form = "str"
            else:
                form = "list"
            message = Message(id=id or "", role=role, blocks=blocks, closed=closed, form=form)
        elif not closed:
            message.closed = False
        self._admit(message)
        self._notify_message(message, OPEN if not message.closed else APPEND)
        self._maybe_closed(self._unit_of[message.id])
        return message

    def open(self, role: str, *, blocks: list[Block] | None = None, text: str = "", id: str | None = None) -> Message:
        """Start a streaming message; it stays open until :meth:`close`."""
        return self.append(role=role, blocks=blocks, text=text, closed=False, id=id)

    def append_delta(self, message_id: str, delta: str) -> Message:
        """Stream text into an open message. Raises if the message left the context."""
        msg = self._messages.get(message_id)
        if msg is None:
            raise self._missing(message_id, writing=True)
        if msg.closed:
            raise StructureError(f"message '{message_id}' is closed; cannot append to it")
        target = msg.blocks[-1] if msg.blocks else None
        if target is None:
            target = Block(TEXT, text="")
            msg.blocks.append(target)
        if target.type == TOOL_RESULT:
            if target.content is None:
                target.content = ""
            if not isinstance(target.content, str):
                raise StructureError(f"message '{message_id}': cannot stream into structured tool_result content")
            target.content += delta
        elif target.type == TEXT:
            target.text = (target.text or "") + delta
        else:
            raise StructureError(f"message '{message_id}': cannot stream into a {target.type} block")
        self.seq += 1
        self._retoken(msg)
        self._notify_message(msg, DELTA, delta_chars=len(delta))
        return msg

    def close(self, message_id: str) -> Message:
        """Finish a streaming message: its results now answer their calls."""
        msg = self._messages.get(message_id)
        if msg is None:
            raise self._missing(message_id, writing=True)
        if msg.closed:
            return msg
        msg.closed = True
        self.seq += 1
        self.open_ids.discard(message_id)
        unit = self.units[self._unit_of[message_id]]
        unit.open_ids.discard(message_id)
        for call_id in msg.answered_ids:
            if call_id in unit.pending:
                unit.pending.discard(call_id)
                self.pending.pop(call_id, None)
        self._notify_message(msg, CLOSE)
        self._maybe_closed(unit.id)
        return msg

    # ------------------------------------------------------------------ mutation: the gate's operations
    def remove_units(self, unit_ids: Iterable[str], cause: str) -> list[Message]:
        """Remove whole units (the gate's prune). Refuses units with anything in flight."""
        removed: list[Message] = []
        for uid in list(unit_ids):
            unit = self.units.get(uid)
            if unit is None:
                raise StructureError(f"unit '{uid}' is not in the context")
            if not unit.closed:
                raise StructureError(f"unit '{uid}' has work in flight; it cannot be removed")
        for uid in list(unit_ids):
            unit = self.units.pop(uid)
            self._system_units.discard(uid)
            for mid in unit.message_ids:
                msg = self._messages.pop(mid)
                del self._unit_of[mid]
                self._gone[mid] = cause
                self.tokens -= msg.tokens  # before the event: its context.tokens is "after"
                removed.append(msg)
                self._notify_message(msg, REMOVE, cause=cause)
            for call_id in unit.call_ids:
                if self._call_owner.get(call_id) == uid:
                    del self._call_owner[call_id]
                self._gone_calls.add(call_id)
        return removed

    def remove_messages(self, message_ids: Iterable[str], cause: str) -> list[Message]:
        """Remove messages regardless of units: what a naive, ungated runtime does.

        Splits units and may orphan results; used to reproduce failures, never by the gate.
        """
        removed = []
        for mid in list(message_ids):
            if mid not in self._messages:
                continue
            msg = self._messages.pop(mid)
            uid = self._unit_of.pop(mid)
            unit = self.units[uid]
            unit.message_ids.remove(mid)
            unit.tokens -= msg.tokens
            unit.open_ids.discard(mid)
            self.open_ids.discard(mid)
            self.tokens -= msg.tokens
            for call_id in msg.call_ids:
                if self._call_owner.get(call_id) == uid:
                    del self._call_owner[call_id]
                self._gone_calls.add(call_id)
                if call_id in unit.pending:
                    unit.pending.discard(call_id)
                    self.pending.pop(call_id, None)
                unit.call_ids.discard(call_id)
            if unit.message_ids:
                unit.partial = True
                rest = [self._messages[m] for m in unit.message_ids]
                unit.roles = {m.role for m in rest}
                gone_calls = set(msg.call_ids)
                if gone_calls and any(c in gone_calls for m in rest for c in m.answered_ids):
                    unit.orphan = True  # its results now answer a call that is not in the context
            else:
                self.units.pop(uid)
                self._system_units.discard(uid)
            self._gone[mid] = cause
            removed.append(msg)
            self._notify_message(msg, REMOVE, cause=cause)
        return removed

    def replace_message(self, message_id: str, new: Message, cause: str = "rewrite") -> Message:
        """Rewrite a closed message's content; its calls and results must stay the same."""
        self.check_rewrite(message_id, new)
        return self.overwrite_message(message_id, new, cause)

    def overwrite_message(self, message_id: str, new: Message, cause: str) -> Message:
        """Put ``new`` in the message's place (same id, position, unit and open/closed state), unchecked.

        :meth:`replace_message` checks first; a naive runtime calls this directly, even on a message
        still in flight, to reproduce what happens without the gate. Returns the old message.
        """
        old = self.message(message_id)
        new.id, new.seq, new.closed = old.id, old.seq, old.closed
        new.tokens = self.counter.count(new)
        self._messages[message_id] = new
        delta = new.tokens - old.tokens
        self.units[self._unit_of[message_id]].tokens += delta
        self.tokens += delta
        self._notify_message(new, REWRITE, cause=cause, tokens_before=old.tokens)
        return old

    def check_rewrite(self, message_id: str, new: Message) -> None:
        """Raise :class:`StructureError` unless ``new`` may replace the message: the message is in a
        closed unit and ``new`` keeps its role, its tool call ids and the ids it answers."""
        old = self.message(message_id)
        unit = self.unit_of(message_id)
        if not unit.closed:
            raise StructureError(f"message '{message_id}' is in unit '{unit.id}' with work in flight")
        if new is old:
            return
        if new.id and self._messages.get(new.id) is new:
            raise StructureError(f"rewrite of '{message_id}' reuses message '{new.id}', which is in the context")
        _check_tool_ids(new, f"rewrite of '{message_id}'")
        if sorted(old.call_ids) != sorted(new.call_ids) or sorted(old.answered_ids) != sorted(new.answered_ids):
            raise StructureError(f"rewrite of '{message_id}' changes its tool ids; rewrites must keep structure")
        if new.role != old.role:
            raise StructureError(f"rewrite of '{message_id}' changes its role from {old.role!r} to {new.role!r}")

    def check_summary(self, unit_ids: Iterable[str], summary: Message) -> list[str]:
        """The distinct unit ids ``summary`` may replace, or :class:`StructureError` saying why not.

        Checked before anything is removed, so a bad summary never leaves the context half-edited.
        """
        uids = list(dict.fromkeys(unit_ids))
        if not uids:
            raise StructureError("summary replaces no unit")
        for uid in uids:
            unit = self.units.get(uid)
            if unit is None:
                raise StructureError(f"summary names unit '{uid}', which is not in the context")
            if not unit.closed:
                raise StructureError(f"summary names unit '{uid}', which has work in flight")
        if any(b.type in _TOOL_BLOCKS for b in summary.blocks):
            raise StructureError("a summary must not carry tool calls or tool results")
        if summary.id and (summary.id in self._messages or summary.id in self._gone):
            raise StructureError(f"summary message id '{summary.id}' is already used in this context")
        return uids

    def replace_units(self, unit_ids: list[str], summary: Message, cause: str) -> list[Message]:
        """Replace whole closed units with one summary message placed where the first of them was."""
        unit_ids = self.check_summary(unit_ids, summary)
        first_seq = min(self.units[u].first_seq for u in unit_ids)
        removed = self.remove_units(unit_ids, cause)
        summary.closed = True
        self.insert_summary(summary, seq=first_seq, summary_of=unit_ids)
        return removed

    def insert_summary(self, summary: Message, *, seq: int, summary_of: list[str]) -> Message:
        """Admit ``summary`` as a unit of its own at position ``seq``, reported as replacing ``summary_of``.

        The caller has removed what it replaces: :meth:`replace_units` (whole units, checked) or a
        naive runtime (raw messages, unchecked).
        """
        self._admit(summary, seq=seq, summary=True)
        self._notify_message(summary, APPEND, summary_of=list(summary_of))
        return summary

    def spill_unit(self, unit_id: str, key: str) -> Spilled:
        """Record that a closed unit moved to a spill store under ``key`` and drop it from the window."""
        unit = self.units[unit_id]
        record = Spilled(unit_id, key, list(unit.message_ids), sorted(unit.call_ids), unit.tokens, unit.first_seq,
                         unit.summary)
        self.remove_units([unit_id], cause=f"spilled:{key}")
        for mid in record.message_ids:
            self._gone[mid] = f"spilled to {key}"
        self.spilled[unit_id] = record
        return record

    def restore_unit(self, unit_id: str, messages: list[Message]) -> Unit:
        """Put a spilled unit back at its original place, all of it or (on a clash) nothing."""
        record = self.spilled.get(unit_id)
        if record is None:
            raise StructureError(f"unit '{unit_id}' is not spilled")
        if sorted(m.id for m in messages) != sorted(record.message_ids):
            raise StructureError(f"unit '{unit_id}': the spill store returned other messages than were spilled")
        for msg in messages:
            if msg.id in self._messages:
                raise StructureError(f"cannot re-inject unit '{unit_id}': message id '{msg.id}' is in use again")
            for call_id in msg.call_ids:
                if call_id in self.pending:
                    raise StructureError(f"cannot re-inject unit '{unit_id}': tool call id '{call_id}' is in flight again")
        del self.spilled[unit_id]
        for msg in sorted(messages, key=lambda m: m.seq):
            self._gone.pop(msg.id, None)
            for call_id in msg.call_ids:
                self._gone_calls.discard(call_id)
            self._admit(msg, seq=msg.seq, unit_id=unit_id, summary=record.summary)
            self._notify_message(msg, REINJECT)
        self._reorder()
        return self.units[unit_id]

    # ------------------------------------------------------------------ internals
    def _admit(self, msg: Message, *, seq: int | None = None, unit_id: str | None = None, summary: bool = False) -> None:
        """Add ``msg`` to the window (at ``seq`` when given: a summary or a re-injection placed in the
        past) in unit ``unit_id`` or a new one; everything is checked before anything changes."""
        self._check_admissible(msg)
        self.seq += 1
        msg.seq = self.seq if seq is None else seq
        msg.tokens = self.counter.count(msg)
        if seq is not None and self._messages and msg.seq < self._last_seq():
            self._needs_reorder = True
        self._messages[msg.id] = msg
        unit = self._join_unit(msg, unit_id, summary)
        unit = self._link_calls(msg, unit)
        self._note_roles(msg, unit.id, arrival=seq is None)
        if self._needs_reorder:
            self._reorder()

    def _check_admissible(self, msg: Message) -> None:
        """Give ``msg`` an id if it has none; raise unless its id and tool ids fit the context."""
        where = f"message {len(self._messages)}"
        if not msg.id:
            while f"m{self._next_msg}" in self._messages or f"m{self._next_msg}" in self._gone:
                self._next_msg += 1
            msg.id = f"m{self._next_msg}"
            self._next_msg += 1
        elif msg.id in self._messages:
            raise StructureError(f"{where}: message id '{msg.id}' is already in the context")
        where = f"message '{msg.id}'"
        _check_tool_ids(msg, where)
        for call_id in msg.call_ids:
            if call_id in self.pending or (call_id in self._call_owner and call_id not in self._answered):
                raise DuplicateToolIdError(f"{where}: tool call id '{call_id}' is already in flight")
        seen: set[str] = set()
        for call_id in msg.answered_ids:
            if call_id in seen or call_id in self._answered and self._answered[call_id] in self._messages:
                raise DuplicateToolIdError(f"{where}: tool call id '{call_id}' is answered twice")
            seen.add(call_id)
            if call_id not in self._call_owner and call_id not in msg.call_ids and self.strict:
                raise OrphanResultError(f"{where}: result for tool call id '{call_id}', which no message in the context issued")
        if len(set(msg.call_ids)) != len(msg.call_ids):
            raise DuplicateToolIdError(f"{where}: the same tool call id appears twice in one message")

    def _join_unit(self, msg: Message, unit_id: str | None, summary: bool) -> Unit:
        """Put the (placed) message in unit ``unit_id``, created if needed (a fresh id when None)."""
        uid = unit_id
        if uid is None or uid not in self.units:
            if uid is None:
                uid = f"u{self._next_unit}"
                self._next_unit += 1
            self.units[uid] = Unit(uid, first_seq=msg.seq, last_seq=msg.seq, summary=summary)
        unit = self.units[uid]
        unit.message_ids.append(msg.id)
        unit.tokens += msg.tokens
        unit.first_seq = min(unit.first_seq, msg.seq)
        unit.last_seq = max(unit.last_seq, msg.seq)
        unit.roles.add(msg.role)
        self._unit_of[msg.id] = uid
        self.tokens += msg.tokens
        if not msg.closed:
            unit.open_ids.add(msg.id)
            self.open_ids.add(msg.id)
        return unit

    def _link_calls(self, msg: Message, unit: Unit) -> Unit:
        """Record the calls ``msg`` issues (pending until answered) and the calls it answers, merging
        its unit with each answered call's unit. Returns the unit the message ends up in."""
        uid = unit.id
        for call_id in msg.call_ids:
            if self._call_owner.get(call_id) != uid:
                # a fresh issue of this id: new, or reused after its first pair completed (OpenAI
                # accepts it; real traffic does it), or after that pair left the context. Its old
                # answer does not answer this call.
                self._answered.pop(call_id, None)
            self._call_owner[call_id] = uid
            unit.call_ids.add(call_id)
            if call_id not in self._answered:
                unit.pending.add(call_id)
                self.pending[call_id] = uid
        for call_id in msg.answered_ids:
            owner = self._call_owner.get(call_id)
            self._answered[call_id] = msg.id
            if owner is None:
                unit.orphan = True
                continue
            if owner != uid:
                uid = self._merge(owner, uid)
                unit = self.units[uid]
            if msg.closed:
                unit.pending.discard(call_id)
                self.pending.pop(call_id, None)
        return unit

    def _note_roles(self, msg: Message, uid: str, *, arrival: bool) -> None:
        """Remember system units, the first and last user message and the last arrival (for pinning)."""
        if msg.role in SYSTEM_ROLES:
            self._system_units.add(uid)
        if msg.pinned:
            self._pinned_msgs.add(msg.id)
        if msg.role == "user" and msg.has_user_text():
            if self._first_user is None or self._first_user not in self._unit_of:
                self._first_user = msg.id
            if arrival:  # not a summary or a re-injection placed in the past
                self._last_user = msg.id
        elif msg.role == "user" and self._first_user is None:
            self._first_user = msg.id
        if arrival:
            self._last_msg = msg.id

    def _last_seq(self) -> int:
        last = next(reversed(self._messages.values()))
        return last.seq

    def _merge(self, keep: str, other: str) -> str:
        """Union two units; the older one's id survives."""
        a, b = self.units[keep], self.units[other]
        if b.first_seq < a.first_seq:
            a, b = b, a
        for mid in b.message_ids:
            self._unit_of[mid] = a.id
        a.message_ids.extend(b.message_ids)
        a.message_ids.sort(key=lambda m: self._messages[m].seq)
        a.call_ids |= b.call_ids
        a.pending |= b.pending
        a.open_ids |= b.open_ids
        a.tokens += b.tokens
        a.first_seq = min(a.first_seq, b.first_seq)
        a.last_seq = max(a.last_seq, b.last_seq)
        a.roles |= b.roles
        a.orphan = a.orphan or b.orphan
        a.partial = a.partial or b.partial
        a.summary = a.summary and b.summary
        for call_id in b.call_ids:
            self._call_owner[call_id] = a.id
            if call_id in self.pending:
                self.pending[call_id] = a.id
        if b.id in self._system_units:
            self._system_units.discard(b.id)
            self._system_units.add(a.id)
        del self.units[b.id]
        return a.id

    def _reorder(self) -> None:
        self._messages = dict(sorted(self._messages.items(), key=lambda kv: kv[1].seq))
        self.units = dict(sorted(self.units.items(), key=lambda kv: kv[1].first_seq))
        self._needs_reorder = False

    def _retoken(self, msg: Message) -> None:
        new = self.counter.count(msg)
        delta = new - msg.tokens
        msg.tokens = new
        self.units[self._unit_of[msg.id]].tokens += delta
        self.tokens += delta

    def _maybe_closed(self, unit_id: str) -> None:
        unit = self.units.get(unit_id)
        if unit is not None and unit.closed and self.observer is not None:
            self.observer_errors.call(self.observer.on_unit_closed, self, unit)

    def _notify_message(self, msg: Message, event: str, **info: Any) -> None:
        observer = self.observer
        if observer is not None:
            try:
                observer.on_message(self, msg, event, **info)
            except Exception as exc:  # noqa: BLE001 - tracing must never crash the agent
                self.observer_errors.failed(exc)

    def _missing(self, message_id: str, writing: bool = False) -> Exception:
        why = self._gone.get(message_id)
        if why is not None:
            verb = "cannot write into it" if writing else "it is not in the context"
            return EvictedMessageError(f"message '{message_id}' left the context ({why}); {verb}")
        return StructureError(f"no message '{message_id}' in the context")


def _check_tool_ids(msg: Message, where: str) -> None:
    """Every tool call block needs an id and every tool result the id it answers."""
    for i, b in enumerate(msg.blocks):
        if b.type in (TOOL_USE, SERVER_TOOL_USE) and not (isinstance(b.id, str) and b.id):
            raise StructureError(f"{where}: block {i} ({b.type}) has no tool call id")
        if b.type in (TOOL_RESULT, SERVER_TOOL_RESULT) and not (isinstance(b.tool_use_id, str) and b.tool_use_id):
            raise StructureError(f"{where}: block {i} ({b.type}) does not say which tool call it answers")
