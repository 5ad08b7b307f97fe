"""The Compare page's per-session charts at scale: a bar per session and every point of a box plot
up to POINTS_MAX sessions per arm, a histogram of the differences and the outliers only beyond it
(thousands of bars cannot be read and take seconds to draw)."""

from __future__ import annotations

import pandas as pd

from dashboard.components import charts


def _diff(per_arm: int) -> pd.DataFrame:
    rows = [{"source_id": f"s{i}", "label": f"session {i}", "arm": arm, "difference": float(i % 7 - 3)}
            for arm in ("recency · gated", "salience · ungated") for i in range(per_arm)]
    return pd.DataFrame(rows)


def _metrics(per_arm: int) -> pd.DataFrame:
    rows = [{"session_id": f"{arm}-{i}", "label": f"session {i}", "arm": arm, "prunes": i % 5}
            for arm in ("recency · gated", "salience · ungated") for i in range(per_arm)]
    return pd.DataFrame(rows)


def test_few_sessions_are_drawn_one_bar_and_one_point_each() -> None:
    bars = charts.paired_bars(_diff(12), "prunes", "salience · gated")
    assert [t.type for t in bars.data] == ["bar", "bar"] and len(bars.data[0].y) == 12
    box = charts.arm_distribution(_metrics(12), "prunes")
    assert {t.boxpoints for t in box.data} == {"all"} and len(box.data[0].hovertext) == 12


def test_thousands_of_sessions_are_drawn_as_a_histogram_and_outliers() -> None:
    many = charts.POINTS_MAX + 1
    hist = charts.paired_bars(_diff(many), "prunes", "salience · gated")
    assert [t.type for t in hist.data] == ["histogram", "histogram"]
    assert sorted(hist.data[0].x) == sorted(_diff(many).query("arm == 'recency · gated'")["difference"])
    assert hist.layout.yaxis.title.text == "sessions"
    box = charts.arm_distribution(_metrics(many), "prunes")
    assert {t.boxpoints for t in box.data} == {"outliers"} and len(box.data[0].y) == many
