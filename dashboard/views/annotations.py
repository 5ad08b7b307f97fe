"""Annotations: every label and note people put on sessions, decisions and violations, newest first.

``?label=bug,flaky`` keeps those labels (the address bar is the filter); each row links to the
replay at the annotated step. Added on the Replay page or with ``prunegate annotate``.
"""

from __future__ import annotations

import streamlit as st

from dashboard.components import data, notes
from tracer import queries

st.title("Annotations")
st.caption("Labels and notes on sessions, decisions and violations (add one on the Replay page or with "
           "`prunegate annotate SESSION --label LABEL --note TEXT`). They are spans in the store: "
           "`prunegate export` sends them along.")
labels_all = data.run(queries.annotation_labels)
wanted = [x for x in st.query_params.get("label", "").split(",") if x in labels_all]
labels = st.multiselect("Label", labels_all, default=wanted, key="annotations_labels")
st.query_params["label"] = ",".join(labels)
frame = data.run(queries.annotation_list, labels=tuple(labels))
st.text(f"{len(frame):,} annotations" + (f" labelled {', '.join(labels)}" if labels else ""))
if frame.empty:
    st.info("No annotation yet. Open a session on the Replay page and add one at the bottom.")
else:
    notes.table(frame, key="annotations_table")
