"""Live: sessions agents are recording right now, re-queried on a timer.

Writers add Parquet segments while the dashboard runs; every tick opens a fresh store snapshot
(1 s cache), so new sessions and new spans appear without a restart.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard.components import charts, data
from dashboard.components.widgets import session_label, show_table, ts_column
from tracer import queries

WINDOWS = {"last 5 minutes": 300, "last hour": 3600, "last 24 hours": 86400, "everything": None}

st.title("Live")
c1, c2, c3 = st.columns([2, 2, 3])
window = c1.selectbox("Sessions active in", list(WINDOWS), index=1, key="live_window")
every = c2.selectbox("Refresh every", [1, 2, 5, 10], index=1, key="live_every", format_func=lambda s: f"{s} s")
paused = c3.toggle("Pause refresh", key="live_paused")


def _panel() -> None:
    seconds = WINDOWS[window]
    since = 0 if seconds is None else time.time_ns() - seconds * 10**9
    totals = data.catalog()
    live = data.run_fresh(queries.live_sessions, since_ns=since)
    st.caption(f"{totals['sessions']:,} sessions · {totals['spans']:,} spans in the store · "
               f"refreshed {time.strftime('%H:%M:%S')}")
    if live.empty:
        st.info("No session has recorded spans in this window. Sessions being recorded appear here "
                "within a couple of seconds, without restarting the dashboard.")
        return
    show_table(pd.DataFrame({
        "session": live["session_id"], "name": live["label"], "source": live["source"], "policy": live["policy"],
        "spans": live["spans"], "step": live["last_seq"], "tokens": live["tokens"],
        "last decision": live["last_decision"], "violations": live["violations"],
        "last span": ts_column(live["last_ns"]),
    }), hide_index=True, width="stretch", key="live_table")
    ids = [str(s) for s in live["session_id"]]
    labels = {str(r["session_id"]): session_label(r) for r in live.to_dict("records")}
    picked = st.selectbox("Follow a session", ids, key="live_follow", format_func=lambda s: labels.get(s, s))
    st.text(f"Following {labels.get(picked, picked)}: context tokens per step")
    followed = data.replay_session(data.key(), picked)  # re-read whenever the store changes
    budget = followed["budget"]
    st.plotly_chart(charts.token_timeline(followed["series"], followed["markers"], step=None,
                                          budget=budget["budget"], hard_ceiling=budget["hard_ceiling"], height=260),
                    width="stretch", key="live_chart")
    st.page_link("views/replay.py", label="Open in replay ▸", query_params={"session": picked})


st.fragment(run_every=None if paused else float(every))(_panel)()
