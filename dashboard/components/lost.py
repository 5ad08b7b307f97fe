"""The Replay page's lost references: what the model call at this step lacked, and a jump to the
prune that evicted each one's source (:func:`tracer.queries.lost_references` reads them from the chat spans the replay read)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from dashboard.components import data
from dashboard.components.safe import md
from dashboard.components.widgets import show_table
from tracer import queries
from tracer.queries import access


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def _lost(path: str, fp: str, session_id: str) -> pd.DataFrame:
    rows = data.replay_session(path, session_id)["rows"]  # the session's spans, read once for the replay
    return queries.on_session_rows(rows, lambda con: queries.lost_references(con, session_id))


def references(path: str, session_id: str) -> pd.DataFrame:
    """The session's lost references, cached per store activity (chat spans: an annotation changes nothing)."""
    return _lost(path, data.activity(path), session_id)


def panel(session_id: str, step: int, jump: Callable[[int], None]) -> None:
    """Lost references at ``step`` with a button per prune that caused them; ``jump(step)`` moves
    the page (a button callback). Shows nothing for sessions that lost none (or are not replays)."""
    path = data.key()
    lost = references(path, session_id)
    if lost.empty:
        return
    here = access.lost_at(lost, step)
    later = sorted({int(s) for s in lost["step"] if s > step})
    st.subheader("Lost references")
    c1, c2 = st.columns([4, 1])
    c1.caption(f"{len(lost)} references lost in this session, at {lost['step'].nunique()} model calls"
               + (f"; next at step {later[0]}" if later else ""))
    if later:
        c2.button("Next lost reference", icon=":material/skip_next:", on_click=jump, args=(later[0],),
                  key="lost_next", width="stretch")
    if not here:
        return
    st.caption(f"The model call at step {step} needed {len(here)} value(s) no longer in its context:")
    show_table(pd.DataFrame(here), hide_index=True, width="stretch", key="lost_here")
    prunes = list(dict.fromkeys(int(x["prune_seq"]) for x in here if pd.notna(x["prune_seq"])))
    for i, seq in enumerate(prunes):
        sources = ", ".join(sorted({str(x["source"]) for x in here if pd.notna(x["prune_seq"]) and int(x["prune_seq"]) == seq}))
        st.button(f"Jump to the prune that evicted {md(sources)} (step {seq})", icon=":material/content_cut:",
                  on_click=jump, args=(seq,), key=f"lost_jump_{i}")
    if any(pd.isna(x["prune_seq"]) for x in here):
        st.caption("Some sources were not removed by a decision (e.g. a stream's head lost without a gate).")
