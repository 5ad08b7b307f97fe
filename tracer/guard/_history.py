"""An agent's message history, seen one request at a time: what is new, what was dropped.

Agents usually keep their own full history and send all of it with every request. To act on
it incrementally, :mod:`tracer.guard.instrument` and :mod:`tracer.guard.shadow` fingerprint each message of a
request body and match the fingerprints against the previous request's: the matched messages
keep their context id, the rest are new (or, for a trimmer's output, removed).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from policies import convert
from policies.errors import StructureError
from policies.messages import Message, content_digest
from tracer.spans.genai import plain

SYSTEM_KEY = "__system__"  # an Anthropic body's top-level ``system`` as one history item


def fingerprint(item: Any) -> str:
    """A short stable digest of one history item (key order does not matter)."""
    raw = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(raw.encode("utf-8"), digest_size=12).hexdigest()


def message_fingerprint(message: Message) -> str:
    """What a message says, however a framework holds it (:func:`policies.messages.content_digest`)."""
    return content_digest(message)


def split_body(body: Any, provider: str) -> tuple[list[Any], dict[str, Any]]:
    """(history items, the other keys) of a request body; SDK objects become plain data.

    For Anthropic the top-level ``system`` is the first item, so a changed system prompt counts
    as a changed history. A bare list is taken as the messages themselves.
    """
    if isinstance(body, (list, tuple)):
        body = {"messages": list(body)}
    body = plain(body)
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise StructureError(f"{provider} body: expected an object with a 'messages' list")
    rest = {k: v for k, v in body.items() if k not in ("messages", "system")}
    items: list[Any] = []
    if provider == convert.ANTHROPIC and "system" in body:
        items.append({SYSTEM_KEY: body["system"]})
    elif "system" in body:
        rest["system"] = body["system"]
    items.extend(body["messages"])
    return items, rest


def is_responses_body(body: Any) -> bool:
    """An OpenAI Responses API body: an ``input`` (items or a string) and no ``messages``."""
    if not isinstance(body, Mapping):
        body = plain(body)
    return isinstance(body, Mapping) and "input" in body and "messages" not in body


def is_system_item(item: Any) -> bool:
    """An Anthropic top-level ``system`` or a system/developer message."""
    return isinstance(item, Mapping) and (SYSTEM_KEY in item or item.get("role") in ("system", "developer"))


def to_messages(items: Sequence[Any], provider: str, *, offset: int = 0) -> list[Message]:
    """Convert history items to messages, one message per item (errors name the item's index)."""
    out: list[Message] = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, Mapping) and SYSTEM_KEY in item:
                msgs, _ = convert.from_anthropic({"system": item[SYSTEM_KEY], "messages": []})
            elif provider == convert.OPENAI:
                msgs, _ = convert.from_openai({"messages": [item]})
            else:
                msgs, _ = convert.from_anthropic({"messages": [item]})
        except StructureError as exc:
            raise StructureError(f"history item {offset + i}: {exc}") from None
        out.extend(msgs)
    return out


def match(previous: Sequence[str], current: Sequence[str]) -> list[int | None]:
    """For each current fingerprint, the index of the same item in ``previous`` (in order), or None.

    A greedy in-order subsequence match: items the agent kept map to their old positions, new or
    changed items map to None, and previous items nobody maps to were dropped. O(n log n).
    """
    where: dict[str, list[int]] = {}
    for i, fp in enumerate(previous):
        where.setdefault(fp, []).append(i)
    out: list[int | None] = []
    pos = 0
    for fp in current:
        slots = where.get(fp)
        k = bisect.bisect_left(slots, pos) if slots else 0
        if slots and k < len(slots):
            out.append(slots[k])
            pos = slots[k] + 1
        else:
            out.append(None)
    return out


def first_difference(a: Sequence[str], b: Sequence[str]) -> int:
    """The first index where two fingerprint lists differ (the shorter length if one is a prefix)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def join_body(items: Sequence[Any], rest: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """The request body of history items (the inverse of :func:`split_body`)."""
    body: dict[str, Any] = dict(rest)
    messages = []
    for item in items:
        if isinstance(item, Mapping) and SYSTEM_KEY in item:
            body["system"] = item[SYSTEM_KEY]
        else:
            messages.append(item)
    body["messages"] = messages
    return body


def langchain_to_openai(items: Sequence[Any]) -> list[Any] | None:
    """OpenAI message dicts for a list of LangChain messages; None when they are not LangChain's."""
    if not items or isinstance(items[0], Mapping):
        return None
    try:
        from langchain_core.messages import BaseMessage, convert_to_openai_messages  # noqa: PLC0415 - optional
    except ImportError:
        return None
    if not all(isinstance(m, BaseMessage) for m in items):
        return None
    return list(convert_to_openai_messages(list(items)))
