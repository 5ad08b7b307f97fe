"""Content capture: off unless asked for, and always through the redaction hook.

Structure (ids, roles, unit links, call ids, token counts) is recorded for every message; the
*content* of messages is recorded only when capture is on, following the OpenTelemetry GenAI
convention that message content is opt-in. A redaction hook (``str -> str``) is applied to every
string in a message's content before it is recorded. If the hook raises, the content of that
message is not recorded at all (fail closed): a broken redactor must never leak what it was
meant to hide.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from policies import messages as kinds
from policies.messages import (
    Block,
    Message,
    is_compaction,
)
from policies.policy import Eviction, Proposal
from tracer.contract import names as sn
from tracer.contract.settings import CAPTURE_CONTENT_ENV
from tracer.errors import RedactionFailed

log = logging.getLogger(sn.SCOPE)

CAPTURE_ENV = CAPTURE_CONTENT_ENV
OTEL_CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

Redactor = Callable[[str], str]


def capture_enabled(explicit: bool | None = None) -> bool:
    """Whether to record message content.

    An explicit argument wins; else ``PRUNEGATE_CAPTURE_CONTENT``; else the GenAI convention's
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``; else off.
    """
    if explicit is not None:
        return bool(explicit)
    for name in (CAPTURE_ENV, OTEL_CAPTURE_ENV):
        raw = os.environ.get(name)
        if raw is None:
            continue
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        log.warning("%s=%r is neither true nor false; content capture stays off", name, raw)
        return False
    return False


def redact_value(value: Any, redact: Redactor | None) -> Any:
    """``value`` with ``redact`` applied to every string in it (dict keys are kept)."""
    if redact is None:
        return value
    if isinstance(value, str):
        out = redact(value)
        if not isinstance(out, str):
            raise RedactionFailed(f"redaction hook returned {type(out).__name__}, not str")
        return out
    if isinstance(value, Mapping):
        return {k: redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v, redact) for v in value]
    return value


def safe_redact(value: Any, redact: Redactor | None) -> Any:
    """Like :func:`redact_value`, but any failure of the hook becomes :class:`RedactionFailed`."""
    try:
        return redact_value(value, redact)
    except RedactionFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - a user hook may raise anything
        raise RedactionFailed(f"redaction hook raised {type(exc).__name__}: {exc}") from exc


def block_dict(block: Block) -> dict[str, Any]:
    """A block as a compact dict: its type and the fields that apply, provider extras left out
    (but a thinking block's signature, without which Anthropic refuses the block sent again)."""
    d: dict[str, Any] = {"type": block.type}
    for key in ("text", "id", "name", "input", "tool_use_id", "content", "is_error"):
        value = getattr(block, key)
        if value is not None:
            d[key] = value
    if block.type == kinds.REDACTED_THINKING:
        d["data"] = block.extra.get("data")
    elif block.type == kinds.THINKING and block.extra.get("signature"):
        d["signature"] = block.extra["signature"]  # the provider checks it when the block is sent again
    if is_compaction(block):  # the conversation's only summary of what came before it: kept whole
        d["extra"] = dict(block.extra)
    return d


def message_content_json(message: Message, *, redact: Redactor | None = None) -> str:
    """JSON of one message's blocks after redaction (raises :class:`RedactionFailed`)."""
    return dumps(safe_redact([block_dict(b) for b in message.blocks], redact))


def genai_parts(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    """Blocks as GenAI semantic-convention message parts (``text``, ``tool_call``, ...)."""
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if b.type == kinds.TEXT:
            parts.append({"type": "text", "content": b.text or ""})
        elif b.type == kinds.THINKING:
            parts.append({"type": "reasoning", "content": b.text or ""})
        elif b.type in (kinds.TOOL_USE, kinds.SERVER_TOOL_USE):
            parts.append({"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.input})
        elif b.type in (kinds.TOOL_RESULT, kinds.SERVER_TOOL_RESULT):
            parts.append({"type": "tool_call_response", "id": b.tool_use_id, "response": b.content})
        elif b.type == kinds.REDACTED_THINKING:
            parts.append({"type": "reasoning", "content": ""})
        elif is_compaction(b):  # the conversation's summary so far: kept whole (content or encrypted_content)
            parts.append(dict(b.extra))
        else:
            parts.append({"type": str(b.extra.get("type", "other"))})
    return parts


def genai_messages_json(messages: Iterable[Message], finish_reason: str | None = None, *,
                        redact: Redactor | None = None) -> str:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: GenAI-convention JSON, redacted."""
    out = []
    for m in messages:
        entry: dict[str, Any] = {"role": m.role, "parts": genai_parts(m.blocks)}
        if finish_reason is not None:
            entry["finish_reason"] = finish_reason
        out.append(entry)
    return dumps(safe_redact(out, redact))


_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS  # to default=str, as json does


def dumps(value: Any) -> str:
    """Compact JSON that never fails on odd values (they become strings).

    orjson first: a pruning decision's proposal and scores are dumped on the agent's thread, and the
    standard library took about 25 µs for one (docs/performance.md). What orjson refuses (keys that
    are not str, ints past 64 bits, text that is not UTF-8) the standard library writes."""
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def proposal_json(proposal: Proposal) -> str:
    """``dumps(proposal.to_dict())``, the same text; a proposal of evictions only (what most policies
    propose) written by orjson from the dataclasses themselves, without the dicts in between (a prune
    is recorded on the agent's thread: 1.75 -> 0.69 µs for three evictions). Anything orjson would
    write differently from ``to_dict`` (another Eviction class, odd values) takes the general path."""
    if not proposal.rewrites and not proposal.summaries:
        evictions = proposal.evictions
        if all(type(e) is Eviction for e in evictions):
            try:
                return orjson.dumps({"policy": proposal.policy, "evictions": evictions, "rewrites": [], "summaries": [],
                                     "scores": proposal.scores, "notes": proposal.notes, "error": proposal.error},
                                    option=orjson.OPT_PASSTHROUGH_DATETIME).decode()
            except (TypeError, orjson.JSONEncodeError):  # not JSON as orjson sees it: dumps' fallbacks decide
                return dumps(proposal.to_dict())
    return dumps(proposal.to_dict())


# --------------------------------------------------------------------------- ready-made hooks
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",  # e-mail addresses
    r"\bsk-[A-Za-z0-9_-]{16,}\b",  # API-key shaped secrets (OpenAI/Anthropic style)
    r"\b(?:\d[ -]?){13,19}\b",  # card-number shaped digit runs
)


def redact_patterns(*patterns: str, replacement: str = "[REDACTED]") -> Redactor:
    """A hook replacing every match of the regular expressions (default: e-mails, keys, card numbers)."""
    compiled = [re.compile(p) for p in (patterns or DEFAULT_PATTERNS)]

    def hook(text: str) -> str:
        for rx in compiled:
            text = rx.sub(replacement, text)
        return text

    return hook
