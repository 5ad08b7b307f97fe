"""Compare: policies side by side over the same recorded sessions.

Every replay records its source session (``prunegate.session.source_id``), its policy and whether
the gate was in charge. An *arm* is policy · gated/ungated. Pick the recorded sessions and the
arms: the page shows each metric's mean per arm with a 95% confidence interval, the per-session
values (distribution), and per-session differences against a baseline arm with the interval of
their mean (all from :mod:`tracer.lab.metrics`, the numbers ``prunegate compare`` prints). A new comparison can
be started from the page (it replays the picked recordings into the store, with a progress bar).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.components import charts, data, frontier, saved
from dashboard.components.run_compare import downloads, run_comparison_form
from dashboard.components.widgets import largest, show_table
from tracer import queries

qp = st.query_params


# Which way is better for each metric (the verdict column); metrics absent here have no direction
# (prunes, deferrals, spills: a means, not an outcome).
BETTER = {"retention": "higher", **{name: "lower" for name in (
    "violations", "invalid_requests", "orphan_results", "dangling_calls", "duplicated_side_effects", "tokens_sent",
    "peak_tokens", "failures", "retries", "final_tokens", "over_budget_checks")}}
RATES = {"retention"}  # a total of a share means nothing
# Rows of the per-session differences table: at 10,024 sessions the whole table was a 600 KB message
# the browser decoded on every visit, and nobody reads thousands of rows (the download has them all).
DIFF_ROWS = 300


def verdict(metric: str, low: object, high: object) -> str:
    """The difference's 95% interval in words: better, worse, or no clear difference (it holds 0)."""
    if not isinstance(low, int | float) or not isinstance(high, int | float) or low != low or high != high:
        return "too few sessions"
    if low <= 0 <= high:
        return "no clear difference"
    higher = low > 0
    way = BETTER.get(metric)
    if way is None:
        return "higher" if higher else "lower"
    return ("better" if higher == (way == "higher") else "worse") + (" (higher)" if higher else " (lower)")


def rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers at 3 significant digits (a table is read, not recomputed)."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = [None if pd.isna(v) else float(f"{v:.3g}") for v in out[col]]
    return out


def _g(x: object) -> str:
    """A number as a saved line shows it (4 significant digits; none: –)."""
    return f"{x:.4g}" if isinstance(x, int | float) and x == x else "–"


st.title("Compare policies")

if qp.get("saved"):  # a saved comparison: its stored numbers, nothing re-run
    saved.show_saved(str(qp["saved"]))
    st.button("◀ all comparisons", key="compare_saved_back", on_click=st.query_params.clear)
    st.stop()

with st.expander("Saved comparisons", expanded=False):
    saved.saved_list()

# The open tab is in the URL (?tab=...), and only the open tab's content runs.
tab_results, tab_run, tab_frontier = st.tabs(["Results", "Run a comparison", "Frontier"],
                                             key="tab", on_change="rerun", bind="query-params")

if tab_run.open:
    with tab_run:
        run_comparison_form()

if tab_frontier.open:
    with tab_frontier:
        frontier.render()

def results_tab() -> None:
    """The stored replays side by side: metrics, intervals, paired differences with a verdict."""
    metrics_all: pd.DataFrame = data.run_activity(queries.session_metrics)
    replays = metrics_all[metrics_all["source"] == "replay"]
    if replays.empty:
        st.info("No replays in the store yet. Start a comparison in the next tab, or run "
                "`prunegate compare` / `prunegate replay`.")
        st.stop()

    sources = sorted({str(s) for s in replays["source_id"]})
    c1, c2 = st.columns(2)
    picked: tuple[str, ...] | None = None  # None: every recorded session
    if len(sources) <= data.SOURCES_LISTED or not c1.checkbox(
            f"All {len(sources):,} recorded sessions", value=True, key="compare_all_sources"):
        names = (metrics_all.drop_duplicates("source_id").set_index("source_id")["label"].to_dict())
        few = len(sources) <= data.SOURCES_LISTED
        picked = tuple(c1.multiselect(
            "Recorded sessions", sources, default=sources if few else [], key="compare_sources",
            format_func=lambda s: f"{names.get(s) or s} · {s[:12]}" if names.get(s) else s,
        ))
        if few and len(picked) == len(sources):
            picked = None
    arms = sorted({str(a) for a in replays["arm"]})
    from_url = [a for a in qp.get("arms", "").split(",") if a in arms]
    picked_arms = c2.multiselect("Arms (policy · gate)", arms, default=from_url or arms, key="compare_arms")
    metrics = list(queries.METRICS)
    metric = st.selectbox("Metric", metrics, key="compare_metric",
                          index=metrics.index(qp["metric"]) if qp.get("metric") in metrics else 0)

    compared = data.compare_arms(metric, picked, tuple(picked_arms))
    chosen = compared["chosen"]
    if chosen.empty:
        st.warning("Pick at least one recorded session and one arm.")
        st.stop()
    picked_sources = sources if picked is None else list(picked)

    st.subheader("Metrics side by side (mean per session)")
    side, summary = compared["side"], compared["summary"]
    st.caption("Sessions per arm: " + ", ".join(f"{a}: {int(k)}" for a, k in compared["n"].items()))
    show_table(rounded(side), hide_index=True, width="stretch", key="compare_side")

    c1, c2 = st.columns(2)
    with c1:
        st.subheader(f"Mean {metric} with 95% CI")
        st.plotly_chart(charts.arm_bars(summary, metric), width="stretch", key="compare_bars")
        shown = summary.drop(columns=["total"]) if metric in RATES else summary
        show_table(rounded(shown), hide_index=True, width="stretch", key="compare_summary")
    with c2:
        st.subheader(f"Distribution of {metric} per session")
        st.plotly_chart(charts.arm_distribution(chosen, metric), width="stretch", key="compare_dist")

    st.subheader("Per-session differences")
    arm_list = sorted(chosen["arm"].unique())
    wanted_base = qp.get("baseline") if qp.get("baseline") in arm_list else data.default_baseline(arm_list)
    baseline = st.selectbox("Baseline arm", arm_list, index=arm_list.index(wanted_base), key="compare_baseline")
    state = {"metric": metric, "baseline": baseline, "arms": ",".join(picked_arms) if picked_arms != arms else ""}
    state = {k: v for k, v in state.items() if v}
    if state != qp.to_dict():
        qp.from_dict(state)  # this comparison is a link: /compare?metric=...&baseline=...&arms=...
    paired = data.compare_pairs(metric, picked, tuple(picked_arms), baseline)
    diff, diffs = paired["diff"], paired["diffs"]
    if diffs is None:
        st.caption("No other arm replayed the same sessions as the baseline.")
    else:
        st.caption(f"Mean per-session difference against {baseline} with its 95% confidence interval "
                   "(Student t over the paired differences; the same numbers `prunegate compare` prints)")
        diffs = diffs.copy()
        diffs.insert(1, "verdict", [verdict(metric, lo, hi) for lo, hi in zip(diffs["ci_low"], diffs["ci_high"],
                                                                              strict=True)])
        way = BETTER.get(metric)
        st.caption(f"For {metric.replace('_', ' ')}, {way} is better." if way else
                   f"{metric.replace('_', ' ')} has no better direction: the verdict says only higher or lower.")
        show_table(rounded(diffs.drop(columns=["metric", "level"])), hide_index=True, width="stretch",
                   key="compare_diff_summary", column_config={"mean_diff": "mean difference"})
        st.plotly_chart(charts.paired_bars(diff, metric, baseline), width="stretch", key="compare_diff_chart")
        shown = largest(diff, "difference", DIFF_ROWS)
        if len(shown) < len(diff):
            st.caption(f"The {len(shown):,} largest differences of {len(diff):,} (by size); the download below "
                       "has every one.")
        show_table(rounded(shown), hide_index=True, width="stretch", key="compare_diff")
        downloads(diff, "comparison-differences", "compare_diff_dl")
    st.subheader("Download")
    st.caption("Every picked session's metrics (one row per replayed session: arm, source session, all metrics)")
    downloads(chosen, "comparison-metrics", "compare_results_dl")
    st.subheader("Save")
    saved.save_form("results", {"metric": metric, "baseline": baseline, "arms": picked_arms,
                                "sessions": picked_sources}, {
        "lines": [f"Metric {metric}; baseline {baseline}; arms {', '.join(picked_arms)}; "
                  f"{len(picked_sources)} recorded sessions"] + [
                  f"{r['arm']}: mean {metric} {_g(r['mean'])} (95% CI {_g(r['ci_low'])} to {_g(r['ci_high'])}), "
                  f"n = {r['n']}" for r in summary.to_dict("records")],
        "tables": {f"mean {metric} per arm (95% CI)": saved.plain(summary),
                   f"paired differences of {metric} against {baseline} (Student-t 95% CI)":
                       saved.plain(paired["diffs"]) if paired["diffs"] is not None else [],
                   "metrics side by side (mean per session)": saved.plain(side)},
    }, key="compare_results_save", title=f"{metric} against {baseline}")


if tab_results.open:
    with tab_results:
        results_tab()
