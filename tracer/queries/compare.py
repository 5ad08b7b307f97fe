"""Compare: per-session metrics of the stored replays, per-arm means and paired differences with intervals.

Why these read the replay's own record: a replay counts its metrics as it runs
(:class:`~tracer.lab.replay.SessionResult`) and records them on its root span
(:func:`tracer.lab.metrics.attribute`); reading them back, and pairing and bounding them with
:mod:`tracer.lab.metrics`, is what makes the dashboard show exactly what ``prunegate compare``
printed for the same replays. The span counts come from the session catalog compaction keeps
(:mod:`tracer.store.catalog`), so a visit reads one row per session, not every span's JSON. A
session recorded without them (an import, a live session, a replay by an older prunegate) falls back to what its spans count where spans can (invalid
requests, prunes, deferrals, spills, failures, peak tokens; the same definitions, checked equal on
real replays by the tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from tracer.lab import metrics as m
from tracer.queries._sql import Source, _df, _list, _struct
from tracer.queries.listing import reads_kept, roots_relation, summary_sql

# Counted from spans only (every session has them; a comparison's replays too).
SPAN_METRICS: tuple[str, ...] = ("violations", "retries", "final_tokens", "tokens_pruned", "over_budget_checks")
# Every per-session metric the Compare page offers: the compared ones (tracer.lab.metrics), then the span counts.
METRICS: tuple[str, ...] = ("violations", *m.NAMES, *SPAN_METRICS[1:])
# Compared metrics a session's spans also count (the fallback for sessions without a replay record).
_FROM_SPANS = ("invalid_requests", "prunes", "deferrals", "spills", "failures", "peak_tokens")

_RECORDED = _struct({m.attribute(n): ("DOUBLE" if n == "retention" else "BIGINT") for n in m.NAMES})


def _metric_sql(*, kept: bool) -> str:
    cols = []
    for n in m.NAMES:
        recorded = f'rec.r."{m.attribute(n)}"'
        cols.append(f"coalesce({recorded}, t.{n}) AS {n}" if n in _FROM_SPANS else f"{recorded} AS {n}")
    return f"""
    WITH t AS ({summary_sql(kept=kept)}),
    rec AS (
        SELECT session_id, any_value(from_json(attributes, '{_RECORDED}')) AS r
        FROM {roots_relation(kept=kept)} GROUP BY session_id
    )
    SELECT t.session_id,
           coalesce(t.source_id, CASE WHEN t.source = 'replay' THEN t.label END, t.session_id) AS source_id,
           t.label, t.source, coalesce(t.replay_label, t.policy) AS policy, t.gated, t.budget,
           {", ".join(cols)}, {", ".join(f"t.{n}" for n in SPAN_METRICS)}
    FROM t LEFT JOIN rec USING (session_id)
    WHERE (len(CAST($sids AS VARCHAR[])) = 0 OR list_contains(CAST($sids AS VARCHAR[]), t.session_id))
      AND (len(CAST($srcs AS VARCHAR[])) = 0
           OR list_contains(CAST($srcs AS VARCHAR[]),
                            coalesce(t.source_id, CASE WHEN t.source = 'replay' THEN t.label END, t.session_id)))
    """


# kept: the roots and span counts compaction keeps (tracer.store.catalog), not a JSON read of every span per visit
_METRIC_SQL = {k: _metric_sql(kept=k) for k in (False, True)}


def session_metrics(
    src: Source,
    *,
    session_ids: Sequence[str] | None = None,
    source_ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per-session metrics (:data:`METRICS`) with the session's policy (a replay's arm label, e.g.
    ``recency@target=0.5``), gated flag, ``arm`` (:func:`tracer.lab.metrics.arm_label`; a recorded
    session's is ``(recorded)``) and the session it replays (``source_id``: a recorded session is
    its own source; a replay of a conversation that was never recorded pairs by name). Filter by
    the sessions themselves and/or by their sources. Sorted by source, then arm."""
    df = _df(src, _METRIC_SQL[reads_kept(src)], {"sids": _list(session_ids), "srcs": _list(source_ids)})
    recorded = df["policy"].isna()
    df["arm"] = [
        "(recorded)" if rec else m.arm_label(str(p), None if pd.isna(g) else bool(g))
        for rec, p, g in zip(recorded, df["policy"], df["gated"], strict=True)
    ]
    df["policy"] = df["policy"].where(~recorded, "(recorded)")
    ungated = (df["gated"].notna() & df["gated"].eq(False)).to_numpy(dtype=bool)
    for name in m.GATED_ONLY:  # not applicable to an ungated replay: NaN (shown "—"), not 0
        df[name] = df[name].astype("float64").where(~ungated)
    cols = ["session_id", "source_id", "label", "source", "policy", "gated", "arm", "budget", *METRICS]
    return df[cols].sort_values(["source_id", "arm"], kind="stable").reset_index(drop=True)


def _check(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {list(METRICS)}")


def _rows(frame: pd.DataFrame, metric: str) -> list[dict[str, Any]]:
    values = frame[metric].astype("float64").tolist()  # a missing value reads NaN: None below
    return [{"source_id": s, "arm": a, metric: (None if v != v else v)}
            for s, a, v in zip(frame["source_id"].tolist(), frame["arm"].tolist(), values, strict=True)]


def arm_summary(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per arm: ``n`` sessions with a value, ``mean``, ``sd``, ``min``, ``max``, ``total`` of
    ``metric`` and the 95% interval of the mean (:func:`tracer.lab.metrics.interval`, Student t)."""
    _check(metric)
    out = []
    for arm, part in frame.groupby("arm", sort=True):
        values = [v for v in part[metric] if not pd.isna(v)]
        iv = m.interval(values)
        out.append({"arm": arm, "n": iv.n, "mean": iv.mean, "sd": iv.sd,
                    "min": min(values) if values else None, "max": max(values) if values else None,
                    "total": sum(values) if values else None, "ci_low": iv.low, "ci_high": iv.high})
    df = pd.DataFrame(out, columns=["arm", "n", "mean", "sd", "min", "max", "total", "ci_low", "ci_high"])
    numbers = ["mean", "sd", "min", "max", "total", "ci_low", "ci_high"]
    df[numbers] = df[numbers].astype(float)  # None (no value, one value) reads as NaN
    return df


def session_differences(frame: pd.DataFrame, metric: str, baseline: str) -> pd.DataFrame:
    """Per recorded session: each arm's ``metric`` minus the baseline arm's, for sessions both ran
    (:func:`tracer.lab.metrics.pairs`): ``source_id``, ``label``, ``arm``, ``baseline``, ``value``,
    ``difference``; sorted by arm, then session."""
    _check(metric)
    labels = dict(zip(frame["source_id"], frame["label"], strict=True))
    pairs = m.pairs(_rows(frame, metric), metric, baseline)
    return pd.DataFrame(
        [{"source_id": p.source_id, "label": labels.get(p.source_id), "arm": p.arm, "baseline": p.baseline,
          "value": p.value, "difference": p.difference} for p in pairs],
        columns=["source_id", "label", "arm", "baseline", "value", "difference"],
    )


def difference_summary(frame: pd.DataFrame, metric: str, baseline: str) -> pd.DataFrame:
    """Per arm other than ``baseline``: the mean per-session difference with its 95% interval, the
    numbers ``prunegate compare`` prints for the same replays
    (:func:`tracer.lab.metrics.difference_summary`)."""
    _check(metric)
    return pd.DataFrame(m.difference_summary(_rows(frame, metric), metric, baseline),
                        columns=["arm", "baseline", "metric", "n", "mean_diff", "ci_low", "ci_high", "level"])


__all__ = ["METRICS", "SPAN_METRICS", "arm_summary", "difference_summary", "session_differences", "session_metrics"]
