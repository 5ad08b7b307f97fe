"""The "Run a comparison" form: replay recorded sessions under several policies into the store.

It calls :func:`tracer.lab.compare.compare` with a progress callback that drives a progress bar; the
replays land in the store like ``prunegate compare``'s, so the results tab shows them next.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard.components import data
from dashboard.components.safe import md
from dashboard.components.widgets import session_label
from tracer import queries

RESULT = "compare_run_result"


def run_comparison_form() -> None:
    """The form, the progress bar while it runs, and the outcome of the last run."""
    recorded = data.run(queries.sessions, exclude_sources=("replay",), complete=True, summary=False,
                        order="started", limit=2000)
    if recorded.empty:
        st.info("The store holds no recorded session to replay (import one with `prunegate import`).")
        return
    choices = data.run(queries.policy_choices)
    ids = [str(s) for s in recorded["session_id"]]
    labels = {str(r["session_id"]): session_label(r) for r in recorded.to_dict("records")}
    with st.form("compare_run_form"):
        picked = st.multiselect("Recorded sessions to replay", ids, default=ids[: min(5, len(ids))],
                                format_func=lambda s: labels.get(s, s), key="compare_run_sessions")
        default = [p for p in ("salience", "recency") if p in choices] or choices[:1]
        policies = st.multiselect("Policies", choices, default=default, key="compare_run_policies")
        params = st.text_input("Parameters (optional, e.g. salience@keep_recent=4)", key="compare_run_params",
                               help="Comma-separated policy@key=value items; they replace the picked policies "
                                    "of the same name.")
        c1, c2, c3, c4 = st.columns(4)
        gatings = {"both": "gated and ungated", "on": "gated only", "off": "ungated only"}
        gated = c1.selectbox("Gate", list(gatings), key="compare_run_gated", format_func=gatings.__getitem__)
        budget = c2.number_input("Budget (0: 60% of each session)", min_value=0, value=0, step=100,
                                 key="compare_run_budget")
        ceiling = c3.number_input("Hard ceiling (0: none)", min_value=0, value=0, step=100, key="compare_run_ceiling")
        stream = c4.number_input("Stream results in N deltas", min_value=0, max_value=50, value=0,
                                 key="compare_run_stream")
        submitted = st.form_submit_button("Run comparison", type="primary")
    if submitted:
        if not picked or not (policies or params.strip()):
            st.error("Pick at least one session and one policy.")
        else:
            _run(picked, policies, params, gated or "both", int(budget) or None, int(ceiling) or None, int(stream))
    result = st.session_state.get(RESULT)
    if result:
        st.success(f"Replayed {result['replays']} sessions ({result['arms']} arms × {result['sessions']} sessions). "
                   "The results tab now includes them.")
        st.dataframe(pd.DataFrame(result["rows"]), hide_index=True, width="stretch", key="compare_run_rows")
        if result["differences"]:
            st.caption("Paired differences against the first policy of each gating (Student-t 95% CI, as `prunegate compare` reports them)")
            st.dataframe(pd.DataFrame(result["differences"]), hide_index=True, width="stretch",
                         key="compare_run_diffs")


def _run(session_ids: list[str], policies: list[str], params: str, gated: str, budget: int | None,
         ceiling: int | None, stream: int) -> None:
    from tracer.lab import compare
    from tracer.traffic.recorded import load_conversations

    try:
        chosen: dict[str, tuple[tuple[str, Any], ...]] = {name: () for name in policies}
        if params.strip():
            for name, p in compare.parse_policies(params):
                chosen[name] = p
        arms = list(chosen.items())
        convs = load_conversations(data.store_path(), session_ids)
        if not convs:
            st.error("None of the picked sessions could be read back from the store.")
            return
        bar = st.progress(0.0, text="starting…")

        def progress(done: int, total: int) -> None:
            bar.progress(min(1.0, done / total) if total else 1.0, text=f"replayed {done}/{total} sessions")

        outcome: Any = compare.compare(convs, arms, gated=gated, budget=budget, hard_ceiling=ceiling,
                                       stream_results=stream, store_path=data.store_path(), capture_content=True,
                                       progress=progress)
    except Exception as exc:  # noqa: BLE001 - a bad parameter or policy is shown, not raised
        st.error(md(f"The comparison failed: {type(exc).__name__}: {exc}"))
        return
    st.cache_data.clear()  # the new replays must show up in the results tab now
    st.session_state[RESULT] = {
        "rows": outcome.rows, "differences": outcome.differences, "arms": len(outcome.specs),
        "sessions": len(convs), "replays": len(outcome.specs) * len(convs),
    }
