"""Annotations on the dashboard: the list of a session's (or every) annotation and the form that adds one.

An annotation is a label and a note on a session, a decision or a violation, stored as a span
(:mod:`tracer.queries.writes`, the same as ``prunegate annotate``). Labels and notes are recorded
text: tables and ``st.text`` show them literally, never as HTML.
"""

from __future__ import annotations

import time
from typing import Literal
from urllib.parse import quote

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from dashboard.components import data
from dashboard.components.safe import md
from dashboard.components.widgets import show_table, ts_column
from tracer.contract import names as sn
from tracer.queries import AnnotationError, AnnotationTarget, access

FLASH_S = 60.0  # how long "Saved the annotation …" stays above the form
TARGET_NAMES = {sn.VIOLATION: "violation", sn.BUDGET_CHECK: "decision", **{n: "decision" for n in sn.DECISION_SPANS}}


def table(frame: pd.DataFrame, *, key: str, with_session: bool = True) -> None:
    """Annotations as a table, each with a link to the replay at its step."""
    steps = [None if pd.isna(s) or t == "session" else int(s) for s, t in zip(frame["step"], frame["target"], strict=True)]
    out = pd.DataFrame({
        "label": frame["label"].fillna(""),
        "note": frame["note"].fillna(""),
        "on": [f"{t} · {w}" if isinstance(w, str) and w else str(t) for t, w in zip(frame["target"], frame["what"], strict=True)],
        "step": ["" if s is None else str(s) for s in steps],
        **({"session": frame["session_id"]} if with_session else {}),
        "when": ts_column(frame["time_ns"]),
        "author": frame["author"].fillna(""),
        "open": [f"replay?session={quote(str(sid), safe='')}" + ("" if s is None else f"&step={s}")
                 for sid, s in zip(frame["session_id"], steps, strict=True)],
    })
    show_table(out, hide_index=True, width="stretch", key=key,
                 column_config={"open": st.column_config.LinkColumn("open", display_text="replay ▸")})


def form(session_id: str, targets: list[tuple[str, AnnotationTarget | None]], *, key: str,
         rerun: Literal["app", "fragment"] = "app") -> None:
    """Add an annotation: pick what it is on (``targets``: (what it reads as, the span as read from
    the store, or None for the session's root, then looked up)), type a label and a note, save. Saved through the store's normal path; the page then
    reruns, so the lists above show it, and says so under the form for a minute. ``rerun="fragment"``:
    the form is in an ``st.fragment`` that draws those lists too, and only it reruns."""
    flash = st.session_state.get(f"{key}_saved")  # (session, when, what): kept through the reruns that follow
    if flash and flash[0] == session_id and time.monotonic() - flash[1] < FLASH_S:
        st.success(md(flash[2]))
    with st.form(f"{key}_form", clear_on_submit=True):
        c1, c2 = st.columns([2, 1])
        names = [t[0] for t in targets]
        pick = c1.selectbox("On", range(len(targets)), format_func=lambda i: names[i], key=f"{key}_target")
        label = c2.text_input("Label", max_chars=80, key=f"{key}_label", placeholder="bug, expected, flaky, …")
        note = st.text_area("Note", key=f"{key}_note", height=80, max_chars=4000)
        submitted = st.form_submit_button("Save annotation")
    if submitted:
        try:
            row = access.annotate(data.store_path(), session_id, label=label, note=note,
                                  target=targets[int(pick or 0)][1])
        except AnnotationError as exc:
            st.error(md(str(exc)))
            return
        # No cache is cleared: the store's fingerprint moved, so the annotations are re-read; what sessions
        # did is cached by their activity (data.activity), which an annotation does not change.
        st.session_state[f"{key}_saved"] = (session_id, time.monotonic(),
                                             f"Saved the annotation “{row['label']}” on the {row['target']}.")
        try:  # the lists above this form were drawn before the save
            st.rerun(scope=rerun)
        except StreamlitAPIException:  # a whole-page run (not the fragment's own rerun): rerun the page
            st.rerun()


def root_target(info: dict | None) -> AnnotationTarget | None:
    """The session's root as an annotation target, from :func:`tracer.queries.session_root`'s
    answer (None while the session has no root: the save then looks it up and says so)."""
    if not info or not info.get("span_id"):
        return None
    return AnnotationTarget(str(info["trace_id"]), str(info["span_id"]), sn.SESSION)


def step_targets(events: pd.DataFrame, step: int,
                 root: AnnotationTarget | None = None) -> list[tuple[str, AnnotationTarget | None]]:
    """What can be annotated at ``step``: the session (``root``), and the step's decisions and
    violations (``events``: the step's event log, with each span's trace, id and name)."""
    out: list[tuple[str, AnnotationTarget | None]] = [("this session", root)]
    if events.empty:
        return out
    here = events[(events["seq"] == step) & events["name"].isin(list(TARGET_NAMES))]
    seen: dict[str, int] = {}
    for rec in here.to_dict("records"):
        what = rec.get("what") or rec["name"].replace(sn.PREFIX, "").replace("_", " ")
        text = f"the {TARGET_NAMES[rec['name']]} at step {step}: {what}"
        seen[text] = seen.get(text, 0) + 1  # two alike at one step read "… (2nd)", never as span ids
        n = seen[text]
        out.append((text + (f" ({n}{'nd' if n == 2 else 'rd' if n == 3 else 'th'})" if n > 1 else ""),
                     AnnotationTarget(str(rec["trace_id"]), str(rec["span_id"]), str(rec["name"]))))
    return out
