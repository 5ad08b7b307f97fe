"""Plotly figures. Every recorded string that reaches a label or hover text goes through
:func:`~dashboard.components.safe.esc`, because Plotly renders some HTML tags there."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.components.safe import esc, short

# Okabe-Ito: tells apart for the common colour-vision deficiencies.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
KIND_COLORS = {
    "system": "#999999",
    "user": "#0072B2",
    "assistant": "#009E73",
    "tool": "#E69F00",
    "batch": "#CC79A7",
    "summary": "#56B4E9",
}
OTHER_COLOR = "#F0E442"
EVICTED_COLOR = "#D55E00"  # outline of the units a prune evicted
VIOLATING_COLOR = "#000000"  # outline of the units a violation is about
MARKER_STYLE = {  # decision/violation markers on the token timeline
    "prune": ("triangle-down", "#D55E00"),
    "defer": ("square", "#E69F00"),
    "spill": ("diamond", "#8c564b"),
    "reinject": ("triangle-up", "#56B4E9"),
    "fail": ("x-thin-open", "#000000"),
    "violation": ("x", "#CC0000"),
}
MARKER_NAMES = {  # the legend, in words: what each mark means
    "prune": "prune (units evicted)",
    "defer": "deferral (waited for a commit boundary)",
    "spill": "spill (units moved to the spill store)",
    "reinject": "re-injection (spilled units brought back)",
    "fail": "failure (over the hard ceiling)",
    "violation": "violation (a request the provider would refuse), drawn above",
}
# Marks drawn above the line by this share of the highest token count, so a violation's ✖ never
# covers the prune's ▼ at the same step.
MARKER_LIFT = {"violation": 0.08, "fail": 0.04}
FLAG_PATTERNS = (("open", ".", "open stream"), ("pending", "x", "pending tool call"),
                 ("pinned", "/", "pinned (never pruned)"))  # the first flag a unit has sets its hatching


def _pattern(row: Any) -> str:
    for flag, shape, _ in FLAG_PATTERNS:
        if bool(row.get(flag)):
            return shape
    return ""


def _flags(row: Any) -> str:
    names = [label for flag, _, label in FLAG_PATTERNS if bool(row.get(flag))]
    return ", ".join(names) if names else "closed"


def _ids(values: Any, limit: int = 6) -> str:
    items = [str(v) for v in (list(values) if values is not None else [])]
    text = ", ".join(items[:limit])
    return text + (f" … (+{len(items) - limit})" if len(items) > limit else "")


def _vline(x: float, color: str, dash: str, label: str, *, width: float = 1.5) -> tuple[dict, dict]:
    """A vertical line across the plot with a label on top (shape + annotation, as dicts: cheap)."""
    shape = dict(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1, line=dict(color=color, dash=dash,
                                                                                            width=width))
    note = dict(xref="x", yref="paper", x=x, y=1, yanchor="bottom", text=label, showarrow=False,
                font=dict(size=11, color=color))
    return shape, note


def _hline(y: float, color: str, dash: str, label: str) -> tuple[dict, dict]:
    shape = dict(type="line", xref="paper", yref="y", x0=0, x1=1, y0=y, y1=y, line=dict(color=color, dash=dash))
    note = dict(xref="paper", yref="y", x=0, y=y, xanchor="left", yanchor="bottom", text=label, showarrow=False,
                font=dict(size=11, color=color))
    return shape, note


def _figure(data: list[dict], layout: dict) -> go.Figure:
    # One constructor call over plain dicts validates once; add_* calls and add_vline re-validate
    # the whole figure each time (several times slower for a replay step).
    return go.Figure({"data": data, "layout": layout})


def unit_label(row: Any) -> str:
    """What a unit's segment says: unit, role(s), tokens (e.g. ``u3 · assistant+tool · 80 tok``)."""
    roles = [str(r) for r in (list(row.get("roles")) if row.get("roles") is not None else []) if r]
    who = "+".join(sorted(roles)) if roles else str(row.get("kind") or "?")
    return f"{row['unit_id']} · {who} · {int(row.get('tokens') or 0):,} tok"


def context_bar(units: pd.DataFrame, *, budget: int | None = None, hard_ceiling: int | None = None,
                highlight: Iterable[str] = (), violating: Iterable[str] = (), title: str = "",
                height: int = 300, highlight_label: str = "evicted by the prune") -> go.Figure:
    """The context window as one horizontal bar: a segment per unit (width = tokens) in context
    order, labelled ``unit · role · tokens`` (hidden where it does not fit; hover shows it all),
    coloured by unit kind; pinned, pending and open units hatched; ``highlight`` outlined in
    vermillion, ``violating`` in black. The legend names every colour, hatching and outline."""
    data: list[dict] = []
    marked, bad = {str(u) for u in highlight}, {str(u) for u in violating}

    def outline(u: str) -> tuple[str, float]:
        if u in bad:
            return VIOLATING_COLOR, 4.0
        if u in marked:
            return EVICTED_COLOR, 4.0
        return "white", 0.5

    if not units.empty:
        units = units.assign(
            _pattern=[_pattern(r) for r in units.to_dict("records")],
            _kind=[k if k in KIND_COLORS else "other" for k in units["kind"].fillna("other")],
        )
        for kind, group in units.groupby("_kind", sort=False):
            records = group.to_dict("records")
            hover = [
                "<br>".join([
                    esc(unit_label(r)),
                    f"unit {esc(r['unit_id'])} ({esc(r['kind'])}), {int(r['messages'])} message(s)",
                    f"messages: {esc(_ids(r['message_ids']))}",
                    f"state: {esc(_flags(r))}",
                    *([f"pending calls: {esc(_ids(r['pending_calls']))}"] if len(r["pending_calls"]) else []),
                    *([f"tools: {esc(_ids(r['tool_names']))}"] if len(r["tool_names"]) else []),
                    *([f"<b>{esc(highlight_label)}</b>"] if str(r["unit_id"]) in marked else []),
                    *(["<b>the violation is about this unit</b>"] if str(r["unit_id"]) in bad else []),
                ])
                for r in records
            ]
            lines = [outline(str(u)) for u in group["unit_id"]]
            data.append(dict(
                type="bar", orientation="h", x=group["tokens"].tolist(), base=group["offset"].tolist(),
                y=["context"] * len(group), name=esc(kind), legendgroup=esc(kind), hovertext=hover, hoverinfo="text",
                text=["<br>".join(esc(part) for part in unit_label(r).split(" · ")) for r in records],
                textposition="inside", insidetextanchor="middle", textangle=0,
                textfont=dict(size=11, color="#111" if kind in ("tool", "summary", "other", "system") else "white"),
                marker=dict(
                    color=KIND_COLORS.get(str(kind), OTHER_COLOR),
                    pattern=dict(shape=list(group["_pattern"]), fgcolor="rgba(0,0,0,0.6)", solidity=0.25,
                                 fillmode="overlay"),
                    line=dict(color=[c for c, _ in lines], width=[w for _, w in lines]),
                ),
            ))
    for _flag, shape, label in FLAG_PATTERNS:  # legend entries for the hatching
        data.append(dict(type="bar", orientation="h", x=[None], y=["context"], name=label, hoverinfo="skip",
                         marker=dict(color="white", pattern=dict(shape=shape, fgcolor="#444"),
                                     line=dict(color="#444", width=1))))
    for shown, color, label in ((marked, EVICTED_COLOR, highlight_label),
                                (bad, VIOLATING_COLOR, "violating unit")):  # legend entries for the outlines
        if shown:
            data.append(dict(type="bar", orientation="h", x=[None], y=["context"], name=esc(label), hoverinfo="skip",
                             marker=dict(color="white", line=dict(color=color, width=4))))
    total = int(units["tokens"].sum()) if not units.empty else 0
    lines_ = []
    if budget:
        lines_.append(_vline(budget, "#E69F00", "dash", f"budget {budget:,}"))
    if hard_ceiling:
        lines_.append(_vline(hard_ceiling, "#D55E00", "dot", f"hard ceiling {hard_ceiling:,}"))
    heading = f"{esc(title)} · {total:,} tokens" if title else f"{total:,} tokens in context"
    return _figure(data, dict(
        barmode="overlay", height=height, margin=dict(l=10, r=10, t=40, b=10),
        title=dict(text=heading, font=dict(size=14)),
        xaxis=dict(range=[0, max(total, budget or 0, hard_ceiling or 0) * 1.05 or 1], title="tokens"),
        yaxis=dict(showticklabels=False),
        legend=dict(orientation="h", yanchor="top", y=-0.35, title=dict(text="colour: unit kind · hatching: state ·"
                                                                             " outline: marked ")),
        bargap=0.15, uniformtext=dict(mode="hide", minsize=8),
        shapes=[sh for sh, _ in lines_], annotations=[an for _, an in lines_],
    ))


def token_timeline(series: pd.DataFrame, markers: pd.DataFrame, *, step: int | None,
                   budget: int | None, hard_ceiling: int | None, height: int = 300) -> go.Figure:
    """Context tokens over the session's steps against the budget and the hard ceiling, with a
    marker at every prune, deferral, spill, failure and violation, and the current step."""
    data: list[dict] = []
    if not series.empty:
        # carry the last value to the end of the session (steps after the last message event)
        end = max([int(series["seq_end"].max())] + ([int(markers["seq"].max())] if not markers.empty else [])
                  + ([int(step)] if step is not None else []))
        if end > int(series["seq"].iloc[-1]):
            tail = series.iloc[[-1]].assign(seq=end, seq_end=end, points=0)
            series = pd.concat([series, tail], ignore_index=True)
        kind = "scattergl" if len(series) > 1500 else "scatter"
        data.append(dict(type=kind, x=series["seq"].tolist(), y=series["tokens"].tolist(), mode="lines",
                         name="context tokens", line=dict(color="#1f77b4", shape="hv"),
                         hovertemplate="step %{x}: %{y:,} tokens<extra></extra>"))
        if bool((series["seq_end"] > series["seq"]).any()):  # bucketed: show each bucket's peak too
            data.append(dict(type=kind, x=series["seq"].tolist(), y=series["peak_tokens"].tolist(), mode="lines",
                             name="peak (per bucket)", line=dict(color="#aec7e8", width=1, shape="hv"),
                             hovertemplate="steps from %{x}: peak %{y:,}<extra></extra>"))
        if not markers.empty:
            pos = pd.merge_asof(markers.sort_values("seq"), series[["seq", "peak_tokens"]].sort_values("seq"),
                                on="seq", direction="backward")
            many = len(pos) > 300  # thousands of deferrals: smaller marks, drawn by WebGL
            top = float(series["peak_tokens"].max() or 0)
            for mark, group in pos.groupby("kind", sort=False):
                symbol, color = MARKER_STYLE.get(str(mark), ("circle", "#333"))
                lift = MARKER_LIFT.get(str(mark), 0.0) * top
                data.append(dict(type="scattergl" if many else "scatter", x=group["seq"].tolist(),
                                 y=(group["peak_tokens"] + lift).tolist(), mode="markers",
                                 name=esc(MARKER_NAMES.get(str(mark), mark)),
                                 marker=dict(symbol=symbol, color=color, size=6 if many else 10,
                                             line=dict(width=1, color=color)),
                                 customdata=group["n"].tolist(),
                                 hovertemplate=f"{esc(mark)} at step %{{x}} (%{{customdata}} from here)"
                                               "<extra></extra>" if many else
                                               f"{esc(mark)} at step %{{x}}<extra></extra>"))
    lines = []
    if budget:
        lines.append(_hline(budget, "#ff7f0e", "dash", "budget"))
    if hard_ceiling:
        lines.append(_hline(hard_ceiling, "#d62728", "dot", "hard ceiling"))
    if step is not None:
        lines.append(_vline(step, "#444", "solid", f"step {step}", width=2))
    return _figure(data, dict(
        height=height, margin=dict(l=10, r=10, t=30, b=30), xaxis=dict(title="step (one per recorded event)"),
        yaxis=dict(title="tokens"), legend=dict(orientation="h", y=-0.25), hovermode="closest",
        shapes=[sh for sh, _ in lines], annotations=[an for _, an in lines],
    ))


PATTERNS = ("", "/", "x", ".", "-", "|", "+", "\\")  # Plotly bar fill patterns, "" = solid


def arm_styles(arms: Iterable[str]) -> dict[str, tuple[str, str]]:
    """A distinct (colour, fill pattern) per arm, for any number of arms: the colour says the
    policy (Okabe-Ito, told apart under the common colour-vision deficiencies), the pattern says
    ungated (hatched) against gated (solid); past 8 policies the colours repeat with other patterns.
    Sorted, so an arm keeps its style across charts."""
    names = sorted({str(a) for a in arms})
    policies = sorted({a.split(" · ")[0] for a in names})
    out = {}
    for arm in names:
        policy, _, gate = arm.partition(" · ")
        i = policies.index(policy)
        cycle = i // len(OKABE_ITO)
        pattern = PATTERNS[(2 * cycle + (gate == "ungated")) % len(PATTERNS)]
        out[arm] = (OKABE_ITO[i % len(OKABE_ITO)], pattern)
    return out


def arm_colors(arms: Iterable[str]) -> dict[str, str]:
    """The colour of each arm (:func:`arm_styles`; the pattern tells apart arms sharing one)."""
    return {a: c for a, (c, _) in arm_styles(arms).items()}


def arm_bars(summary: pd.DataFrame, metric: str) -> go.Figure:
    """Mean of a metric per arm with its 95% confidence interval; one colour per arm."""
    styles = arm_styles(summary["arm"])
    colors = {a: c for a, (c, _) in styles.items()}
    err = (summary["ci_high"] - summary["mean"]).fillna(0)
    fig = go.Figure(go.Bar(
        x=[esc(a) for a in summary["arm"]], y=summary["mean"],
        error_y=dict(type="data", array=err, visible=True, color="#333"),
        hovertext=[f"{esc(a)}: mean {m:.3g} (n={n})" for a, m, n in zip(summary["arm"], summary["mean"], summary["n"], strict=True)],
        hoverinfo="text", marker_color=[colors[str(a)] for a in summary["arm"]],
        marker_pattern_shape=[styles[str(a)][1] for a in summary["arm"]],
    ))
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=30, b=30), yaxis_title=f"mean {metric} (95% CI)")
    return fig


POINTS_MAX = 300  # per arm: beyond it a box plot's points and a bar per session are unreadable and slow to draw


def _present(values: Iterable[float]) -> np.ndarray:
    """The values as floats, without the missing ones (NaN: a session without the metric)."""
    arr = np.asarray(list(values), dtype=float)
    return arr[~np.isnan(arr)]


def box_stats(values: Iterable[float]) -> dict[str, Any]:
    """What a Plotly box shows, computed here rather than in the browser: quartiles (linear
    interpolation, Plotly's default), whiskers at the furthest values within 1.5 IQR of the box, and
    the values beyond them (``outliers``, each distinct value once with its ``counts``)."""
    arr = _present(values)
    if not len(arr):
        return {"n": 0}
    q1, median, q3 = (float(x) for x in np.percentile(arr, [25, 50, 75]))
    reach = 1.5 * (q3 - q1)
    inside = arr[(arr >= q1 - reach) & (arr <= q3 + reach)]
    outliers, counts = np.unique(arr[(arr < q1 - reach) | (arr > q3 + reach)], return_counts=True)
    return {"n": len(arr), "q1": q1, "median": median, "q3": q3,
            "lowerfence": float(inside.min()), "upperfence": float(inside.max()),
            "outliers": [float(x) for x in outliers], "counts": [int(c) for c in counts]}


def arm_distribution(metrics: pd.DataFrame, metric: str) -> go.Figure:
    """Per-session values of a metric per arm: box plot with every session as a point. Above
    :data:`POINTS_MAX` sessions in an arm: the box from :func:`box_stats` and each distinct outlying
    value as one point (the browser then draws a few dozen numbers, not every session's)."""
    every = metrics.groupby("arm")[metric].size().max() <= POINTS_MAX if len(metrics) else True
    styles = arm_styles(metrics["arm"])
    symbols = ("circle", "circle-open", "square", "square-open", "diamond", "diamond-open", "cross", "x")
    fig = go.Figure()
    for arm, group in metrics.groupby("arm", sort=True):
        color, pattern = styles[str(arm)]
        marker = dict(color=color, symbol=symbols[PATTERNS.index(pattern) % len(symbols)])
        if every:
            fig.add_trace(go.Box(
                y=group[metric], name=esc(arm), boxpoints="all", jitter=0.4, pointpos=0, marker=marker,
                line_color=color, hoverinfo="y+text",
                hovertext=[esc(short(label or sid, 60)) for label, sid in zip(group["label"], group["session_id"],
                                                                              strict=True)],
            ))
            continue
        stats = box_stats(group[metric])
        if not stats["n"]:
            continue
        fig.add_trace(go.Box(x=[esc(arm)], q1=[stats["q1"]], median=[stats["median"]], q3=[stats["q3"]],
                             lowerfence=[stats["lowerfence"]], upperfence=[stats["upperfence"]],
                             name=esc(arm), marker=marker, line_color=color))
        if stats["outliers"]:
            fig.add_trace(go.Scatter(
                x=[esc(arm)] * len(stats["outliers"]), y=stats["outliers"], mode="markers", marker=marker,
                name=esc(arm), hoverinfo="y+text", hovertext=[f"{c:,} session(s)" for c in stats["counts"]],
            ))
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=30), yaxis_title=metric, showlegend=False)
    return fig


BINS_MAX = 40  # bars per arm in a histogram of differences


def histogram_bins(values: Iterable[float]) -> np.ndarray:
    """Bin edges shared by every arm (so their bars line up): NumPy's "auto" rule, at most
    :data:`BINS_MAX` bins, one bin per whole number when the values are whole and few enough."""
    arr = _present(values)
    if not len(arr):
        return np.array([0.0, 1.0])
    lo, hi = float(arr.min()), float(arr.max())
    if lo == hi:
        return np.array([lo - 0.5, hi + 0.5])
    if np.all(arr == np.round(arr)) and hi - lo + 1 <= BINS_MAX:
        return np.arange(lo - 0.5, hi + 1.0)
    edges = np.histogram_bin_edges(arr, bins="auto")
    return edges if len(edges) - 1 <= BINS_MAX else np.linspace(lo, hi, BINS_MAX + 1)


def paired_bars(diff: pd.DataFrame, metric: str, baseline: str) -> go.Figure:
    """Per source session: each arm's metric minus the baseline arm's. One Okabe-Ito colour per
    arm, the legend above the plot (never over the bars), a zero line, session names slanted.
    With more than :data:`POINTS_MAX` sessions per arm: how many sessions had each difference (a
    histogram per arm, binned here by :func:`histogram_bins`), since thousands of bars cannot be read."""
    styles = arm_styles([*diff["arm"], baseline])  # the baseline keeps its place: same styles as the other charts
    fig = go.Figure()
    if len(diff) and diff.groupby("arm").size().max() > POINTS_MAX:
        edges = histogram_bins(diff["difference"])
        centres = (edges[:-1] + edges[1:]) / 2  # evenly spaced: Plotly groups the arms' bars within a bin
        for arm, group in diff.groupby("arm", sort=True):
            counts, _ = np.histogram(group["difference"].dropna(), bins=edges)
            fig.add_bar(x=centres, y=counts, name=esc(arm),
                        marker_color=styles[str(arm)][0], marker_pattern_shape=styles[str(arm)][1],
                        hovertext=[f"{esc(arm)} − {esc(baseline)} from {a:.3g} to {b:.3g}: {int(c):,} session(s)"
                                   for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True)],
                        hoverinfo="text")
        fig.update_layout(
            barmode="group", height=420, margin=dict(l=10, r=10, t=70, b=10),
            xaxis=dict(title=f"{metric} − {esc(baseline)} per session"), yaxis=dict(title="sessions"),
            legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                        title=dict(text=f"arm − baseline ({esc(baseline)}):")),
        )
        return fig
    for arm, group in diff.groupby("arm", sort=True):
        fig.add_bar(
            x=[esc(short(label or sid, 32)) for label, sid in zip(group["label"], group["source_id"], strict=True)],
            y=group["difference"], name=esc(arm), marker_color=styles[str(arm)][0],
            marker_pattern_shape=styles[str(arm)][1],
            hovertext=[f"{esc(arm)} − {esc(baseline)}: {d:+.3g}" for d in group["difference"]], hoverinfo="text",
        )
    fig.update_layout(
        barmode="group", height=420, margin=dict(l=10, r=10, t=70, b=10),
        yaxis=dict(title=f"{metric} − {esc(baseline)}", zeroline=True, zerolinecolor="#333", zerolinewidth=1.5),
        xaxis=dict(tickangle=-30, automargin=True),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0,
                    title=dict(text=f"arm − baseline ({esc(baseline)}):")),
    )
    return fig
