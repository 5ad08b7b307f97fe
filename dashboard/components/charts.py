"""Plotly figures. Every recorded string that reaches a label or hover text goes through
:func:`~dashboard.components.safe.esc`, because Plotly renders some HTML tags there."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dashboard.components.safe import esc, short

KIND_COLORS = {
    "system": "#7f7f7f",
    "user": "#1f77b4",
    "assistant": "#2ca02c",
    "tool": "#ff7f0e",
    "batch": "#9467bd",
    "summary": "#17becf",
}
OTHER_COLOR = "#bcbd22"
MARKER_STYLE = {  # decision/violation markers on the token timeline
    "prune": ("triangle-down", "#d62728"),
    "defer": ("square", "#ff7f0e"),
    "spill": ("diamond", "#8c564b"),
    "reinject": ("triangle-up", "#17becf"),
    "fail": ("x-thin-open", "#000000"),
    "violation": ("x", "#e31a1c"),
}
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


def context_bar(units: pd.DataFrame, *, budget: int | None = None, hard_ceiling: int | None = None,
                highlight: Iterable[str] = (), title: str = "", height: int = 260) -> go.Figure:
    """The context window as one horizontal bar: a segment per unit (width = tokens) in context
    order, coloured by unit kind; pinned, pending and open units hatched; ``highlight`` outlined."""
    fig = go.Figure()
    marked = set(highlight)
    if not units.empty:
        units = units.assign(
            _pattern=[_pattern(r) for r in units.to_dict("records")],
            _kind=[k if k in KIND_COLORS else "other" for k in units["kind"].fillna("other")],
        )
        for kind, group in units.groupby("_kind", sort=False):
            records = group.to_dict("records")
            hover = [
                "<br>".join([
                    f"unit {esc(r['unit_id'])} ({esc(r['kind'])})",
                    f"{int(r['tokens'] or 0):,} tokens, {int(r['messages'])} message(s)",
                    f"messages: {esc(_ids(r['message_ids']))}",
                    f"state: {esc(_flags(r))}",
                    *([f"pending calls: {esc(_ids(r['pending_calls']))}"] if len(r["pending_calls"]) else []),
                    *([f"tools: {esc(_ids(r['tool_names']))}"] if len(r["tool_names"]) else []),
                    *(["<b>evicted by this prune</b>"] if r["unit_id"] in marked else []),
                ])
                for r in records
            ]
            fig.add_bar(
                x=group["tokens"], base=group["offset"], y=["context"] * len(group), orientation="h",
                name=esc(kind), legendgroup=esc(kind),
                marker=dict(
                    color=KIND_COLORS.get(str(kind), OTHER_COLOR),
                    pattern=dict(shape=list(group["_pattern"]), fgcolor="rgba(0,0,0,0.6)", solidity=0.25,
                                 fillmode="overlay"),
                    line=dict(
                        color=["#e31a1c" if u in marked else "white" for u in group["unit_id"]],
                        width=[3 if u in marked else 0.5 for u in group["unit_id"]],
                    ),
                ),
                hovertext=hover, hoverinfo="text",
            )
    for _flag, shape, label in FLAG_PATTERNS:  # legend entries for the hatching
        fig.add_bar(x=[None], y=["context"], name=label, orientation="h",
                    marker=dict(color="white", pattern=dict(shape=shape, fgcolor="#444"),
                                line=dict(color="#444", width=1)),
                    hoverinfo="skip", showlegend=True)
    total = int(units["tokens"].sum()) if not units.empty else 0
    if budget:
        fig.add_vline(x=budget, line=dict(color="#ff7f0e", dash="dash"), annotation_text="budget",
                      annotation_position="top")
    if hard_ceiling:
        fig.add_vline(x=hard_ceiling, line=dict(color="#d62728", dash="dot"), annotation_text="hard ceiling",
                      annotation_position="top")
    heading = f"{esc(title)} · {total:,} tokens" if title else f"{total:,} tokens in context"
    fig.update_layout(
        barmode="overlay", height=height, margin=dict(l=10, r=10, t=40, b=10),
        title=dict(text=heading, font=dict(size=14)),
        xaxis=dict(range=[0, max(total, budget or 0, hard_ceiling or 0) * 1.05 or 1]),
        yaxis=dict(showticklabels=False), legend=dict(orientation="h", yanchor="top", y=-0.2),
        bargap=0.25,
    )
    return fig


def token_timeline(series: pd.DataFrame, markers: pd.DataFrame, *, step: int | None,
                   budget: int | None, hard_ceiling: int | None, height: int = 300) -> go.Figure:
    """Context tokens over the session's steps against the budget and the hard ceiling, with a
    marker at every prune, deferral, spill, failure and violation, and the current step."""
    fig = go.Figure()
    if not series.empty:
        # carry the last value to the end of the session (steps after the last message event)
        end = max([int(series["seq_end"].max())] + ([int(markers["seq"].max())] if not markers.empty else [])
                  + ([int(step)] if step is not None else []))
        if end > int(series["seq"].iloc[-1]):
            tail = series.iloc[[-1]].assign(seq=end, seq_end=end, points=0)
            series = pd.concat([series, tail], ignore_index=True)
        bucketed = bool((series["points"] > 3).any())
        trace = go.Scattergl if len(series) > 1500 else go.Scatter
        fig.add_trace(trace(x=series["seq"], y=series["tokens"], mode="lines", name="context tokens",
                            line=dict(color="#1f77b4", shape="hv"), hovertemplate="step %{x}: %{y:,} tokens<extra></extra>"))
        if bucketed:
            fig.add_trace(trace(x=series["seq"], y=series["peak_tokens"], mode="lines", name="peak (per bucket)",
                                line=dict(color="#aec7e8", width=1, shape="hv"),
                                hovertemplate="steps from %{x}: peak %{y:,}<extra></extra>"))
        if not markers.empty:
            pos = pd.merge_asof(markers.sort_values("seq"), series[["seq", "peak_tokens"]].sort_values("seq"),
                                on="seq", direction="backward")
            for kind, group in pos.groupby("kind", sort=False):
                symbol, color = MARKER_STYLE.get(str(kind), ("circle", "#333"))
                fig.add_trace(go.Scatter(
                    x=group["seq"], y=group["peak_tokens"], mode="markers", name=esc(kind),
                    marker=dict(symbol=symbol, color=color, size=10, line=dict(width=1, color=color)),
                    hovertemplate=f"{esc(kind)} at step %{{x}}<extra></extra>",
                ))
    if budget:
        fig.add_hline(y=budget, line=dict(color="#ff7f0e", dash="dash"), annotation_text="budget",
                      annotation_position="top left")
    if hard_ceiling:
        fig.add_hline(y=hard_ceiling, line=dict(color="#d62728", dash="dot"), annotation_text="hard ceiling",
                      annotation_position="top left")
    if step is not None:
        fig.add_vline(x=step, line=dict(color="#444", width=2), annotation_text=f"step {step}",
                      annotation_position="top right")
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=30), xaxis_title="step (prunegate.seq)",
                      yaxis_title="tokens", legend=dict(orientation="h", y=-0.25), hovermode="closest")
    return fig


def arm_bars(summary: pd.DataFrame, metric: str) -> go.Figure:
    """Mean of a metric per arm with its 95% confidence interval."""
    err = (summary["ci_high"] - summary["mean"]).fillna(0)
    fig = go.Figure(go.Bar(
        x=[esc(a) for a in summary["arm"]], y=summary["mean"],
        error_y=dict(type="data", array=err, visible=True),
        hovertext=[f"{esc(a)}: mean {m:.3g} (n={n})" for a, m, n in zip(summary["arm"], summary["mean"], summary["n"], strict=True)],
        hoverinfo="text", marker_color="#1f77b4",
    ))
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=30, b=30), yaxis_title=f"mean {metric} (95% CI)")
    return fig


def arm_distribution(metrics: pd.DataFrame, metric: str) -> go.Figure:
    """Per-session values of a metric per arm: box plot with every session as a point."""
    fig = go.Figure()
    for arm, group in metrics.groupby("arm", sort=True):
        fig.add_trace(go.Box(
            y=group[metric], name=esc(arm), boxpoints="all", jitter=0.4, pointpos=0,
            hovertext=[esc(short(label or sid, 60)) for label, sid in zip(group["label"], group["session_id"], strict=True)],
            hoverinfo="y+text",
        ))
    fig.update_layout(height=340, margin=dict(l=10, r=10, t=30, b=30), yaxis_title=metric, showlegend=False)
    return fig


def paired_bars(diff: pd.DataFrame, metric: str, baseline: str) -> go.Figure:
    """Per source session: each arm's metric minus the baseline arm's."""
    fig = go.Figure()
    for arm, group in diff.groupby("arm", sort=True):
        fig.add_bar(
            x=[esc(short(label or sid, 40)) for label, sid in zip(group["label"], group["source_id"], strict=True)],
            y=group["difference"], name=esc(arm),
            hovertext=[f"{esc(arm)} − {esc(baseline)}: {d:+.3g}" for d in group["difference"]], hoverinfo="text",
        )
    fig.update_layout(barmode="group", height=340, margin=dict(l=10, r=10, t=30, b=80),
                      yaxis_title=f"{metric} − baseline", legend=dict(orientation="h", y=-0.35))
    return fig
