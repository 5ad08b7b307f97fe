"""Provider validators: would this raw request body be answered with a 400 for its structure?

A prune that splits a tool call from its result does not fail where it happens; it fails one
request later, at the provider. These checks apply the providers' own structural rules to a raw
request body (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses) so that the gate, the
replay lab and the ``prunegate validate`` command can say *before* sending that a body would be
rejected, and why, in the provider's own words.

Each rule is a small object with one ``check`` and the provider's 400 text; :data:`RULES` holds the
ordered tuple of rules per format (docs/validate.md lists them).

Pure standard library, one pass over the messages (O(n) in messages plus their content blocks), and
total: any JSON value is accepted as ``body`` and bad structure comes back as ``malformed``
violations, never as an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeGuard

ORPHAN_TOOL_RESULT = "orphan_tool_result"
MISSING_TOOL_RESULT = "missing_tool_result"
DUPLICATE_TOOL_ID = "duplicate_tool_id"
FIRST_MESSAGE_NOT_USER = "first_message_not_user"
TOOL_RESULT_NOT_FIRST = "tool_result_not_first"
MALFORMED = "malformed"
WRONG_PROVIDER = "wrong_provider"
REASONING_WITHOUT_FOLLOWING = "reasoning_without_following_item"
THINKING_NOT_FIRST = "thinking_not_first"
THINKING_UNSIGNED = "thinking_unsigned"
COMPACTION_MISPLACED = "compaction_misplaced"
DUPLICATE_ITEM_ID = "duplicate_item_id"

CODES = (
    ORPHAN_TOOL_RESULT,
    MISSING_TOOL_RESULT,
    DUPLICATE_TOOL_ID,
    FIRST_MESSAGE_NOT_USER,
    TOOL_RESULT_NOT_FIRST,
    MALFORMED,
    WRONG_PROVIDER,
    REASONING_WITHOUT_FOLLOWING,
    THINKING_NOT_FIRST,
    THINKING_UNSIGNED,
    COMPACTION_MISPLACED,
    DUPLICATE_ITEM_ID,
)

PROVIDERS = ("anthropic", "openai", "responses")


@dataclass(frozen=True)
class Violation:
    """One reason the provider would reject the body.

    ``code`` is one of :data:`CODES` (stable, for programs); ``index`` is the position in
    ``body["messages"]`` (``body["input"]`` for Responses) the provider would blame (``None`` for the body itself); ``ids`` are the
    tool call ids involved; ``message`` is the provider's own error text, as close as known.
    """

    code: str
    index: int | None
    ids: tuple[str, ...]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "index": self.index, "ids": list(self.ids), "message": self.message}


class Rule(Protocol):
    """One structural rule of one provider: ``check`` appends a :class:`Violation` (with the
    provider's own 400 text) for each place ``items`` (the body's messages or input items) breaks it."""

    code: str

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None: ...


def validate(body: Any, provider: str) -> list[Violation]:
    """All structural violations of ``body`` for ``provider`` ("anthropic", "openai" or "responses").

    An empty list means the provider would accept the body's message structure. Violations are
    ordered by message index (body-level ones first).
    """
    rules = RULES.get(provider)
    if rules is None:
        raise ValueError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    if not isinstance(body, dict):
        return [_malformed(None, f"request body must be a JSON object, got {_kind(body)}")]
    out: list[Violation] = []
    shape = shape_of(body)
    if shape is not None and shape[0] != provider:  # said first: the other findings follow from it
        out.append(Violation(WRONG_PROVIDER, None, (),
                             f"this is {_API[shape[0]]} body ({shape[1]}), not {_API[provider]} body"))
    items = _input_items(body, out) if provider == "responses" else _messages(body, provider, out)
    if items is not None:
        for rule in rules:
            rule.check(body, items, out)
    out.sort(key=lambda v: -1 if v.index is None else v.index)
    return out


_API = {"anthropic": "an Anthropic Messages", "openai": "an OpenAI Chat Completions",
        "responses": "an OpenAI Responses API"}
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "compaction")
_OPENAI_BLOCKS = ("image_url", "input_audio", "refusal")
_OPENAI_ONLY_ROLES = ("tool", "system", "developer", "function")


def shape_of(body: dict[str, Any]) -> tuple[str, str] | None:
    """``(provider, evidence)`` when the body is clearly one provider's shape (features only it
    has: a top-level ``system`` or ``tool_use`` blocks for Anthropic; ``tool``/``system`` roles,
    ``tool_calls`` or ``tool_call_id`` for OpenAI; an ``input`` and no ``messages`` for the
    Responses API), None when plain or mixed."""
    if "input" in body and "messages" not in body:
        return "responses", "an 'input' and no 'messages'"
    anthropic: str | None = "a top-level 'system'" if "system" in body else None
    openai: str | None = None
    messages = body.get("messages")
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(m, dict):
            continue
        if openai is None and m.get("role") in _OPENAI_ONLY_ROLES:
            openai = f"messages.{i} has role '{m.get('role')}'"
        for key in ("tool_calls", "tool_call_id"):
            if openai is None and key in m:
                openai = f"messages.{i} has '{key}'"
        content = m.get("content")
        for block in content if isinstance(content, list) else []:
            kind = block.get("type") if isinstance(block, dict) else None
            if not isinstance(kind, str):
                continue
            if anthropic is None and (kind in _ANTHROPIC_BLOCKS or kind.endswith("_tool_result")):
                anthropic = f"messages.{i} has a '{kind}' block"
            if openai is None and kind in _OPENAI_BLOCKS:
                openai = f"messages.{i} has an '{kind}' part"
    if anthropic and not openai:
        return "anthropic", anthropic
    if openai and not anthropic:
        return "openai", openai
    return None


def is_valid(body: Any, provider: str) -> bool:
    """True when :func:`validate` finds nothing: the provider would accept the body's structure."""
    return not validate(body, provider)


# --- shared helpers -------------------------------------------------------------------------


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _is_id(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and value != ""


def _malformed(index: int | None, message: str, ids: tuple[str, ...] = ()) -> Violation:
    return Violation(MALFORMED, index, ids, message)


def _messages(body: dict[str, Any], provider: str, out: list[Violation]) -> list[Any] | None:
    """``body["messages"]`` when it is a non-empty list; otherwise record why not."""
    anthropic = provider == "anthropic"
    if "messages" not in body:
        out.append(_malformed(None, "messages: Field required" if anthropic else
                              "Missing required parameter: 'messages'."))
        return None
    messages = body["messages"]
    if not isinstance(messages, list):
        out.append(_malformed(None, f"messages: Input should be a valid list (got {_kind(messages)})"
                              if anthropic else
                              f"Invalid type for 'messages': expected an array, but got {_kind(messages)} instead."))
        return None
    if not messages:
        out.append(_malformed(None, "messages: at least one message is required" if anthropic else
                              "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                              "but got an empty array instead."))
        return None
    return messages


# --- Anthropic Messages ---------------------------------------------------------------------

_ANTHROPIC_ROLES = ("user", "assistant", "system")  # "system" messages: a beta (tool_addition)
_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})


def _is_server_result(block_type: str) -> bool:
    # web_search_tool_result, tool_search_tool_result, code_execution_tool_result, mcp_tool_result, ...
    return block_type != "tool_result" and block_type.endswith("_tool_result")


def _anthropic_missing(at: int, ids: list[str]) -> Violation:
    return Violation(
        MISSING_TOOL_RESULT, at, tuple(ids),
        f"messages.{at}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message.",
    )


@dataclass
class _Turn:
    """What one Anthropic message contributes to tool pairing."""

    role: str
    calls: list[str] = field(default_factory=list)  # client tool_use ids, in order
    results: list[tuple[int, str, bool]] = field(default_factory=list)  # (position, id, after other)


def _anthropic_blocks(i: int, msg: Any, out: list[Violation]) -> tuple[str, list[tuple[int, dict]]] | None:
    """(role, [(position, block)]) of message ``i``, or None (recorded as malformed)."""
    if not isinstance(msg, dict):
        out.append(_malformed(i, f"messages.{i}: Input should be a valid dictionary (got {_kind(msg)})"))
        return None
    if "role" not in msg:
        out.append(_malformed(i, f"messages.{i}.role: Field required"))
        return None
    role = msg["role"]
    if not isinstance(role, str) or role not in _ANTHROPIC_ROLES:
        out.append(_malformed(i, f"messages.{i}.role: Input should be 'user' or 'assistant' (got {role!r})"))
        return None
    if "content" not in msg:
        out.append(_malformed(i, f"messages.{i}.content: Field required"))
        return None
    content = msg["content"]
    if isinstance(content, str):
        return role, []
    if not isinstance(content, list):
        out.append(_malformed(i, f"messages.{i}.content: Input should be a valid string or list of "
                                 f"content blocks (got {_kind(content)})"))
        return None
    blocks: list[tuple[int, dict]] = []
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            out.append(_malformed(i, f"messages.{i}.content.{j}: Input should be a valid dictionary "
                                     f"(got {_kind(block)})"))
        elif not isinstance(block.get("type"), str):
            out.append(_malformed(i, f"messages.{i}.content.{j}.type: Field required"))
        else:
            blocks.append((j, block))
    return role, blocks


def _anthropic_turn(i: int, msg: Any, out: list[Violation]) -> _Turn | None:
    """Scan message ``i``'s blocks: its calls, its results, and what is wrong inside it alone."""
    parsed = _anthropic_blocks(i, msg, out)
    if parsed is None:
        return None
    role, blocks = parsed
    turn = _Turn(role)
    call_ids: set[str] = set()  # client and server call ids of this message
    server_ids: set[str] = set()  # server call ids seen so far in this message
    other_before = False
    for j, block in blocks:
        kind = block["type"]
        is_call = kind == "tool_use" or kind in _SERVER_CALLS
        if kind == "tool_result" or is_call:
            key = "tool_use_id" if kind == "tool_result" else "id"
            home = "user" if kind == "tool_result" else "assistant"
            ident = block.get(key)
            if role != home:
                out.append(_malformed(i, f"messages.{i}.content.{j}: `{kind}` blocks are only allowed in "
                                         f"`{home}` messages"))
            elif not _is_id(ident):
                out.append(_malformed(i, f"messages.{i}.content.{j}.{key}: Field required (a non-empty string)"))
            elif kind == "tool_result":
                turn.results.append((j, ident, other_before))
            elif ident in call_ids:
                out.append(Violation(DUPLICATE_TOOL_ID, i, (ident,),
                                     f"messages.{i}.content.{j}: `tool_use` ids must be unique"))
            else:
                call_ids.add(ident)
                if kind == "tool_use":
                    turn.calls.append(ident)
                else:
                    server_ids.add(ident)
        elif _is_server_result(kind) and role == "assistant":
            rid = block.get("tool_use_id")
            if not _is_id(rid):
                out.append(_malformed(i, f"messages.{i}.content.{j}.tool_use_id: Field required "
                                         "(a non-empty string)"))
            elif rid not in server_ids:  # must answer a server call made before it, in this message
                out.append(Violation(
                    ORPHAN_TOOL_RESULT, i, (rid,),
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `{kind}` blocks: {rid}. "
                    f"Each `{kind}` block must have a corresponding `server_tool_use` block before it.",
                ))
        else:
            other_before = True
    return turn


def _anthropic_answer(i: int, turn: _Turn, pending: list[str], pending_at: int, out: list[Violation]) -> None:
    """Pair user message ``i``'s tool_result blocks with the calls of the message before it."""
    expected = set(pending)
    seen: set[str] = set()
    orphans: list[tuple[int, str]] = []
    late: list[str] = []
    for j, rid, after_other in turn.results:
        if rid in seen:
            out.append(Violation(
                DUPLICATE_TOOL_ID, i, (rid,),
                f"messages.{i}.content.{j}: each tool_use must have a single result. Found multiple "
                f"`tool_result` blocks with id: {rid}",
            ))
            continue
        seen.add(rid)
        if rid not in expected:
            orphans.append((j, rid))
        elif after_other:
            late.append(rid)
    if late:
        out.append(Violation(
            TOOL_RESULT_NOT_FIRST, i, tuple(late),
            f"messages.{i}: Did not find {len(pending)} `tool_result` block(s) at the beginning of this "
            "message. Messages following `tool_use` blocks must begin with a matching number of "
            "`tool_result` blocks.",
        ))
    if orphans:
        ids = [rid for _, rid in orphans]
        out.append(Violation(
            ORPHAN_TOOL_RESULT, i, tuple(ids),
            f"messages.{i}.content.{orphans[0][0]}: unexpected `tool_use_id` found in `tool_result` "
            f"blocks: {', '.join(ids)}. Each `tool_result` block must have a corresponding `tool_use` "
            "block in the previous message.",
        ))
    unanswered = [cid for cid in pending if cid not in seen]
    if unanswered:
        out.append(_anthropic_missing(pending_at, unanswered))


def _validate_anthropic(messages: list[Any], out: list[Violation]) -> None:
    pending: list[str] = []  # client tool_use ids of the previous (assistant) message
    pending_at = -1
    for i, msg in enumerate(messages):
        turn = _anthropic_turn(i, msg, out)
        if turn is None:
            pending = []  # cannot say what this message answers; do not guess
            continue
        if i == 0 and turn.role != "user":
            out.append(Violation(FIRST_MESSAGE_NOT_USER, 0, (), 'messages: first message must use the "user" role'))
        if turn.role == "user":
            _anthropic_answer(i, turn, pending, pending_at, out)
            pending = []
            continue
        if pending:  # an assistant (or system) message where the results should be
            out.append(_anthropic_missing(pending_at, pending))
        pending, pending_at = (turn.calls, i) if turn.role == "assistant" else ([], -1)
    if pending:  # a request cannot end on unanswered tool calls
        out.append(_anthropic_missing(pending_at, pending))


# --- OpenAI Chat Completions ----------------------------------------------------------------

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _openai_missing(at: int, ids: list[str]) -> Violation:
    return Violation(
        MISSING_TOOL_RESULT, at, tuple(ids),
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}",
    )


def _openai_role(i: int, msg: Any, out: list[Violation]) -> str | None:
    if not isinstance(msg, dict):
        out.append(_malformed(i, f"Invalid type for 'messages[{i}]': expected an object, but got "
                                 f"{_kind(msg)} instead."))
        return None
    if "role" not in msg:
        out.append(_malformed(i, f"Missing required parameter: 'messages[{i}].role'."))
        return None
    role = msg["role"]
    if not isinstance(role, str) or role not in _OPENAI_ROLES:
        out.append(_malformed(i, f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', "
                                 f"'user', 'function', 'tool', and 'developer'. (messages[{i}].role)"))
        return None
    return role


def _openai_calls(i: int, msg: dict[str, Any], out: list[Violation]) -> list[str]:
    """The ids of an assistant message's ``tool_calls`` (malformed entries recorded and skipped)."""
    tool_calls = msg.get("tool_calls")
    if tool_calls is None:
        return []
    if not isinstance(tool_calls, list):
        out.append(_malformed(i, f"Invalid type for 'messages[{i}].tool_calls': expected an array, but got "
                                 f"{_kind(tool_calls)} instead."))
        return []
    ids: list[str] = []
    for j, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            out.append(_malformed(i, f"Invalid type for 'messages[{i}].tool_calls[{j}]': expected an object, "
                                     f"but got {_kind(call)} instead."))
        elif not _is_id(call.get("id")):
            out.append(_malformed(i, f"Missing required parameter: 'messages[{i}].tool_calls[{j}].id'."))
        else:
            ids.append(call["id"])
    return ids


def _validate_openai(messages: list[Any], out: list[Violation]) -> None:
    pending: list[str] = []  # calls of the open assistant message, awaiting tool messages
    pending_set: set[str] = set()
    pending_at = -1
    answered: dict[str, int] = {}  # call id -> tool message that answered it, in the open window
    for i, msg in enumerate(messages):
        role = _openai_role(i, msg, out)
        if role is None:
            pending, pending_set, answered = [], set(), {}  # cannot say what this is; do not guess
            continue
        if role == "tool":
            tcid = msg.get("tool_call_id")
            if not _is_id(tcid):
                out.append(_malformed(i, f"Missing required parameter: 'messages[{i}].tool_call_id'."))
            elif tcid in answered:
                out.append(Violation(
                    DUPLICATE_TOOL_ID, i, (tcid,),
                    f"Invalid parameter: Duplicate value for 'tool_call_id' of '{tcid}' in "
                    f"messages[{answered[tcid]}] and messages[{i}].",
                ))
            elif tcid in pending_set:
                answered[tcid] = i
            else:
                out.append(Violation(
                    ORPHAN_TOOL_RESULT, i, (tcid,),
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    "message with 'tool_calls'.",
                ))
            continue
        # any other message closes the tool-message window of the assistant message before it
        unanswered = [cid for cid in pending if cid not in answered]
        if unanswered:
            out.append(_openai_missing(pending_at, unanswered))
        pending, pending_set, pending_at, answered = [], set(), -1, {}
        if role != "assistant":
            continue
        for cid in _openai_calls(i, msg, out):
            if cid in pending_set:
                out.append(Violation(
                    DUPLICATE_TOOL_ID, i, (cid,),
                    f"Invalid parameter: Duplicate value for 'messages[{i}].tool_calls[].id': '{cid}'.",
                ))
            else:
                pending.append(cid)
                pending_set.add(cid)
        pending_at = i
    unanswered = [cid for cid in pending if cid not in answered]
    if unanswered:  # a request cannot end on unanswered tool calls
        out.append(_openai_missing(pending_at, unanswered))



class OpenAIToolPairing:
    """Chat Completions: every ``tool_calls`` id answered by the tool messages right after it, once;
    every tool message answers a call of the assistant message before it."""

    code = ORPHAN_TOOL_RESULT

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        _validate_openai(items, out)


class AnthropicToolPairing:
    """Messages API: the first message is a user turn; every ``tool_use`` is answered by a
    ``tool_result`` at the start of the next user message; server tool results follow their call."""

    code = ORPHAN_TOOL_RESULT

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        _validate_anthropic(items, out)


# --- Anthropic thinking and compaction -----------------------------------------------------------

_THINKING = ("thinking", "redacted_thinking")


def _thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _blocks_of(msg: Any) -> list[Any]:
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else []


def _turn_in_progress(items: list[Any]) -> int | None:
    """The index of the final assistant message when the request continues its turn (everything after
    it is user content made only of ``tool_result`` blocks), else None."""
    for i in range(len(items) - 1, -1, -1):
        msg = items[i]
        if not isinstance(msg, dict):
            return None
        if msg.get("role") == "assistant":
            return i if i < len(items) - 1 else None
        blocks = _blocks_of(msg)
        if msg.get("role") != "user" or not blocks or \
                not all(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            return None
    return None


class ThinkingLeadsTurn:
    """With thinking enabled, the assistant message whose tool use the request continues starts with
    its thinking (or redacted_thinking) block; a compaction block may come before it."""

    code = THINKING_NOT_FIRST
    text: ClassVar[str] = (
        "messages.{i}.content.{j}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding "
        "the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks "
        "from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation "
        "at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        if not _thinking_enabled(body):
            return
        i = _turn_in_progress(items)
        if i is None:
            return
        blocks = _blocks_of(items[i])
        content = items[i].get("content")
        j = 0
        while j < len(blocks) and isinstance(blocks[j], dict) and blocks[j].get("type") == "compaction":
            j += 1
        first = blocks[j] if j < len(blocks) else None
        kind = first.get("type") if isinstance(first, dict) else None
        if kind not in _THINKING:
            found = "text" if isinstance(content, str) else (kind or "nothing")
            out.append(Violation(self.code, i, (), self.text.format(i=i, j=j, found=found)))


class ThinkingSigned:
    """Thinking blocks travel back unchanged: a ``thinking`` block keeps its ``signature``, a
    ``redacted_thinking`` block its ``data`` (a gate that rewrites or drops either breaks the turn)."""

    code = THINKING_UNSIGNED
    text: ClassVar[str] = "messages.{i}.content.{j}.{kind}.{key}: Field required"

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        for i, msg in enumerate(items):
            for j, block in enumerate(_blocks_of(msg)):
                kind = block.get("type") if isinstance(block, dict) else None
                key = {"thinking": "signature", "redacted_thinking": "data"}.get(kind or "")
                if key is not None and not _is_id(block.get(key)):
                    out.append(Violation(self.code, i, (), self.text.format(i=i, j=j, kind=kind, key=key)))


def unrecorded(messages: Iterable[Any]) -> frozenset[str]:
    """Codes of the rules a recorded conversation cannot meet because its recording never held what
    they check: a thinking block without the signature (or redacted data) that the instrumentation
    did not record (OpenLLMetry keeps the thinking text only). The gate never rewrites a block, so on
    an import or a replay such a violation would say nothing about the request that was sent or about
    the policy; a live request (guard, ``prunegate validate``) is always checked in full."""
    for m in messages:
        for b in getattr(m, "blocks", ()):
            key = {"thinking": "signature", "redacted_thinking": "data"}.get(b.type)
            if key is not None and not _is_id(b.extra.get(key)):
                return frozenset({THINKING_UNSIGNED})
    return frozenset()


class CompactionInAssistant:
    """A ``compaction`` block (server-side compaction, ``compact_20260112``) comes back in the
    assistant message it arrived in, with its ``content``."""

    code = COMPACTION_MISPLACED
    text: ClassVar[str] = "messages.{i}.content.{j}: `compaction` blocks are only allowed in `assistant` messages"

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        for i, msg in enumerate(items):
            for j, block in enumerate(_blocks_of(msg)):
                if isinstance(block, dict) and block.get("type") == "compaction" and msg.get("role") != "assistant":
                    out.append(Violation(self.code, i, (), self.text.format(i=i, j=j)))


# --- OpenAI Responses API ------------------------------------------------------------------------

_RESPONSES_ROLES = ("user", "assistant", "system", "developer")
# call items and the key their output answers with; outputs and the key they answer by
_CALLS = {"function_call": "call_id", "custom_tool_call": "call_id", "computer_call": "call_id",
          "local_shell_call": "call_id", "shell_call": "call_id", "apply_patch_call": "call_id",
          "mcp_approval_request": "id", "program": "call_id"}
_OUTPUTS = {"function_call_output": "call_id", "custom_tool_call_output": "call_id",
            "computer_call_output": "call_id", "local_shell_call_output": "id", "shell_call_output": "call_id",
            "apply_patch_call_output": "call_id", "mcp_approval_response": "approval_request_id",
            "program_output": "call_id"}
_NEEDS_OUTPUT = ("function_call", "custom_tool_call")  # the calls the API refuses to see unanswered
_FOLLOWERS = frozenset({"function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call",
                        "apply_patch_call", "mcp_approval_request", "program", "web_search_call",
                        "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call",
                        "mcp_list_tools", "tool_search_call", "tool_search_output", "item_reference", "message"})


def _item_type(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    if "role" in item:
        return "message"
    return "item_reference" if set(item) == {"id"} else None


def _input_items(body: dict[str, Any], out: list[Violation]) -> list[Any] | None:
    """``body["input"]`` as a list of items (a string is one user message); otherwise why not."""
    if "input" not in body:
        if "messages" in body:
            out.append(_malformed(None, "Unrecognized request argument supplied: messages"))
        return None
    items = body["input"]
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        out.append(_malformed(None, f"Invalid type for 'input': expected one of a string or array of input "
                                    f"items, but got {_kind(items)} instead."))
        return None
    return items


class ResponsesItemShape:
    """Every item an object with a known role (messages) and the id its call or output pairs by."""

    code = MALFORMED

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        for i, item in enumerate(items):
            kind = _item_type(item)
            if not isinstance(item, dict):
                out.append(_malformed(i, f"Invalid type for 'input[{i}]': expected an object, but got "
                                         f"{_kind(item)} instead."))
            elif kind is None:
                out.append(_malformed(i, f"Missing required parameter: 'input[{i}].type'."))
            elif kind == "message" and item.get("role") not in _RESPONSES_ROLES:
                out.append(_malformed(i, f"Invalid value: {item.get('role')!r}. Supported values are: "
                                         f"'assistant', 'system', 'developer', and 'user'. (input[{i}].role)"))
            else:
                key = _CALLS.get(kind) or _OUTPUTS.get(kind)
                if key is not None and not _is_id(item.get(key)):
                    out.append(_malformed(i, f"Missing required parameter: 'input[{i}].{key}'."))
                if kind == "compaction" and not _is_id(item.get("encrypted_content")):
                    out.append(_malformed(i, f"Missing required parameter: 'input[{i}].encrypted_content'."))


class ReasoningFollowed:
    """A ``reasoning`` item comes with the item the same response produced after it (a call, a
    server tool item, the assistant message): sending it alone, or before an item of another turn,
    is refused."""

    code = REASONING_WITHOUT_FOLLOWING
    text: ClassVar[str] = "Item '{id}' of type 'reasoning' was provided without its required following item."

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        for i, item in enumerate(items):
            if _item_type(item) != "reasoning":
                continue
            j = i + 1
            while j < len(items) and _item_type(items[j]) == "reasoning":
                j += 1
            nxt = items[j] if j < len(items) else None
            kind = _item_type(nxt)
            follows = kind in _FOLLOWERS and (kind != "message" or (isinstance(nxt, dict)
                                                                   and nxt.get("role") == "assistant"))
            if not follows:
                rid = str(item.get("id", ""))
                out.append(Violation(self.code, i, (rid,) if rid else (), self.text.format(id=rid)))


def _server_holds_calls(body: dict[str, Any], items: list[Any]) -> bool:
    """Calls may live outside ``input``: in ``previous_response_id``, a ``conversation`` or a referenced item."""
    return bool(body.get("previous_response_id")) or bool(body.get("conversation")) or \
        any(_item_type(item) == "item_reference" for item in items)


class OutputHasCall:
    """A call output answers a call made earlier in the input (or held by the server, when the body
    continues ``previous_response_id``, a ``conversation`` or references items)."""

    code = ORPHAN_TOOL_RESULT
    text: ClassVar[str] = "No tool call found for {what} with call_id {id}."

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        if _server_holds_calls(body, items):
            return
        issued: set[str] = set()
        for i, item in enumerate(items):
            kind = _item_type(item)
            if kind in _CALLS and _is_id(item.get(_CALLS[kind])):
                issued.add(item[_CALLS[kind]])
            elif kind in _OUTPUTS:
                cid = item.get(_OUTPUTS[kind])
                if _is_id(cid) and cid not in issued:
                    out.append(Violation(self.code, i, (cid,), self.text.format(what=kind.replace("_", " "),
                                                                                 id=cid)))


class CallHasOutput:
    """A function (or custom tool) call in the input is answered by its output item."""

    code = MISSING_TOOL_RESULT
    text: ClassVar[str] = "No tool output found for {what} {id}."

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        answered = {item.get(_OUTPUTS[k]) for item in items if (k := _item_type(item)) in _OUTPUTS}
        for i, item in enumerate(items):
            kind = _item_type(item)
            if kind in _NEEDS_OUTPUT and _is_id(item.get("call_id")) and item["call_id"] not in answered:
                what = "function call" if kind == "function_call" else "custom tool call"
                out.append(Violation(self.code, i, (item["call_id"],),
                                     self.text.format(what=what, id=item["call_id"])))


_PLACEHOLDER_IDS = frozenset({"__fake_id__"})  # the OpenAI Agents SDK's id for items a Chat Completions model made


class UniqueItemIds:
    """No item id appears twice in the input (the Agents SDK's placeholder id aside: those items
    never reach the Responses API with it)."""

    code = DUPLICATE_ITEM_ID
    text: ClassVar[str] = "Duplicate item found with id {id}. Remove duplicate items from your input and try again."

    def check(self, body: dict[str, Any], items: list[Any], out: list[Violation]) -> None:
        seen: set[str] = set()
        for i, item in enumerate(items):
            iid = item.get("id") if isinstance(item, dict) and _item_type(item) != "item_reference" else None
            if not _is_id(iid) or iid in _PLACEHOLDER_IDS:
                continue
            if iid in seen:
                out.append(Violation(self.code, i, (iid,), self.text.format(id=iid)))
            seen.add(iid)


RULES: dict[str, tuple[Rule, ...]] = {
    "anthropic": (AnthropicToolPairing(), ThinkingLeadsTurn(), ThinkingSigned(), CompactionInAssistant()),
    "openai": (OpenAIToolPairing(),),
    "responses": (ResponsesItemShape(), ReasoningFollowed(), OutputHasCall(), CallHasOutput(), UniqueItemIds()),
}
