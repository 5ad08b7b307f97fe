"""Token counting: what the gate measures a context (and a whole request) in.

Three counters, one protocol:

- :class:`ApproxTokenCounter`: characters/4 plus overheads; offline, stdlib, no calibration.
- :class:`~policies.tokens.bpe.TiktokenCounter`: exact BPE counts (o200k_base, cl100k_base) with the
  OpenAI chat framing; loads its encoding offline from the ``bpe-openai`` wheel (extra ``tokens``).
- :class:`~policies.tokens.calibrated.AnthropicCounter`: Anthropic has no public tokenizer; a
  per-content-kind (prose, JSON, code) rate fitted on the providers' recorded ``usage``.

A counter may also count what a request carries outside its messages (tool definitions, the
provider's tool preamble, request framing): :class:`RequestCounter`. :func:`counter_for` picks the
default for a provider. ``bench/bench_tokens.py`` measures all of them against recorded usage.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..messages import OTHER, Block, Message
from .media import media_tokens, split_media

MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 3
REQUEST_OVERHEAD = 3  # the reply's own framing, counted once per request


class TokenCounter(Protocol):
    def count(self, message: Message) -> int: ...


@runtime_checkable
class RequestCounter(Protocol):
    """A counter that also knows what a request costs outside its messages."""

    def count(self, message: Message) -> int: ...

    def count_request_extra(self, extra: Mapping[str, Any], *, has_system: bool = False) -> int:
        """Tokens of the body's other keys (tool definitions, instructions) and the request framing.

        ``has_system``: the messages hold a system message (some framings fold the tools into it).
        """
        ...


class ApproxTokenCounter:
    """About four characters a token (2.7 for JSON tool results), plus per-message and per-block overhead.

    Deterministic and offline, for any provider; bench/bench_tokens.py measures how far off it is.
    The JSON rate was set on the tau-bench gpt-4o JSON tool results past the first 300 (median
    error +1.3% against o200k_base); the benchmark reports the first 300, which it was not set on.
    Prefer the exact (OpenAI) or calibrated (Anthropic) counter where the budget matters.
    """

    chars_per_token: float = 4.0
    json_chars_per_token: float = 2.7

    def __init__(self, chars_per_token: float = 4.0, json_chars_per_token: float = 2.7) -> None:
        if chars_per_token <= 0 or json_chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.chars_per_token = chars_per_token
        self.json_chars_per_token = json_chars_per_token

    def count(self, message: Message) -> int:
        return MESSAGE_OVERHEAD + sum(self.count_block(b) for b in message.blocks)

    def count_block(self, block: Block) -> int:
        if block.type == OTHER:
            media = media_tokens(block.extra)
            if media is not None:  # an image, a document, audio: the provider's rule, never its base64
                return BLOCK_OVERHEAD + media
        media = 0
        if block.answers and isinstance(block.content, list | dict):  # a tool result may carry images
            media, rest = split_media(block.content)
            if media:
                block = dataclasses.replace(block, content=rest)
        text = block.plain_text()
        if block.type in ("tool_use", "server_tool_use") and not isinstance(block.input, str):
            text = f"{block.name or ''}{json.dumps(block.input, ensure_ascii=False, separators=(',', ':'))}"
        if block.answers and _looks_json(text):  # dense JSON: more tokens per character than prose
            return BLOCK_OVERHEAD + media + self._tokens(text, self.json_chars_per_token)
        return BLOCK_OVERHEAD + media + self._tokens(text)

    def count_request_extra(self, extra: Mapping[str, Any], *, has_system: bool = False) -> int:
        tools = extra.get("tools") or []
        text = json.dumps(tools, ensure_ascii=False, separators=(",", ":")) if tools else ""
        instructions = extra.get("instructions")
        if isinstance(instructions, str):
            text += instructions
        return REQUEST_OVERHEAD + (self._tokens(text) if text else 0)

    def _tokens(self, text: str, per_token: float | None = None) -> int:
        per_token = per_token or self.chars_per_token
        return int((len(text) + per_token - 1) // per_token)


def _looks_json(text: str) -> bool:
    s = text.strip()
    return s[:1] in ("{", "[") and s[-1:] in ("}", "]")


def request_overhead(counter: TokenCounter, extra: Mapping[str, Any], *, has_system: bool = False) -> int:
    """What ``extra`` (a body's keys besides its messages) costs, by ``counter`` when it can say."""
    if isinstance(counter, RequestCounter):
        return counter.count_request_extra(extra, has_system=has_system)
    return DEFAULT_COUNTER.count_request_extra(extra, has_system=has_system)


def counter_for(provider: str | None, model: str | None = None) -> TokenCounter:
    """The most exact counter installed for ``provider``: tiktoken for OpenAI when the ``tokens``
    extra is installed (encoding and framing chosen by ``model``: harmony for gpt-5, the o-series
    and gpt-oss), the calibrated counter for Anthropic, else the approximation. ``model`` also
    picks the image rule (OpenAI's tiles or patches by family)."""
    if provider == "openai":
        from .bpe import TiktokenCounter, available  # noqa: PLC0415 - optional extra

        if available():
            return TiktokenCounter(model=model)
        return DEFAULT_COUNTER
    if provider == "anthropic":
        from .calibrated import AnthropicCounter  # noqa: PLC0415

        return AnthropicCounter(model=model)
    return DEFAULT_COUNTER


def __getattr__(name: str) -> Any:  # the counters in their own modules, importable from here
    if name == "TiktokenCounter":
        from .bpe import TiktokenCounter  # noqa: PLC0415

        return TiktokenCounter
    if name == "AnthropicCounter":
        from .calibrated import AnthropicCounter  # noqa: PLC0415

        return AnthropicCounter
    raise AttributeError(name)


DEFAULT_COUNTER = ApproxTokenCounter()
