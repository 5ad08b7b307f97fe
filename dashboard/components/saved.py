"""Saved comparisons: a comparison kept with its parameters and results, reopened from a URL.

Saving writes one record in the sweeps' format through the store
(:func:`tracer.queries.writes.save_comparison`), so it lives wherever the store does.
``/compare?saved=<id>`` shows the stored numbers as they were, without re-running anything.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.components import data
from dashboard.components.safe import md
from dashboard.components.widgets import show_table, ts_column
from tracer import queries
from tracer.queries import AnnotationError, access


def plain(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON-ready records (numbers stay numbers)."""
    return json.loads(frame.to_json(orient="records"))


def save_form(kind: str, params: dict[str, Any], results: dict[str, Any], *, key: str, title: str = "") -> None:
    """A title and a Save button; on save, the link that reopens it."""
    with st.form(f"{key}_form"):
        name = st.text_input("Title", value=title, max_chars=200, key=f"{key}_title")
        submitted = st.form_submit_button("Save this comparison")
    if submitted:
        try:
            ident = access.save_comparison(data.store_path(), name, {"kind": kind, **params}, results)
        except AnnotationError as exc:
            st.error(md(str(exc)))
            return
        st.cache_data.clear()
        st.success(md(f"Saved as “{name.strip()}”. Reopen it any time: /compare?saved={ident}"))
        st.button("Open the saved comparison", key=f"{key}_open", on_click=_open, args=(ident,))


def _open(ident: str) -> None:
    """Runs before the next rerun: the page then shows the saved comparison at its own URL."""
    st.query_params.from_dict({"saved": ident})


def saved_list() -> None:
    """Every saved comparison, newest first, each a link to ``/compare?saved=<id>``."""
    frame = data.run(queries.saved_comparisons)
    if frame.empty:
        st.caption("No saved comparison yet: run one (or pick results) and press “Save this comparison”.")
        return
    kinds = [json.loads(p or "{}").get("kind", "") for p in frame["params"]]
    show_table(pd.DataFrame({
        "title": frame["title"], "kind": kinds, "saved": ts_column(frame["time_ns"]),
        "open": ["compare?saved=" + str(i) for i in frame["id"]],
    }), hide_index=True, width="stretch", key="compare_saved_list",
        column_config={"open": st.column_config.LinkColumn("open", display_text="reopen ▸")})


def show_saved(ident: str) -> None:
    """The saved comparison ``ident``: its parameters and the tables it stored."""
    saved = data.run(queries.saved_comparison, ident)
    if saved is None:
        st.error(md(f"No saved comparison {ident} in this store."))
        return
    st.subheader(saved["title"])
    when = ts_column(pd.Series([saved["time_ns"]])).iloc[0]
    st.caption(f"Saved {when:%Y-%m-%d %H:%M} UTC · id {md(ident)} · the numbers as they were saved (nothing re-run)")
    st.caption(since_saved(data.changes_since(int(saved["time_ns"]))))
    st.caption("Parameters (what was compared)")
    st.json(saved["params"], expanded=False)
    results = saved["results"]
    for line in results.get("lines", []):
        st.text(str(line))
    for name, records in results.get("tables", {}).items():
        st.caption(md(name))
        show_table(pd.DataFrame(records), hide_index=True, width="stretch", key=f"compare_saved_{name}")


def since_saved(changes: dict[str, int]) -> str:
    """One line: the traffic after a comparison was saved (so a reader knows whether a re-run could
    give other numbers). By span time: spans imported later with older timestamps do not count."""
    parts = [f"{n:,} new {what}{'' if n == 1 else 's'}" for what, n in
             (("recorded session", changes["recorded"]), ("replay", changes["replay"])) if n]
    grown = changes["grown"]
    if grown:
        parts.append(f"{grown:,} earlier session{'' if grown == 1 else 's'} with new spans")
    if not parts:
        return "Since it was saved (by span time): nothing new in the store."
    return "Since it was saved (by span time): " + ", ".join(parts) + "."

