"""OpenAI Responses API input items <-> messages, for adapters that hold items (not whole bodies).

One implementation: :func:`policies.convert.responses_messages` and :func:`policies.convert.responses_items`
(a response's run of output items is one message, a call output a tool message answering its call;
docs/gate.md). This module only accepts SDK objects beside plain dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..convert import ITEM, responses_items, responses_messages
from ..errors import StructureError
from ..messages import Message

__all__ = ["ITEM", "from_items", "to_items"]


def from_items(items: Sequence[Any]) -> list[Message]:
    """Messages for Responses input items (dicts or SDK objects with ``model_dump``)."""
    return responses_messages([_plain(raw, f"input.{i}") for i, raw in enumerate(items)])


def to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Responses input items for messages, rebuilt from their current content."""
    return [item for m in messages for item in responses_items(m)]


def _plain(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        return dict(dump(exclude_none=True))
    raise StructureError(f"{where}: expected a Responses input item (a mapping), got {type(raw).__name__}")
