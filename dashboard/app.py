"""Entry point of the dashboard: ``streamlit run dashboard/app.py`` (``prunegate dashboard`` does it).

The store comes from ``$PRUNEGATE_STORE`` (else ``./prunegate-store``). Pages: Start (``/``),
Sessions (``/sessions``), Replay, Violations, Compare, Annotations, Live; each is a module in ``dashboard/views``
with its own URL path and its state in the query string.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

if find_spec("tracer") is None:  # run from a checkout without installing: the repo root is our parent
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402

from dashboard.components import data, warm  # noqa: E402
from dashboard.components.safe import md  # noqa: E402

# The favicon is a file shipped here: a ":material/...:" icon makes the browser fetch it from the internet.
st.set_page_config(page_title="prunegate", page_icon=str(Path(__file__).with_name("icon.png")), layout="wide")

# Every page has its own path (the start page is "/"); the state of each lives in its query string.
PAGES = [
    st.Page("views/home.py", title="Start", icon=":material/home:", url_path="start", default=True),
    st.Page("views/sessions.py", title="Sessions", icon=":material/table_rows:", url_path="sessions"),
    st.Page("views/replay.py", title="Replay", icon=":material/play_circle:", url_path="replay"),
    st.Page("views/violations.py", title="Violations", icon=":material/warning:", url_path="violations"),
    st.Page("views/compare.py", title="Compare", icon=":material/balance:", url_path="compare"),
    st.Page("views/annotations.py", title="Annotations", icon=":material/label:", url_path="annotations"),
    st.Page("views/live.py", title="Live", icon=":material/sensors:", url_path="live"),
]

nav = st.navigation(PAGES)

with st.sidebar:
    st.caption("Trace store")
    # Plain text, not st.code: a code block loads the browser's syntax highlighter, about 0.15 s of
    # JavaScript on every page load (CDP profile of the Frontier tab, the largest share of its script time).
    st.text(str(data.store_path()))
    try:
        totals = data.catalog()
        st.caption(f"{totals['sessions']:,} sessions · {totals['spans']:,} spans")
        for warning in totals["warnings"]:
            st.warning(md(warning))
        warm.start()  # the pages' first queries, computed in the background once per store activity
    except Exception as exc:  # noqa: BLE001 - show the store problem, keep the app up
        st.error(f"Cannot read the store: {md(exc)}")
    if st.button("Refresh now", help="Drop the few-second query caches and re-read the store"):
        st.cache_data.clear()

nav.run()
