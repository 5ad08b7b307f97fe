"""Transcript → event stream: the order in which a live runtime would have seen a conversation.

A transcript says what was sent, not when. Replay rebuilds the conditions under which pruning
fails (shared/DESIGN.md, "The problem"):

* a **model call** precedes every assistant turn but an opening one (a scripted greeting: nothing was
  sent before it), and ends a transcript that stops on a request:
  the replay renders the context for the session's provider at that moment and validates it;
* the assistant turn is **appended**; each of its client tool calls is **executed** (a ``tool``
  event, flagged when the tool looks side-effecting);
* the turn's results arrive **one at a time**, in recorded order or shuffled with a seed; an
  Anthropic user message holding N results is split into N single-result messages (they render
  back into one user message) plus the rest of its blocks;
* a result may arrive **streamed**: ``open`` (empty), N ``delta`` events, ``close``; the streams
  of one batch run concurrently (interleaved round-robin, or in a seeded random order);
* every append, open, delta and close is followed by a budget check (the replay's job).

The stream also carries what later turns refer back to (:class:`Reference`), so a replay can
measure how much of it each policy kept in context.

Pure: no context, no gate, no tracing.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from policies.messages import SERVER_TOOL_USE, TEXT, TOOL_RESULT, TOOL_USE, Block, Message

MODEL_CALL, APPEND, OPEN, DELTA, CLOSE, TOOL = "model_call", "append", "open", "delta", "close", "tool"
EVENT_KINDS = (MODEL_CALL, APPEND, OPEN, DELTA, CLOSE, TOOL)

# Tool names that look side-effecting: a verb that changes the world, as a prefix (book_flight,
# cancelOrder) or the whole name (send).
SIDE_EFFECT_VERBS = (
    "add", "book", "buy", "cancel", "charge", "create", "delete", "deploy", "drop", "edit", "exec",
    "insert", "issue", "modify", "order", "pay", "post", "publish", "purchase", "put", "refund",
    "remove", "reserve", "schedule", "send", "set", "submit", "transfer", "update", "upload", "write",
)
_VERB_RE = re.compile("^(?:" + "|".join(SIDE_EFFECT_VERBS) + r")(?:_|-|[A-Z]|$)")


def looks_side_effecting(name: str | None) -> bool:
    """True for tool names such as ``book_flight``, ``cancelOrder``, ``send``; False for ``get_x``."""
    if not name:
        return False
    head = name[0].lower() + name[1:]
    return bool(_VERB_RE.match(head))


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happens to the context (or next to it: model calls, tool executions).

    ``message`` (append/open) is a template: the replay appends a copy. ``message_id`` names the
    message a delta/close targets, or the assistant message a model call produces (None for the
    final request). ``call_ids`` of a model call are the calls of the last assistant turn before it
    (what a naive retry re-issues).
    """

    kind: str
    message: Message | None = None
    message_id: str | None = None
    text: str = ""
    call_id: str | None = None
    tool_name: str | None = None
    side_effect: bool = False
    call_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reference:
    """A later assistant turn refers back to an earlier message.

    ``source`` is the most recent earlier message holding one of ``tokens``; ``holders`` are all
    earlier messages holding any of them (the value is still available if any holder, with the
    token still in its text, is in context).
    """

    referrer: str
    source: str
    tokens: tuple[str, ...]
    holders: tuple[str, ...]


@dataclass
class EventStream:
    """A session's events plus what each model call needs (references, side-effecting tools)."""

    provider: str
    events: list[Event]
    references: dict[str, list[Reference]] = field(default_factory=dict)  # referrer msg id -> refs
    side_effect_tools: frozenset[str] = frozenset()
    streamed: int = 0  # results delivered as streams

    def __len__(self) -> int:
        return len(self.events)

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(EVENT_KINDS, 0)
        for e in self.events:
            out[e.kind] += 1
        return out


def build_events(
    messages: list[Message],
    provider: str,
    *,
    shuffle_seed: int | None = None,
    stream_chunks: int = 0,
    streamed_calls: Iterable[str] = (),
    side_effect_tools: Iterable[str] | None = None,
    session_stream_chunks: int = 4,
    ambient_text: str = "",
) -> EventStream:
    """The event stream of a transcript.

    ``shuffle_seed`` shuffles the arrival order of each batch's results; ``stream_chunks`` > 0
    streams every string result in that many deltas; ``streamed_calls`` (from the session) streams
    those calls' results in ``session_stream_chunks`` deltas even when ``stream_chunks`` is 0.
    ``side_effect_tools`` replaces the name heuristic. ``ambient_text`` (tool definitions, ...) is
    always in the request: tokens in it are not references.
    """
    rng = random.Random(shuffle_seed) if shuffle_seed is not None else None
    streamed_set = set(streamed_calls)
    side = set(side_effect_tools) if side_effect_tools is not None else None
    events: list[Event] = []
    seq_messages: list[Message] = []  # messages in arrival order, for references
    last_calls: tuple[str, ...] = ()
    side_names: set[str] = set()
    n_streamed = 0
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        if msg.role != "assistant":
            events.append(Event(APPEND, message=msg))
            seq_messages.append(msg)
            i += 1
            continue
        if seq_messages:  # an opening assistant message (a scripted greeting) had no request before it
            events.append(Event(MODEL_CALL, message_id=msg.id, call_ids=last_calls))
        events.append(Event(APPEND, message=msg))
        seq_messages.append(msg)
        calls = [b for b in msg.blocks if b.type == TOOL_USE and b.id]
        events.extend(_tool_events(msg.id, calls, side, side_names))
        if calls:
            last_calls = tuple(b.id for b in calls if b.id)
        results, rest, i = _gather_results(messages, i + 1, {b.id for b in calls if b.id})
        if rng is not None and len(results) > 1:
            rng.shuffle(results)
        arrivals: list[list[Event]] = []
        for r in results:
            chunks = stream_chunks or (session_stream_chunks if r.blocks[0].tool_use_id in streamed_set else 0)
            arrival = _arrival(r, chunks)
            if arrival[0].kind == OPEN:
                n_streamed += 1
            arrivals.append(arrival)
            seq_messages.append(r)
        events.extend(_interleave(arrivals, rng))
        for m in rest:
            events.append(Event(APPEND, message=m))
            seq_messages.append(m)
    if not messages or messages[-1].role != "assistant":
        events.append(Event(MODEL_CALL, message_id=None, call_ids=last_calls))
    names = side if side is not None else side_names
    refs = find_references(seq_messages, ambient_text=ambient_text)
    return EventStream(provider, events, refs, frozenset(names), n_streamed)


def _tool_events(message_id: str, calls: list[Block], side: set[str] | None, side_names: set[str]) -> list[Event]:
    """One tool execution per call, flagged side-effecting by ``side`` (else by name); notes those names."""
    out = []
    for b in calls:
        is_side = (b.name in side) if side is not None else looks_side_effecting(b.name)
        if is_side and b.name:
            side_names.add(b.name)
        out.append(Event(TOOL, call_id=b.id, tool_name=b.name, side_effect=is_side, message_id=message_id))
    return out


def _gather_results(messages: list[Message], i: int, pending: set[str]) -> tuple[list[Message], list[Message], int]:
    """The results of ``pending`` calls in the messages from ``i`` on, one message per result, and what
    else those messages held (text beside the results); the index after them."""
    results: list[Message] = []
    rest: list[Message] = []
    while i < len(messages) and pending and _answers_any(messages[i], pending):
        singles, remainder = split_results(messages[i])
        for single in singles:
            pending.discard(single.blocks[0].tool_use_id or "")
        results.extend(singles)
        if remainder is not None:
            rest.append(remainder)
        i += 1
    return results, rest, i


def _arrival(result: Message, chunks: int) -> list[Event]:
    """How one tool result arrives: a stream of ``chunks`` deltas when asked and possible, else an append."""
    if chunks > 0 and _streamable(result):
        text = result.blocks[0].content
        return _stream(result, text if isinstance(text, str) else _joined(text), chunks)
    return [Event(APPEND, message=result)]


def _interleave(arrivals: list[list[Event]], rng: random.Random | None) -> list[Event]:
    """One batch's arrivals: single results one after another; streams of a batch run concurrently.

    Streams interleave round-robin (or in a seeded random order), so a stream is still open while
    another result arrives: the condition of the source document's second failure.
    """
    if sum(1 for a in arrivals if len(a) > 1) < 2:
        return [e for a in arrivals for e in a]
    out: list[Event] = []
    pos = [0] * len(arrivals)
    live = list(range(len(arrivals)))
    while live:
        for k in ([rng.choice(live)] if rng is not None else list(live)):
            out.append(arrivals[k][pos[k]])
            pos[k] += 1
            if pos[k] == len(arrivals[k]):
                live.remove(k)
    return out


def _answers_any(msg: Message, pending: set[str]) -> bool:
    return any(b.type == TOOL_RESULT and b.tool_use_id in pending for b in msg.blocks)


def split_results(msg: Message) -> tuple[list[Message], Message | None]:
    """One message per tool result (``role: tool``), plus a message with the other blocks, if any.

    An OpenAI tool message is already one result and comes back as it is.
    """
    results = [b for b in msg.blocks if b.type == TOOL_RESULT]
    if msg.role == "tool" and len(msg.blocks) == 1:
        return [msg], None
    singles = [
        Message(id=f"{msg.id}.r{k}", role="tool", blocks=[b], form="list") for k, b in enumerate(results)
    ]
    others = [b for b in msg.blocks if b.type != TOOL_RESULT]
    remainder = None
    if others:
        remainder = Message(id=msg.id, role=msg.role, blocks=others, extra=dict(msg.extra),
                            form="list", origin=msg.origin)
    return singles, remainder


def _streamable(msg: Message) -> bool:
    content = msg.blocks[0].content
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(c, dict) and c.get("type") == "text" for c in content)


def _joined(content: list) -> str:
    return "\n".join(c.get("text", "") for c in content)


def _stream(msg: Message, text: str, chunks: int) -> list[Event]:
    head = msg.blocks[0]
    opened = Message(id=msg.id, role=msg.role,
                     blocks=[Block(TOOL_RESULT, tool_use_id=head.tool_use_id, content="", is_error=head.is_error,
                                   extra=dict(head.extra))],
                     extra=dict(msg.extra), form=msg.form, origin=msg.origin)
    out = [Event(OPEN, message=opened, call_id=head.tool_use_id)]
    size = len(text)
    for k in range(chunks):
        piece = text[k * size // chunks:(k + 1) * size // chunks]
        if piece:
            out.append(Event(DELTA, message_id=msg.id, text=piece, call_id=head.tool_use_id))
    out.append(Event(CLOSE, message_id=msg.id, call_id=head.tool_use_id))
    return out


# ------------------------------------------------------------------------------- references
_TOKEN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-.@/:]*[A-Za-z0-9]|[0-9]")
_DIGIT_RE = re.compile(r"[0-9]")
MIN_WORD = 6  # letters-only tokens shorter than this are never references
MAX_WORD_HOLDERS = 2  # a word is rare when at most this many messages hold it


def tokens_of(text: str) -> set[str]:
    """The candidate reference tokens of a text, lower-cased: ids and numbers (a digit, 3+
    characters) and words (6+ characters)."""
    found = set(_TOKEN_RE.findall(text.lower()))
    return {t for t in found if len(t) >= MIN_WORD or (len(t) >= 3 and _DIGIT_RE.search(t))}


def _referable_text(msg: Message) -> str:
    """What a message says: text, tool inputs and results (tool names excluded: they recur by design)."""
    parts = []
    for b in msg.blocks:
        if b.type in (TOOL_USE, SERVER_TOOL_USE):
            parts.append(_input_text(b.input))
        elif b.type == TEXT or b.type == TOOL_RESULT:
            parts.append(b.plain_text())
    return "\n".join(parts)


def _input_text(value: object) -> str:
    """The scalar values of a tool input, in order, space-separated (iterative: inputs nest deeply)."""
    out: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif item is not None:
            out.append(str(item))
    return " ".join(out)


def find_references(messages: list[Message], *, ambient_text: str = "") -> dict[str, list[Reference]]:
    """For every assistant message, the earlier messages it refers back to.

    A token links two messages when it is id-like (has a digit, 3+ characters) or a rare word
    (letters only, 6+ characters, held by at most two messages). Tokens in system messages or in
    ``ambient_text`` (tool definitions) are always in the request and never count. A later tool
    call's input values count like text, so "a later call uses a value from it" is a reference.
    """
    ambient = tokens_of(ambient_text)
    for m in messages:
        if m.role in ("system", "developer"):
            ambient |= tokens_of(_referable_text(m))
    toks: list[set[str]] = []
    holders_count: dict[str, int] = {}
    for m in messages:
        t = set() if m.role in ("system", "developer") else tokens_of(_referable_text(m)) - ambient
        toks.append(t)
        for tok in t:
            holders_count[tok] = holders_count.get(tok, 0) + 1

    def qualifies(tok: str) -> bool:
        return any(c.isdigit() for c in tok) or holders_count.get(tok, 0) <= MAX_WORD_HOLDERS

    position = {m.id: i for i, m in enumerate(messages)}
    out: dict[str, list[Reference]] = {}
    holders: dict[str, list[str]] = {}  # token -> ids of earlier messages holding it, oldest first
    for m, t in zip(messages, toks, strict=True):
        if m.role == "assistant" and t:
            by_source: dict[str, list[str]] = {}
            for tok in sorted(t):
                if tok in holders and qualifies(tok):
                    by_source.setdefault(holders[tok][-1], []).append(tok)
            refs = []
            for source, shared in by_source.items():
                hs = sorted({h for tok in shared for h in holders[tok]}, key=position.__getitem__)
                refs.append(Reference(m.id, source, tuple(shared), tuple(hs)))
            if refs:
                out[m.id] = refs
        for tok in t:
            holders.setdefault(tok, []).append(m.id)
    return out
