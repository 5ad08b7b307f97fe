"""Lost references read back from the store: where a replay's model calls lacked a value, and which
prune took it (the attributes :mod:`tracer.lab.attribution` writes on chat spans; names in the contract).

The Replay page lists them at a step and jumps to the prune; values travel as parameters.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from tracer.contract.names import (
    REFERENCES_LOST,
    REFERENCES_LOST_PRUNE_SEQS,
    REFERENCES_LOST_PRUNE_SPANS,
    REFERENCES_LOST_SOURCES,
    REFERENCES_LOST_TOOLS,
)
from tracer.store import StoreReader

_SQL = f"""
WITH chats AS (
    SELECT seq,
           from_json(attributes->'{REFERENCES_LOST_SOURCES}', '["VARCHAR"]') AS sources,
           from_json(attributes->'{REFERENCES_LOST_TOOLS}', '["VARCHAR"]') AS tools,
           from_json(attributes->'{REFERENCES_LOST_PRUNE_SEQS}', '["VARCHAR"]') AS prune_seqs,
           from_json(attributes->'{REFERENCES_LOST_PRUNE_SPANS}', '["VARCHAR"]') AS prune_spans
    FROM spans
    WHERE session_id = $sid AND CAST(attributes->>'{REFERENCES_LOST}' AS BIGINT) > 0
)
SELECT seq AS step, unnest(sources) AS source, unnest(tools) AS tool, unnest(prune_seqs) AS prune_seq,
       unnest(prune_spans) AS prune_span_id
FROM chats ORDER BY step
"""


def lost_references(src: StoreReader | duckdb.DuckDBPyConnection, session_id: str) -> pd.DataFrame:
    """One row per lost reference of a replayed session: ``step`` (the model call), ``source`` (the
    message that held the value), ``tool`` (whose result it was; empty if none), ``prune_seq`` (the
    step of the decision that removed the source; None when nothing did) and ``prune_span_id``."""
    con = src.con if isinstance(src, StoreReader) else src
    df = con.execute(_SQL, {"sid": session_id}).df()
    df["prune_seq"] = pd.to_numeric(df["prune_seq"].replace("", None), errors="coerce").astype("Int64")
    df["prune_span_id"] = df["prune_span_id"].replace("", None)
    df["tool"] = df["tool"].fillna("")
    return df


def at_step(lost: pd.DataFrame, step: int) -> list[dict[str, Any]]:
    """The lost references of the model call at ``step``."""
    return [{str(k): v for k, v in r.items()} for r in lost[lost["step"] == step].to_dict("records")]


__all__ = ["at_step", "lost_references"]
