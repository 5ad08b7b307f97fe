"""Sessions: every recorded, imported and replayed session, filterable; a row opens its replay."""

from __future__ import annotations

from urllib.parse import quote

import pandas as pd
import streamlit as st

from dashboard.components import data
from dashboard.components.widgets import open_links, ts_column
from tracer import queries

st.title("Sessions")

options = data.run(queries.session_filter_options)
c1, c2, c3, c4, c5 = st.columns([2, 2, 1.2, 2.5, 1.3])
sources = c1.multiselect("Source", options["sources"], key="sessions_sources")
policies = c2.multiselect("Policy", options["policies"], key="sessions_policies")
gate = c3.selectbox("Gate", ["any", "gated", "ungated"], key="sessions_gate")
text = c4.text_input("Search id or name", key="sessions_text")
only_v = c5.checkbox("With violations", key="sessions_only_v")

df = data.run(
    queries.sessions,
    sources=tuple(sources),
    policies=tuple(policies),
    gated={"any": None, "gated": True, "ungated": False}[gate],
    text=text.strip() or None,
    only_with_violations=only_v,
)

m1, m2, m3, m4, m5 = st.columns(5)
m1.metric("Sessions", f"{len(df):,}")
m2.metric("Violations", f"{int(df['violations'].sum()) if len(df) else 0:,}")
m3.metric("Deferrals", f"{int(df['deferrals'].sum()) if len(df) else 0:,}")
m4.metric("Spills", f"{int(df['spills'].sum()) if len(df) else 0:,}")
m5.metric("Failures", f"{int(df['failures'].sum()) if len(df) else 0:,}")

if df.empty:
    st.info("No session matches. Record one (prunegate demo, prunegate import, prunegate replay) "
            "or widen the filters.")
    st.stop()

table = pd.DataFrame({
    "session": df["session_id"],
    "name": df["label"],
    "source": df["source"],
    "policy": df["policy"],
    "gated": df["gated"],
    "messages": df["messages"],
    "peak tokens": df["peak_tokens"],
    "budget": df["budget"],
    "violations": df["violations"],
    "prunes": df["prunes"],
    "deferrals": df["deferrals"],
    "spills": df["spills"],
    "failures": df["failures"],
    "retries": df["retries"],
    "invalid requests": df["invalid_requests"],
    "last activity": ts_column(df["last_ns"]),
    "replay": ["replay?session=" + quote(str(s), safe="") for s in df["session_id"]],
})
st.caption("Select a row to open its replay (the link column gives a shareable URL).")
event = st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    on_select="rerun",
    selection_mode="single-row",
    key="sessions_table",
    column_config={
        "replay": st.column_config.LinkColumn("replay", display_text="open ▸"),
        "gated": st.column_config.CheckboxColumn("gated"),
        "peak tokens": st.column_config.NumberColumn(format="%d"),
    },
)
rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
if rows:
    st.switch_page("views/replay.py", query_params={"session": str(df.iloc[rows[0]]["session_id"])})

open_links(df, key="sessions_open")
