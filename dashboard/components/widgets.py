"""Small widgets several pages use: pick a session, link to its replay, format times."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.components.safe import short


def ts_column(ns: pd.Series) -> pd.Series:
    """Unix nanoseconds -> timezone-aware timestamps (UTC) for tables."""
    return pd.to_datetime(ns, unit="ns", utc=True, errors="coerce")


def session_label(row: Mapping[Hashable, Any] | pd.Series) -> str:
    """How a session reads in a picker: its name (or id), policy and gate. Plain text."""
    sid = str(row.get("session_id"))
    name = row.get("label")
    policy = row.get("policy")
    gated = row.get("gated")
    bits = [short(name, 50) if isinstance(name, str) and name else sid]
    if isinstance(policy, str) and policy:
        bits.append(policy + (" · gated" if gated is True else " · ungated" if gated is False else ""))
    if isinstance(name, str) and name:
        bits.append(short(sid, 24))
    return " · ".join(bits)


def open_links(sessions: pd.DataFrame, *, key: str, default: str | None = None) -> str | None:
    """A session picker with links to its replay and its violations. Returns the picked id."""
    if sessions.empty:
        return None
    ids = [str(s) for s in sessions["session_id"]]
    labels = {str(r["session_id"]): session_label(r) for r in sessions.to_dict("records")}
    index = ids.index(default) if default in ids else 0
    c1, c2, c3 = st.columns([4, 1, 1])
    picked = c1.selectbox("Open a session", ids, index=index, format_func=lambda s: labels.get(s, s), key=key)
    c2.page_link("views/replay.py", label="Replay ▸", query_params={"session": picked})
    c3.page_link("views/violations.py", label="Violations ▸", query_params={"session": picked})
    st.text(f"Selected: {labels.get(picked, picked)}")
    return picked


# Column names a user reads: words, not attribute keys (anything else: underscores become spaces).
COLUMN_WORDS = {
    "seq": "step", "first_seq": "first at step", "prune_seq": "prune at step", "last_event": "last event",
    "pending_calls": "pending tool calls", "tool_names": "tools", "message_id": "message", "unit_id": "unit",
    "prune_span_id": "prune", "span_id": "span", "session_id": "session", "call_ids": "tool call ids",
    "ci_low": "95% CI low", "ci_high": "95% CI high", "n": "sessions",
}
MISSING = "—"


def words(name: object) -> str:
    """A column name as words (``first_seq`` -> ``first at step``; ``peak_tokens`` -> ``peak tokens``)."""
    text = str(name)
    return COLUMN_WORDS.get(text, text.replace("_", " "))


def _missing(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and value != value  # NaN


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a user reads it: column names as words, and an empty cell shown as "—" instead of
    "None"/"NaN" (a column with gaps becomes text; whole numbers keep no decimals)."""
    out = frame.rename(columns=words)
    for col in out.columns:
        values = out[col]
        if not values.map(_missing).any():
            continue
        out[col] = [MISSING if _missing(v) else f"{int(v):,}" if isinstance(v, float) and v.is_integer() else
                    f"{v:.3g}" if isinstance(v, float) else str(v) for v in values.astype(object)]
    return out


def largest(frame: pd.DataFrame, column: str, rows: int) -> pd.DataFrame:
    """The ``rows`` rows of ``frame`` whose ``column`` is largest in size (absolute value; empty
    last), in ``frame``'s order; all of them when there are no more than ``rows``."""
    if len(frame) <= rows:
        return frame
    keep = frame[column].abs().fillna(-1.0).sort_values(ascending=False, kind="stable").index[:rows]
    return frame.loc[sorted(keep)]


def show_table(frame: pd.DataFrame, **kwargs: Any) -> Any:
    """``st.dataframe`` of :func:`readable` ``frame`` (the one way the pages draw a table); the keys of
    ``column_config`` and ``column_order`` may name the original columns."""
    if "column_config" in kwargs:
        kwargs["column_config"] = {words(k): v for k, v in kwargs["column_config"].items()}
    if "column_order" in kwargs:
        kwargs["column_order"] = [words(k) for k in kwargs["column_order"]]
    if "key" not in kwargs:
        return st.dataframe(readable(frame), **kwargs)
    with st.container(key=f"table-{kwargs['key']}"):  # a stable handle on the page (class st-key-table-KEY)
        return st.dataframe(readable(frame), **kwargs)
