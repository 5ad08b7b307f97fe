"""A token counter for Anthropic, which publishes no tokenizer: a rate per content kind, fitted.

Claude's tokenizer splits prose, JSON and code at different rates, so one characters-per-token
figure over- and under-counts by content. Each message and each request is reduced to features
(characters of prose, of JSON and of code; messages; blocks; tool definitions; server tools) and
the count is a weighted sum. :data:`CALIBRATION` was fitted by ``bench/bench_tokens.py --fit`` on
the recorded ``usage.input_tokens`` of part of the pydantic-ai cassettes (the rest held out; the
benchmark reports the held-out error). ``TOOL_PROMPT`` is Anthropic's documented tool-use system
prompt (Claude 4 models, ``tool_choice`` auto/none: 346 tokens; any/tool: 313).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..messages import OTHER, REDACTED_THINKING, TEXT, THINKING, Block, Message
from .media import media_tokens, split_media

PROSE, JSON, CODE = "prose", "json", "code"
KINDS = (PROSE, JSON, CODE)
TOOL_PROMPT = {"auto": 346, "none": 346, "any": 313, "tool": 313}

# tokens per unit of each feature; see the module docstring for where the numbers come from
CALIBRATION: dict[str, float] = {  # bench/bench_tokens.py --fit (training files only)
    "prose_chars": 0.2906,
    "json_chars": 0.4219,
    "code_chars": 0.3499,
    "messages": 15.0161,
    "blocks": 10.6332,
    "tools": 14.2119,
    "strict_tools": 87.5944,
    "output_format": 100.0,
    "server_tools": 302.0311,
}

_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_CODE_LINE = re.compile(r"[;{}:]\s*$|^\s*(def|class|import|from|return|function|const|let|var|pass|elif|else)\b"
                        r"|^\s*[A-Za-z_][\w.\[\]]*\s*[+\-*/]?=\s*\S")


def kind_of(text: str) -> str:
    """JSON if it parses as an object or array, code if most lines look like code, else prose."""
    s = text.strip()
    if s[:1] in "{[" and s[-1:] in "}]":
        try:
            json.loads(s)
            return JSON
        except ValueError:
            pass
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) >= 3 and sum(1 for ln in lines if _CODE_LINE.search(ln)) * 2 >= len(lines):
        return CODE
    return PROSE


def split_kinds(text: str) -> dict[str, int]:
    """Characters of each kind in ``text`` (fenced blocks are code; the rest by :func:`kind_of`)."""
    out = dict.fromkeys(KINDS, 0)
    code = sum(len(m.group(0)) for m in _FENCE.finditer(text))
    out[CODE] += code
    rest = _FENCE.sub("", text) if code else text
    if rest:
        out[kind_of(rest)] += len(rest)
    return out


def _value_kinds(value: Any, out: dict[str, int]) -> None:
    if value is None:
        return
    if isinstance(value, str):
        for k, n in split_kinds(value).items():
            out[k] += n
    elif isinstance(value, list) and all(isinstance(v, Mapping) and isinstance(v.get("text"), str) for v in value):
        for v in value:
            _value_kinds(v["text"], out)
    else:
        out[JSON] += len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def message_features(message: Message) -> dict[str, float]:
    """The counter's features of one message."""
    chars = dict.fromkeys(KINDS, 0)
    for b in message.blocks:
        _block_kinds(b, chars)
    return {"prose_chars": chars[PROSE], "json_chars": chars[JSON], "code_chars": chars[CODE],
            "messages": 1, "blocks": len(message.blocks)}


def _block_kinds(b: Block, chars: dict[str, int]) -> None:
    if b.type in (TEXT, THINKING):
        _value_kinds(b.text or "", chars)
    elif b.call_id:
        chars[PROSE] += len(b.name or "")
        _value_kinds(b.input if b.input is not None else {}, chars)
    elif b.answers:
        _value_kinds(split_media(b.content)[1], chars)
    elif b.type == REDACTED_THINKING:
        chars[PROSE] += len(str(b.extra.get("data", ""))) // 4
    elif b.type == OTHER and media_tokens(b.extra) is None:
        chars[JSON] += len(json.dumps(b.extra, ensure_ascii=False, separators=(",", ":")))


def message_media(message: Message, model: str | None = None) -> int:
    """Tokens of the images, documents and audio in ``message`` by Anthropic's rules (not fitted)."""
    n = 0
    for b in message.blocks:
        if b.type == OTHER:
            n += media_tokens(b.extra, provider="anthropic", model=model) or 0
        elif b.answers:
            n += split_media(b.content, provider="anthropic", model=model)[0]
    return n


def request_features(extra: Mapping[str, Any]) -> tuple[dict[str, float], int]:
    """(features of the tool definitions, the fixed tool-prompt tokens) of a body's other keys."""
    feats: dict[str, float] = dict.fromkeys(CALIBRATION, 0.0)
    tools = [t for t in extra.get("tools") or [] if isinstance(t, Mapping)]
    fixed = 0
    if tools:
        choice = extra.get("tool_choice")
        kind = choice.get("type") if isinstance(choice, Mapping) else choice
        fixed = TOOL_PROMPT.get(str(kind or "auto"), TOOL_PROMPT["auto"])
    if any(t.get("strict") for t in tools):
        feats["strict_tools"] = 1  # structured tool inputs bring their own hidden instructions
    output = extra.get("output_config") or extra.get("output_format")
    if isinstance(output, Mapping):
        feats["output_format"] = 1
        feats["json_chars"] += len(json.dumps(output, ensure_ascii=False, separators=(",", ":")))
    for t in tools:
        if t.get("type") not in (None, "custom") and "input_schema" not in t:
            feats["server_tools"] += 1
            continue
        if t.get("defer_loading"):
            continue  # not shown to the model until the tool search loads it
        feats["tools"] += 1
        desc = t.get("description")
        if isinstance(desc, str):
            feats["prose_chars"] += len(desc) + len(str(t.get("name", "")))
        schema = t.get("input_schema")
        if schema is not None:
            feats["json_chars"] += len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    return feats, fixed


class AnthropicCounter:
    """Calibrated Anthropic counts (see the module doc); ``calibration`` overrides the fitted rates."""

    def __init__(self, calibration: Mapping[str, float] | None = None, model: str | None = None) -> None:
        self.model = model
        self.weights = dict(CALIBRATION)
        self.weights.update(calibration or {})

    def _weigh(self, feats: Mapping[str, float]) -> float:
        return sum(self.weights.get(k, 0.0) * v for k, v in feats.items())

    def count(self, message: Message) -> int:
        return max(1, round(self._weigh(message_features(message)))) + message_media(message, self.model)

    def count_request_extra(self, extra: Mapping[str, Any], *, has_system: bool = False) -> int:
        feats, fixed = request_features(extra)
        return fixed + round(self._weigh(feats))
