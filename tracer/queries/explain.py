"""Why did this request break: the reader-side answers the Replay and Violations pages put on one screen.

- :func:`violations_at`: the violations recorded at a step (from a session's extracted tables);
- :func:`evicted_units`: which units a prune evicted, wholly or in part, read from the context just
  before it. An ungated prune records only message ids (a naive runtime has no units), so the
  units are recovered here, for every prune, from the same data the context bar shows;
- :func:`violating_units`: the units in context that hold the messages a violation names;
- :func:`gated_counterpart`: the same source session replayed under the same policy with the gate,
  and the step there that matches a step here (matched by the last message that had arrived).

Values travel as parameters; nothing recorded is formatted into SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import pyarrow as pa

from tracer.contract import names as sn
from tracer.queries._sql import MESSAGE, SESSION, VIOLATION, Source, _one, records, scratch

__all__ = ["evicted_units", "gated_counterpart", "gated_twin", "twin_step", "violating_units", "violations_at"]


def violations_at(tables: dict[str, pa.Table], seq: int) -> pd.DataFrame:
    """The violations at step ``seq``: ``span_id``, ``code``, ``ids`` (the call or message ids it
    names, as text) and ``message`` (the provider's or the checker's words), in recorded order."""
    con = scratch()
    try:
        con.register("events", tables["events"])
        return con.execute(
            "SELECT span_id, what AS code, coalesce(subject, '') AS ids, coalesce(detail, '') AS message "
            "FROM events WHERE seq = $seq AND name = $name ORDER BY t, span_id",
            {"seq": int(seq), "name": VIOLATION},
        ).df()
    finally:
        con.close()


def _ids(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value if v is not None]


def evicted_units(before: pd.DataFrame, pruned_ids: Iterable[str]) -> pd.DataFrame:
    """The units of the context just before a prune (``units`` of :func:`~tracer.queries.step_from_tables`)
    that lost at least one message to it: ``unit_id``, ``kind``, ``tokens``, ``evicted`` (the
    message ids it lost), ``kept`` (those it kept) and ``whole`` (False: the prune split the unit,
    which only an ungated prune does). In context order."""
    gone = set(_ids(list(pruned_ids)))
    rows = []
    if not before.empty:
        for rec in before.to_dict("records"):
            members = _ids(rec.get("message_ids"))
            lost = [m for m in members if m in gone]
            if lost:
                kept = [m for m in members if m not in gone]
                rows.append({"unit_id": str(rec["unit_id"]), "kind": rec.get("kind"), "tokens": rec.get("tokens"),
                             "evicted": lost, "kept": kept, "whole": not kept})
    return pd.DataFrame(rows, columns=["unit_id", "kind", "tokens", "evicted", "kept", "whole"])


def violating_units(messages: pd.DataFrame, *, ids: Iterable[str] = (), message_ids: Iterable[str] = ()) -> list[str]:
    """Units in context holding a message the violation names: by message id, or by a tool call id
    the message issues or answers. In context order."""
    named_msgs, named_ids = set(_ids(list(message_ids))), set(_ids(list(ids)))
    out: list[str] = []
    if messages.empty:
        return out
    for rec in messages.to_dict("records"):
        calls = set(_ids(rec.get("call_ids"))) | set(_ids(rec.get("answers")))
        if str(rec["message_id"]) in named_msgs or calls & named_ids:
            uid = str(rec["unit_id"])
            if uid not in out:
                out.append(uid)
    return out


def gated_counterpart(src: Source, session_id: str, seq: int) -> dict[str, Any] | None:
    """The gated replay of the same source session under the same policy (and parameters; the
    same arrival seed and streaming preferred), and its step matching ``seq`` (:func:`twin_step`).
    None when the store holds no such replay."""
    twin_id = gated_twin(src, session_id)
    if twin_id is None:
        return None
    return {"session_id": twin_id, "step": twin_step(src, session_id, seq, twin_id)}


def gated_twin(src: Source, session_id: str) -> str | None:
    """The gated replay of the same source session under the same policy and parameters (the same
    arrival seed and streaming preferred, then the newest): a search of every session's root, so
    callers keep it per session."""
    twin = _one(src, f"""
        WITH me AS (
            SELECT attributes->>'{sn.SESSION_SOURCE_ID}' AS source_id, policy,
                   coalesce(attributes->>'{sn.POLICY_PARAMS}', '') AS params,
                   coalesce(attributes->>'{sn.REPLAY_SEED}', '') AS seed,
                   coalesce(attributes->>'{sn.REPLAY_STREAM_RESULTS}', '') AS stream
            FROM spans WHERE session_id = $sid AND name = '{SESSION}' LIMIT 1
        )
        SELECT s.session_id
        FROM spans s, me
        WHERE s.name = '{SESSION}' AND s.session_id <> $sid
          AND s.attributes->>'{sn.SESSION_SOURCE_ID}' = me.source_id
          AND s.policy = me.policy
          AND coalesce(s.attributes->>'{sn.POLICY_PARAMS}', '') = me.params
          AND s.gated
        ORDER BY (coalesce(s.attributes->>'{sn.REPLAY_SEED}', '') = me.seed)
                 AND (coalesce(s.attributes->>'{sn.REPLAY_STREAM_RESULTS}', '') = me.stream) DESC,
                 s.start_time_ns DESC, s.session_id
        LIMIT 1
        """, {"sid": session_id})
    return None if twin is None else str(twin[0])


def twin_step(src: Source, session_id: str, seq: int, twin_id: str) -> int | None:
    """The step of ``twin_id`` matching step ``seq`` of ``session_id``: where the last message that
    had arrived here by ``seq`` arrived there, moved on to the first model call from that step when
    ``seq`` is a model call (None when no message matches). Reads only the two sessions' spans, so
    ``src`` may hold just those (:func:`tracer.queries.steps.on_session_rows`). Message events are
    read as spans and, below full detail, as span events (docs/spans.md)."""
    row = _one(src, f"""
        WITH here AS (
            SELECT attributes->>'{sn.MESSAGE_ID}' AS mid, max(seq) AS s FROM ({records(MESSAGE)})
            WHERE session_id = $sid AND seq <= $seq
              AND attributes->>'{sn.EVENT}' IN ('append', 'open')
            GROUP BY 1
        ),
        there AS (
            SELECT attributes->>'{sn.MESSAGE_ID}' AS mid, min(seq) AS s FROM ({records(MESSAGE)})
            WHERE session_id = $twin AND attributes->>'{sn.EVENT}' IN ('append', 'open')
            GROUP BY 1
        ),
        matched AS (SELECT arg_max(there.s, here.s) AS s FROM here JOIN there USING (mid)),
        chat_here AS (
            SELECT count(*) > 0 AS yes FROM spans
            WHERE session_id = $sid AND seq = $seq AND attributes->>'{sn.GEN_AI_OPERATION_NAME}' = '{sn.OP_CHAT}'
        )
        SELECT matched.s,
               (SELECT min(seq) FROM spans, matched m2
                WHERE session_id = $twin AND seq >= m2.s AND attributes->>'{sn.GEN_AI_OPERATION_NAME}' = '{sn.OP_CHAT}'),
               chat_here.yes
        FROM matched, chat_here
        """, {"sid": session_id, "seq": int(seq), "twin": twin_id})
    step = None
    if row is not None and row[0] is not None:
        step = int(row[1]) if row[2] and row[1] is not None else int(row[0])
    return step
