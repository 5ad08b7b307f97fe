"""Start: what prunegate shows and where to look first, with the store's totals."""

from __future__ import annotations

import streamlit as st

from dashboard.components import data

st.title("prunegate")
st.markdown(
    "prunegate replays recorded agent sessions through context-pruning **policies**, with and without "
    "the commit-boundary **gate**, and shows what each one did to the context window: every prune, "
    "deferral and spill, and every request the provider would have refused (a **violation**) traced to "
    "the eviction that caused it.")
overview = data.session_page(limit=1)
c1, c2, c3 = st.columns(3)
c1.metric("● Recorded sessions", f"{overview['recorded']:,}")
c2.metric("↻ Replays", f"{overview['replays']:,}")
c3.metric("Violations", f"{overview['violations']:,}")
st.subheader("Where to look")
st.page_link("views/sessions.py", label="Sessions ▸ every session: search, filter, open one")
st.page_link("views/violations.py", label="Violations ▸ each broken request and the eviction that caused it")
st.page_link("views/replay.py", label="Replay ▸ step through one session's context window")
st.page_link("views/compare.py", label="Compare ▸ policies side by side, with confidence intervals")
st.page_link("views/live.py", label="Live ▸ sessions being recorded now")
