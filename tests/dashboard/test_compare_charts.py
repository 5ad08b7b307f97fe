"""The Compare page's per-session charts at scale: a bar per session and every point of a box plot
up to POINTS_MAX sessions per arm; beyond it a histogram of the differences and a box with its
outliers, both computed on the server (thousands of bars cannot be read, and the browser took
hundreds of milliseconds to bin and box every session's value)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dashboard.components import charts


def _diff(per_arm: int) -> pd.DataFrame:
    rows = [{"source_id": f"s{i}", "label": f"session {i}", "arm": arm, "difference": float(i % 7 - 3)}
            for arm in ("recency · gated", "salience · ungated") for i in range(per_arm)]
    return pd.DataFrame(rows)


def _metrics(per_arm: int) -> pd.DataFrame:
    rows = [{"session_id": f"{arm}-{i}", "label": f"session {i}", "arm": arm,
             "prunes": i % 5 + (40 if i % 97 == 0 else 0)}
            for arm in ("recency · gated", "salience · ungated") for i in range(per_arm)]
    return pd.DataFrame(rows)


def test_few_sessions_are_drawn_one_bar_and_one_point_each() -> None:
    bars = charts.paired_bars(_diff(12), "prunes", "salience · gated")
    assert [t.type for t in bars.data] == ["bar", "bar"] and len(bars.data[0].y) == 12
    box = charts.arm_distribution(_metrics(12), "prunes")
    assert {t.boxpoints for t in box.data} == {"all"} and len(box.data[0].hovertext) == 12


def test_thousands_of_differences_are_a_histogram_binned_on_the_server() -> None:
    many = charts.POINTS_MAX + 1
    diff = _diff(many)
    hist = charts.paired_bars(diff, "prunes", "salience · gated")
    assert [t.type for t in hist.data] == ["bar", "bar"]
    assert hist.layout.yaxis.title.text == "sessions"
    mine = diff.query("arm == 'recency · gated'")["difference"]
    assert sum(hist.data[0].y) == many  # every session in one bin
    # whole-number differences: one bar per value, centred on it, with the count of sessions that had it
    assert dict(zip(hist.data[0].x, hist.data[0].y, strict=True)) == {
        float(v): int((mine == v).sum()) for v in range(-3, 4)}
    assert len(hist.data[0].x) < 50  # a few dozen numbers reach the browser, not one per session


def test_bins_are_shared_and_bounded() -> None:
    values = np.random.default_rng(1).normal(0, 100, 10_000)
    edges = charts.histogram_bins(values)
    assert len(edges) - 1 <= charts.BINS_MAX and edges[0] <= values.min() and edges[-1] >= values.max()
    assert list(charts.histogram_bins([2.0, 2.0])) == [1.5, 2.5]


def test_thousands_of_values_are_a_box_computed_on_the_server() -> None:
    many = charts.POINTS_MAX + 1
    frame = _metrics(many)
    box = charts.arm_distribution(frame, "prunes")
    boxes = [t for t in box.data if t.type == "box"]
    points = [t for t in box.data if t.type == "scatter"]
    assert len(boxes) == 2 and len(points) == 2
    values = frame.query("arm == 'recency · gated'")["prunes"].to_numpy(dtype=float)
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    assert (boxes[0].q1[0], boxes[0].median[0], boxes[0].q3[0]) == (q1, med, q3)
    reach = 1.5 * (q3 - q1)
    out = values[(values < q1 - reach) | (values > q3 + reach)]
    assert list(points[0].y) == sorted(set(out)) and len(out) > 0  # each outlying value once
    assert sum(int(t.split()[0].replace(",", "")) for t in points[0].hovertext) == len(out)
    assert boxes[0].upperfence[0] == values[values <= q3 + reach].max()


def test_the_differences_table_keeps_the_largest_in_their_order() -> None:
    from dashboard.components.widgets import largest

    frame = pd.DataFrame({"source_id": [f"s{i}" for i in range(8)],
                          "difference": [0.0, -9.0, 3.0, None, 5.0, -4.0, 1.0, 9.0]})
    assert list(largest(frame, "difference", 3)["source_id"]) == ["s1", "s4", "s7"]  # |-9|, 5, 9
    assert list(largest(frame, "difference", 7)["source_id"]) == ["s0", "s1", "s2", "s4", "s5", "s6", "s7"]
    assert largest(frame, "difference", 8) is frame
