"""A token counter for Anthropic, which publishes no tokenizer: a rate per content kind, fitted.

Claude's tokenizer splits prose, JSON and code at different rates, so one characters-per-token
figure over- and under-counts by content. Each message and each request is reduced to features
(the size of its prose, JSON and code; messages; blocks; tool calls and results; tool definitions;
server tools) and the count is a weighted sum. The size of text is measured in ``o200k_base``
tokens when the ``tokens`` extra is installed (a BPE count follows Claude's far closer than
characters do: 2-3 % per turn on plain text against 14 %), else in characters; each measure has
its own fitted weights in :data:`CALIBRATIONS`.

``bench/bench_tokens.py --fit`` fits them in two steps: the per-message weights on the growth of
the provider's ``input_tokens`` between consecutive calls of the τ²-bench claude-opus-4-6
dialogues (the even-numbered dialogues; the odd ones are held out), minimising the mean absolute
per-turn error (the rates shipped were fitted before the harness's retry notes were taken out of
the agent's growth; a refit on the corrected turns was worse held out, see docs/tokens.md); then, those fixed, the per-request weights (tools, strict tools, output format,
server tools) on the whole requests of the training cassettes. ``TOOL_PROMPT`` is Anthropic's
documented tool-use system prompt (Claude 4 models, ``tool_choice`` auto/none: 346 tokens;
any/tool: 313).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import PolicyError
from ..messages import OTHER, REDACTED_THINKING, TEXT, THINKING, Block, Message
from .media import media_tokens, split_media

PROSE, JSON, CODE = "prose", "json", "code"
KINDS = (PROSE, JSON, CODE)
TOOL_PROMPT = {"auto": 346, "none": 346, "any": 313, "tool": 313}

MEASURES = ("bpe", "chars")
MESSAGE_FEATURES = ("prose", "json", "code", "messages", "blocks", "tool_uses", "tool_results")
REQUEST_FEATURES = ("tools", "strict_tools", "output_format", "server_tools")
# tokens per unit of each feature, by measure; see the module docstring for where the numbers come from
CALIBRATIONS: dict[str, dict[str, float]] = {  # bench/bench_tokens.py --fit
    "bpe": {
        "prose": 1.1387, "json": 1.0274, "code": 1.1387, "messages": 3.4482, "blocks": 0.0, "tool_uses": 33.977,
        "tool_results": 33.977, "tools": 100.0712, "strict_tools": 0.0, "output_format": 100.0,
        "server_tools": 337.5881,
    },
    "chars": {
        "prose": 0.2775, "json": 0.3683, "code": 0.2775, "messages": 3.9529, "blocks": 0.0, "tool_uses": 33.7519,
        "tool_results": 33.7519, "tools": 45.2499, "strict_tools": 57.5475, "output_format": 100.0,
        "server_tools": 326.8991,
    },
}
CALIBRATION = CALIBRATIONS["chars"]  # the weights without the tokens extra (kept under its old name)

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


Size = Callable[[str], int]  # the size of a text in the measure's unit


def size_of(measure: str) -> Size:
    """``len`` for characters; for ``bpe``, o200k_base tokens (the ``tokens`` extra)."""
    if measure == "chars":
        return len
    from .bpe import load_encoding  # noqa: PLC0415 - optional extra

    enc = load_encoding("o200k_base")
    return lambda text: len(enc.encode(text, disallowed_special=())) if text else 0


def default_measure() -> str:
    """``bpe`` when the ``tokens`` extra is installed, else ``chars``."""
    from .bpe import available  # noqa: PLC0415

    return "bpe" if available() else "chars"


def split_kinds(text: str, size: Size = len) -> dict[str, int]:
    """The size of each kind in ``text`` (fenced blocks are code; the rest by :func:`kind_of`)."""
    out = dict.fromkeys(KINDS, 0)
    fences = [m.group(0) for m in _FENCE.finditer(text)]
    for f in fences:
        out[CODE] += size(f)
    rest = _FENCE.sub("", text) if fences else text
    if rest:
        out[kind_of(rest)] += size(rest)
    return out


def _value_kinds(value: Any, out: dict[str, int], size: Size) -> None:
    if value is None:
        return
    if isinstance(value, str):
        for k, n in split_kinds(value, size).items():
            out[k] += n
    elif isinstance(value, list) and all(isinstance(v, Mapping) and isinstance(v.get("text"), str) for v in value):
        for v in value:
            _value_kinds(v["text"], out, size)
    else:
        out[JSON] += size(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def message_features(message: Message, size: Size = len) -> dict[str, float]:
    """The counter's features of one message (text sizes in ``size``'s unit)."""
    out = dict.fromkeys(KINDS, 0)
    for b in message.blocks:
        _block_kinds(b, out, size)
    return {PROSE: out[PROSE], JSON: out[JSON], CODE: out[CODE], "messages": 1, "blocks": len(message.blocks),
            "tool_uses": sum(1 for b in message.blocks if b.call_id),
            "tool_results": sum(1 for b in message.blocks if b.answers)}


def _block_kinds(b: Block, out: dict[str, int], size: Size) -> None:
    if b.type in (TEXT, THINKING):
        _value_kinds(b.text or "", out, size)
    elif b.call_id:
        out[PROSE] += size(b.name or "")
        _value_kinds(b.input if b.input is not None else {}, out, size)
    elif b.answers:
        _value_kinds(split_media(b.content)[1], out, size)
    elif b.type == REDACTED_THINKING:
        out[PROSE] += size(str(b.extra.get("data", ""))) // 4
    elif b.type == OTHER and media_tokens(b.extra) is None:
        out[JSON] += size(json.dumps(b.extra, ensure_ascii=False, separators=(",", ":")))


def message_media(message: Message, model: str | None = None) -> int:
    """Tokens of the images, documents and audio in ``message`` by Anthropic's rules (not fitted)."""
    n = 0
    for b in message.blocks:
        if b.type == OTHER:
            n += media_tokens(b.extra, provider="anthropic", model=model) or 0
        elif b.answers:
            n += split_media(b.content, provider="anthropic", model=model)[0]
    return n


def request_features(extra: Mapping[str, Any], size: Size = len) -> tuple[dict[str, float], int]:
    """(features of the tool definitions, the fixed tool-prompt tokens) of a body's other keys."""
    feats: dict[str, float] = dict.fromkeys((*KINDS, *REQUEST_FEATURES), 0.0)
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
        feats[JSON] += size(json.dumps(output, ensure_ascii=False, separators=(",", ":")))
    for t in tools:
        if t.get("type") not in (None, "custom") and "input_schema" not in t:
            feats["server_tools"] += 1
            continue
        if t.get("defer_loading"):
            continue  # not shown to the model until the tool search loads it
        feats["tools"] += 1
        desc = t.get("description")
        if isinstance(desc, str):
            feats[PROSE] += size(desc) + size(str(t.get("name", "")))
        schema = t.get("input_schema")
        if schema is not None:
            feats[JSON] += size(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    return feats, fixed


class AnthropicCounter:
    """Calibrated Anthropic counts (see the module doc).

    ``measure``: ``bpe`` (o200k_base tokens; the default when the ``tokens`` extra is installed) or
    ``chars``; ``calibration`` overrides the fitted rates of that measure; ``model`` picks the image rule.
    """

    def __init__(self, calibration: Mapping[str, float] | None = None, model: str | None = None,
                 measure: str | None = None) -> None:
        measure = measure or default_measure()
        if measure not in MEASURES:
            raise PolicyError(f"unknown measure {measure!r}; choose one of {', '.join(MEASURES)}")
        self.model = model
        self.measure = measure
        self.size = size_of(measure)
        self.weights = dict(CALIBRATIONS[measure])
        self.weights.update(calibration or {})

    def _weigh(self, feats: Mapping[str, float]) -> float:
        return sum(self.weights.get(k, 0.0) * v for k, v in feats.items())

    def count(self, message: Message) -> int:
        return max(1, round(self._weigh(message_features(message, self.size)))) + message_media(message, self.model)

    def count_request_extra(self, extra: Mapping[str, Any], *, has_system: bool = False) -> int:
        feats, fixed = request_features(extra, self.size)
        return fixed + round(self._weigh(feats))
