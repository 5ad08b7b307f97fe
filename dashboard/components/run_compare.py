"""The "Run a comparison" form: replay recorded sessions under several policies into the store.

Defaults give an answer on any store: the baseline is ``recency`` (then ``salience``), both gated and
ungated, and the budget is half the smallest peak among the picked sessions (shown), so every
replay has to prune. It calls :func:`tracer.lab.compare.compare` inside a status box with a
progress bar; the replays land in the store like ``prunegate compare``'s (the page says so), the
results can be downloaded as CSV or Parquet, and a failed run clears the previous run's summary.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.components import data, saved
from dashboard.components.safe import md
from dashboard.components.widgets import session_label, show_table
from tracer import queries

RESULT = "compare_run_result"
BASELINES = ("recency", "salience")  # the baseline is the first policy picked
BUDGET_SHARE = 0.5  # default budget: this share of the smallest peak among the picked sessions


def default_budget(peaks: list[int]) -> int:
    """Half the smallest peak (at least 1): under it every picked session must prune."""
    positive = [int(p) for p in peaks if p and p > 0]
    return max(1, int(min(positive) * BUDGET_SHARE)) if positive else 0


def frames(result: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The run's tables: ``arms`` (sums per arm), ``differences`` (paired, with CIs) and ``sessions``
    (one row per replayed session)."""
    return {"arms": pd.DataFrame(result["rows"]), "differences": pd.DataFrame(result["differences"]),
            "sessions": pd.DataFrame(result["sessions_rows"])}


def downloads(frame: pd.DataFrame, name: str, key: str) -> None:
    """CSV and Parquet download buttons for a table, each file written when its button is pressed
    (a deferred download: the page does not encode 10,000 rows on every run)."""
    def csv() -> bytes:
        return frame.to_csv(index=False).encode()

    def parquet() -> bytes:
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        return buf.getvalue()

    c1, c2, _ = st.columns([1, 1, 4])
    c1.download_button("Download CSV", csv, f"{name}.csv", "text/csv", key=f"{key}_csv")
    c2.download_button("Download Parquet", parquet, f"{name}.parquet", "application/vnd.apache.parquet",
                       key=f"{key}_parquet")


def run_comparison_form() -> None:
    """The form, the status box while it runs, and the outcome of the last run."""
    recorded = data.run(queries.sessions, exclude_sources=("replay",), complete=True, summary=False,
                        order="started", limit=2000)
    if recorded.empty:
        st.info("The store holds no recorded session to replay (import one with `prunegate import`).")
        return
    choices = data.run(queries.policy_choices)
    ids = [str(s) for s in recorded["session_id"]]
    labels = {str(r["session_id"]): session_label(r) for r in recorded.to_dict("records")}
    picked_default = ids[: min(5, len(ids))]
    peaks = data.run(queries.session_metrics, session_ids=tuple(picked_default))
    suggested = default_budget([int(p) for p in peaks["peak_tokens"].fillna(0)])
    st.caption(md(f"Default budget {suggested:,} tokens: half the smallest peak among the first "
                  f"{len(picked_default)} recorded sessions (peaks {int(peaks['peak_tokens'].min()):,}–"
                  f"{int(peaks['peak_tokens'].max()):,} tokens), so every replay has to prune. "
                  "Every replay is recorded into the store as a new session (kind ↻ replay)."))
    with st.form("compare_run_form"):
        picked = st.multiselect("Recorded sessions to replay", ids, default=picked_default,
                                format_func=lambda s: labels.get(s, s), key="compare_run_sessions")
        default = [p for p in BASELINES if p in choices] or choices[:1]
        policies = st.multiselect("Policies (the first is the baseline)", choices, default=default,
                                  key="compare_run_policies")
        params = st.text_input(
            "Policy parameters (optional)", key="compare_run_params",
            placeholder="recency@target=0.5,salience@target=0.6@max_df=0.3",
            help="The syntax of prunegate compare --policies: policies separated by commas, each with "
                 "@key=value parameters (several: recency@target=0.5@x=1). A policy named here replaces "
                 "the picked one of the same name.")
        c1, c2, c3, c4 = st.columns(4)
        gate_names = {"both": "gated and ungated", "on": "gated only", "off": "ungated only"}
        gated = str(c1.selectbox("Gate", list(gate_names), key="compare_run_gated",
                                 format_func=lambda g: gate_names[str(g)]))
        budget = c2.number_input("Budget (tokens; 0: 60% of each session)", min_value=0, value=suggested, step=100,
                                 key="compare_run_budget")
        ceiling = c3.number_input("Hard ceiling (0: none)", min_value=0, value=0, step=100, key="compare_run_ceiling")
        stream = c4.number_input("Stream results in N deltas", min_value=0, max_value=50, value=0,
                                 key="compare_run_stream")
        submitted = st.form_submit_button("Run comparison", type="primary")
    if submitted:
        st.session_state.pop(RESULT, None)  # whatever happens now, the last run's summary is not this one's
        if not picked or not (policies or params.strip()):
            st.error("Pick at least one session and one policy.")
        else:
            _run(picked, policies, params, gated, int(budget) or None, int(ceiling) or None, int(stream))
    result = st.session_state.get(RESULT)
    if result:
        _show(result)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The run's summary as the lines the page prints (and a saved comparison keeps)."""
    lines = [f"Replayed {result['replays']} sessions ({result['arms']} arms × {result['sessions']} sessions) "
             f"and recorded them into the store as new sessions (kind ↻ replay).",
             f"Depends on: budget {result['budget_text']}; arrival order: recorded (no seed); "
             f"tokens counted by prunegate's approximate counter."]
    for row in result["rows"]:
        lines.append(f"{row['policy']} · {'gated' if row['gated'] else 'ungated'}: {row['invalid_requests']} invalid "
                     f"requests, {row['orphan_results']} orphan results, {row['prunes']} prunes, "
                     + ("deferrals — (ungated: not applicable)" if row["deferrals"] is None
                        else f"{row['deferrals']} deferrals") + f" over {row['sessions']} sessions")
    return lines


def _show(result: dict[str, Any]) -> None:
    lines = summary_lines(result)
    st.success(lines[0] + " The results tab now includes them.")
    for line in lines[1:]:
        st.text(line)
    tables = frames(result)
    show_table(tables["arms"], hide_index=True, width="stretch", key="compare_run_rows")
    downloads(tables["sessions"], "comparison-sessions", "compare_run_sessions_dl")
    if result["differences"]:
        st.caption("Paired differences against the baseline (the first policy) of each gating, "
                   "mean and Student-t 95% CI, as `prunegate compare` reports them")
        show_table(tables["differences"], hide_index=True, width="stretch", key="compare_run_diffs")
        downloads(tables["differences"], "comparison-differences", "compare_run_diffs_dl")
    saved.save_form("run", result.get("params", {}), {
        "lines": lines, "tables": {"sums per arm": saved.plain(tables["arms"]),
                                   "paired differences (mean, Student-t 95% CI)": saved.plain(tables["differences"])},
    }, key="compare_run_save", title=f"{', '.join(result.get('params', {}).get('policies', []))} on "
                                     f"{result['sessions']} sessions, budget {result['budget_text']}")


def _run(session_ids: list[str], policies: list[str], params: str, gated: str, budget: int | None,
         ceiling: int | None, stream: int) -> None:
    from tracer.lab import compare, sweep
    from tracer.lab.cost import load_prices

    with st.status("Running the comparison…", expanded=True) as status:
        try:
            chosen: dict[str, tuple[tuple[str, Any], ...]] = {name: () for name in policies}
            if params.strip():
                for name, p in compare.parse_policies(params):
                    chosen[name] = p
            arms = list(chosen.items())
            convs = queries.access.conversations(data.store_path(), session_ids)
            if not convs:
                status.update(label="Nothing to replay", state="error", expanded=True)
                st.error("None of the picked sessions could be read back from the store.")
                return
            bar = st.progress(0.0, text="starting…")

            def progress(done: int, total: int) -> None:
                bar.progress(min(1.0, done / total) if total else 1.0, text=f"replayed {done}/{total} sessions")

            prices = load_prices(None)
            outcome: Any = compare.compare(convs, arms, gated=gated, budget=budget, hard_ceiling=ceiling,
                                           stream_results=stream, store_path=str(data.store_path()),
                                           capture_content=True, progress=progress, prices=prices)
            # Stored as a sweep, as `prunegate compare` stores every run: the Frontier tab shows it.
            options = {"store": str(data.store_path()), "session": session_ids, "hard_ceiling": ceiling,
                       "stream_results": stream, "traced": True}
            sweep.save(data.store_path(), sweep.record(
                outcome, options=options, sessions=convs, prices=prices.to_dict(), models=outcome.models,
                policies=",".join(dict.fromkeys(sweep.policy_arg(spec) for spec in outcome.specs)), budgets=[budget],
                gated=gated))
        except Exception as exc:  # noqa: BLE001 - a bad parameter or policy is shown, not raised
            status.update(label="The comparison failed", state="error", expanded=True)
            st.error(md(f"The comparison failed: {type(exc).__name__}: {exc}"))
            return
        status.update(label=f"Replayed {len(outcome.specs) * len(convs)} sessions", state="complete",
                      expanded=False)
    st.cache_data.clear()  # the new replays must show up in the results tab now
    sessions = [{"policy": spec.name, "gated": spec.gated, **r.to_dict()}
                for spec, rs in zip(outcome.specs, outcome.results, strict=True) for r in rs]
    st.session_state[RESULT] = {
        "rows": outcome.rows, "differences": outcome.differences, "arms": len(outcome.specs),
        "sessions": len(convs), "replays": len(outcome.specs) * len(convs), "sessions_rows": sessions,
        "budget_text": f"{budget:,} tokens" if budget else "60% of each session's full size",
        "params": {"sessions": session_ids, "policies": policies, "policy_params": params, "gated": gated,
                   "budget": budget, "hard_ceiling": ceiling, "stream_results": stream},
    }
