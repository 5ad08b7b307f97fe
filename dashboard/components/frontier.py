"""The Compare page's frontier: retention against cost for every arm of a stored sweep.

A sweep (``prunegate compare`` with lists of budgets or parameter values; every compare run is
stored as one, :mod:`tracer.lab.sweep`) is drawn as one point per arm with both intervals; the
Pareto-optimal arms are marked and joined, arms that sent invalid requests are drawn as crosses,
hovering gives the arm's parameters, and clicking a point opens the Replay page on a session of
that arm at its first lost reference (``?session=…&step=…``). Below: the recommendation
(:mod:`tracer.lab.recommend`, what ``prunegate recommend`` prints) and the tools whose results
were lost most.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard.components import data
from dashboard.components.charts import OKABE_ITO
from dashboard.components.safe import esc, md
from dashboard.components.widgets import show_table
from tracer.lab.recommend import describe, recommend
from tracer.queries import access

PALETTE = OKABE_ITO  # one colour per policy, told apart under the common colour-vision deficiencies
LEGEND = ("★ on the Pareto frontier (no other arm has both higher retention and a lower cost) · ● not on it · "
          "✕ sent requests the provider would refuse · the number by a point is its token budget "
          "(auto: 60% of each session's size) · bars: 95% intervals")
REPLAY_PAGE = "views/replay.py"


@st.cache_data(ttl=30, show_spinner=False, max_entries=32)
def _load(path: str, mtime_ns: int) -> dict[str, Any]:
    return access.sweep(path)


def _sweeps() -> list[Path]:
    return list(reversed(access.sweeps(data.store_path())))  # newest first


def figure(arms: list[dict[str, Any]], x_key: str = "cost_per_session") -> go.Figure:
    """Retention (y) against cost or tokens per session (x), intervals on both axes, one colour per
    policy; Pareto-optimal arms as stars joined by a line; arms with invalid requests as crosses.
    Each arm point carries its index in ``arms`` as customdata (what a click selects)."""
    lo_key, hi_key = ("cost_low", "cost_high") if x_key == "cost_per_session" else ("tokens_low", "tokens_high")
    fig = go.Figure()
    policies = list(dict.fromkeys(a["policy"] for a in arms))
    for p_i, policy in enumerate(policies):
        idx = [i for i, a in enumerate(arms) if a["policy"] == policy and a.get(x_key) is not None
               and a.get("retention") is not None]
        if not idx:
            continue
        pts = [arms[i] for i in idx]
        symbols = [("x" if a["invalid_requests"] else "star" if a["pareto"] else "circle") for a in pts]
        hover = [_hover(a) for a in pts]
        fig.add_trace(go.Scatter(
            x=[a[x_key] for a in pts], y=[a["retention"] for a in pts], mode="markers+text",
            name=esc(policy), customdata=[[i] for i in idx], hovertext=hover, hoverinfo="text",
            text=[esc(_short_label(a)) for a in pts],
            # alternate above / below along the x axis, so neighbouring budgets' labels do not overlap
            textposition=[("top center", "bottom center")[rank % 2] for rank in _x_rank(pts, x_key)],
            marker={"size": [16 if a["pareto"] else 11 for a in pts], "symbol": symbols,
                    "color": PALETTE[p_i % len(PALETTE)], "line": {"width": 1, "color": "#333"}},
            error_y={"type": "data", "symmetric": False,
                     "array": [_bound(a, "retention_high") - a["retention"] for a in pts],
                     "arrayminus": [a["retention"] - _bound(a, "retention_low") for a in pts], "thickness": 1},
            error_x={"type": "data", "symmetric": False,
                     "array": [(a[hi_key] or a[x_key]) - a[x_key] for a in pts],
                     "arrayminus": [a[x_key] - (a[lo_key] or a[x_key]) for a in pts], "thickness": 1},
        ))
    front = sorted((a for a in arms if a["pareto"] and a.get(x_key) is not None), key=lambda a: a[x_key])
    if len(front) > 1:
        fig.add_trace(go.Scatter(x=[a[x_key] for a in front], y=[a["retention"] for a in front], mode="lines",
                                 name="Pareto frontier", hoverinfo="skip",
                                 line={"dash": "dash", "color": "#444", "width": 1}))
    fig.update_layout(
        xaxis_title="USD per session (billed input incl. cache reads, plus output)" if x_key == "cost_per_session"
        else "tokens sent per session",
        yaxis_title="retention", height=460, margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": -0.2}, clickmode="event+select",
    )
    return fig


def _x_rank(pts: list[dict[str, Any]], x_key: str) -> list[int]:
    """Each point's rank along the x axis."""
    order = sorted(range(len(pts)), key=lambda i: pts[i][x_key])
    rank = [0] * len(pts)
    for r, i in enumerate(order):
        rank[i] = r
    return rank


def _bound(a: dict[str, Any], key: str) -> float:
    """An interval bound, or the point itself when there is no interval (one session)."""
    v = a.get(key)
    return float(a["retention"] if v is None else v)


def _short_label(a: dict[str, Any]) -> str:
    return f"{a['budget'] or 'auto'}" + (" ✕" if a["invalid_requests"] else "")


def _hover(a: dict[str, Any]) -> str:
    params = ", ".join(f"{k}={v}" for k, v in a["params"].items()) or "defaults"
    cost = ("n/a" if a.get("cost_per_session") is None else
            f"${a['cost_per_session']:.4f} [{a['cost_low'] or a['cost_per_session']:.4f}, "
            f"{a['cost_high'] or a['cost_per_session']:.4f}]")
    lines = [
        f"<b>{esc(a['arm'])}</b> ({'gated' if a['gated'] else 'ungated'})",
        f"policy {esc(a['policy'])} · {esc(params)} · budget {a['budget'] or 'auto'}",
        f"retention {a['retention']:.3f} [{_bound(a, 'retention_low'):.3f}, {_bound(a, 'retention_high'):.3f}]",
        f"cost/session {cost}",
        f"tokens/session {a['tokens_per_session']:,.0f}",
        f"invalid requests {a['invalid_requests']} · lost references {a['lost_references']}",
        f"sessions {a['sessions']}" + (" · Pareto-optimal" if a["pareto"] else ""),
    ]
    return "<br>".join(lines)


def target(arm: dict[str, Any]) -> dict[str, str] | None:
    """The replay to open for an arm: its first session with a lost reference, at that step (else
    its first recorded replay, at the start)."""
    replays = [r for r in arm.get("replays", []) if r.get("replay_id")]
    for r in replays:
        if r.get("first_lost_step") is not None:
            return {"session": r["replay_id"], "step": str(r["first_lost_step"])}
    return {"session": replays[0]["replay_id"]} if replays else None


def render() -> None:
    """The frontier tab of the Compare page."""
    paths = _sweeps()
    if not paths:
        st.info("No sweep stored yet. Run one, e.g. `prunegate compare --policies recency,salience,mask "
                "--budget 2000,4000,8000,16000 --gated on` (every compare run is stored as a sweep).")
        return
    picked = st.selectbox("Sweep", [str(p) for p in paths], key="frontier_sweep",
                          format_func=lambda p: Path(p).stem)
    try:
        rec = _load(picked, Path(picked).stat().st_mtime_ns)
    except (OSError, ValueError) as exc:
        st.error(md(f"Cannot read this sweep: {exc}"))
        return
    arms: list[dict[str, Any]] = rec["arms"]
    st.caption(md(f"{len(arms)} arms on {len(rec['sessions'])} sessions · prices as of {rec['prices']['as_of']} "
                  f"({rec['prices']['source']}) · {rec['created']}"))
    st.code(rec["command"], language="bash")
    axis = st.radio("x axis", ["cost_per_session", "tokens_per_session"], horizontal=True, key="frontier_axis",
                    format_func={"cost_per_session": "cost per session", "tokens_per_session": "tokens sent"}.get)
    invalid = [a for a in arms if a["invalid_requests"]]
    if invalid:
        st.warning(md(f"{len(invalid)} arms sent invalid requests (crosses): "
                      + ", ".join(f"{a['arm']} ({a['invalid_requests']})" for a in invalid)))
    st.caption(LEGEND + ". Click a point to open a session of that arm at its first lost reference.")
    event = st.plotly_chart(figure(arms, axis), width="stretch", key="frontier_chart", on_select="rerun",
                            selection_mode="points")
    _follow_click(event, arms)
    show_table(_table(arms), hide_index=True, width="stretch", key="frontier_table")
    _recommendation(rec)
    _lost_by_tool(arms)


def _follow_click(event: Any, arms: list[dict[str, Any]]) -> None:
    points = (event or {}).get("selection", {}).get("points", []) if isinstance(event, dict) else \
        getattr(getattr(event, "selection", None), "points", []) or []
    for p in points:
        custom = p.get("customdata")
        if not custom:
            continue
        arm = arms[int(custom[0])]
        where = target(arm)
        if where is None:
            st.warning(md(f"{arm['arm']}: this sweep was run with --no-trace; there is no replay to open."))
            return
        st.switch_page(REPLAY_PAGE, query_params=where)


def _table(arms: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "arm": a["arm"], "gated": a["gated"], "budget": a["budget"], "sessions": a["sessions"],
        "retention": a["retention"], "retention low": a["retention_low"], "retention high": a["retention_high"],
        "USD/session": a["cost_per_session"], "USD low": a["cost_low"], "USD high": a["cost_high"],
        "tokens/session": a["tokens_per_session"], "invalid requests": a["invalid_requests"],
        "lost references": a["lost_references"], "Pareto": a["pareto"],
    } for a in arms])


def _recommendation(rec: dict[str, Any]) -> None:
    st.subheader("Recommendation")
    c1, c2 = st.columns(2)
    minimum = c1.number_input("Minimum retention (held by the interval's lower bound)", min_value=0.0,
                              max_value=1.0, value=0.95, step=0.01, key="frontier_min_retention")
    gated = c2.radio("Arms", ["any", "on", "off"], horizontal=True, key="frontier_gated",
                     format_func={"any": "gated and ungated", "on": "gated only", "off": "ungated only"}.get)
    out = recommend(rec, float(minimum), gated=gated)
    if out["arm"] is None:
        st.warning(md(f"No arm keeps retention ≥ {minimum} at its interval's lower bound without invalid requests."))
    st.text("\n".join(describe(out)))


def _lost_by_tool(arms: list[dict[str, Any]]) -> None:
    rows = [{"arm": a["arm"], "tool": tool, "lost references": n} for a in arms for tool, n in a["lost_by_tool"].items()]
    st.subheader("Tools whose results are lost most")
    if not rows:
        st.caption("No arm lost a reference.")
        return
    df = pd.DataFrame(rows)
    total = df.groupby("tool", as_index=False)[["lost references"]].sum().sort_values("lost references", ascending=False)
    c1, c2 = st.columns([2, 3])
    c1.dataframe(total, hide_index=True, width="stretch", key="frontier_lost_tools")
    c2.dataframe(df.sort_values(["arm", "lost references"], ascending=[True, False]), hide_index=True,
                 width="stretch", key="frontier_lost_by_arm")
