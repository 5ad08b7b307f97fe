"""The source document's reference check, with the same inputs, results and errors.

Existing runtimes call it before they evict. It rebuilds its unit index from the whole message
list on every call (O(n)); prunegate's own gate keeps that index incrementally instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import PruneBoundaryViolation

__all__ = ["PruneBoundaryViolation", "prune_context"]


def prune_context(
    messages: Iterable[Mapping[str, Any]],
    prune_ids: Iterable[str],
    pending_calls: Iterable[str],
    open_ids: Iterable[str],
) -> set[str]:
    """Return ``prune_ids`` closed under units, or raise :class:`PruneBoundaryViolation`.

    ``messages``: dicts with ``id``, ``unit_id``, ``role``, ``closed``; ``pending_calls``: unit ids
    with an in-flight tool call; ``open_ids``: message ids still streaming. Checks, in order: an
    open prune id; a touched unit not wholly inside the set; a touched unit with an in-flight call.
    """
    prune = set(prune_ids)
    pending = set(pending_calls)
    open_set = set(open_ids)
    members: dict[str, set[str]] = {}
    unit_order: list[str] = []
    touched: list[str] = []
    for i, m in enumerate(messages):
        try:
            mid, uid = m["id"], m["unit_id"]
        except (KeyError, TypeError):
            raise ValueError(f"messages[{i}]: each message needs an 'id' and a 'unit_id'") from None
        if uid not in members:
            members[uid] = set()
            unit_order.append(uid)
        members[uid].add(mid)
        if mid in prune and uid not in touched:
            touched.append(uid)

    for mid in sorted(prune):
        if mid in open_set:
            raise PruneBoundaryViolation(f"prune set contains open/streaming message {mid!r}")
    for uid in touched:
        missing = members[uid] - prune
        if missing:
            raise PruneBoundaryViolation(f"prune set splits unit {uid!r}; missing {missing!r}")
    for uid in touched:
        if uid in pending:
            raise PruneBoundaryViolation(f"prune set contains unit {uid!r} with an in-flight tool call")
    return {mid for uid in touched for mid in members[uid]}
