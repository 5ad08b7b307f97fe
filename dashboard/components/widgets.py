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
