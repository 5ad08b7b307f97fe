"""Token counting. Pluggable; the default is an offline estimate that needs no download."""

from __future__ import annotations

import json
from typing import Protocol

from .messages import Block, Message

MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 3


class TokenCounter(Protocol):
    def count(self, message: Message) -> int: ...


class ApproxTokenCounter:
    """About four characters a token, plus a small per-message and per-block overhead.

    Close enough to BPE counts on English and JSON for budgeting; deterministic and offline.
    """

    chars_per_token: float = 4.0

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.chars_per_token = chars_per_token

    def count(self, message: Message) -> int:
        return MESSAGE_OVERHEAD + sum(self.count_block(b) for b in message.blocks)

    def count_block(self, block: Block) -> int:
        text = block.plain_text()
        if block.type in ("tool_use", "server_tool_use") and not isinstance(block.input, str):
            text = f"{block.name or ''}{json.dumps(block.input, ensure_ascii=False, separators=(',', ':'))}"
        return BLOCK_OVERHEAD + int((len(text) + self.chars_per_token - 1) // self.chars_per_token)


class TiktokenCounter:
    """Exact BPE counts with ``tiktoken`` (optional). Its encodings must already be cached locally."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        try:
            import tiktoken  # noqa: PLC0415 - optional extra
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise ImportError("TiktokenCounter needs the optional 'tiktoken' package") from exc
        self._enc = tiktoken.get_encoding(encoding)

    def count(self, message: Message) -> int:
        return MESSAGE_OVERHEAD + sum(BLOCK_OVERHEAD + len(self._enc.encode(b.plain_text())) for b in message.blocks)


DEFAULT_COUNTER = ApproxTokenCounter()
