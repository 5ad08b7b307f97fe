"""The A/B comparison's metrics and its one confidence-interval method.

Why one module: ``prunegate compare`` (and ``--json``), both Compare views of the dashboard and the
benchmarks must show the same number for the same replays. Each metric is defined once, by the
replay that counts it (:class:`~tracer.lab.replay.SessionResult`; docs/replay.md has the
definitions), and recorded on the replay's root span under :func:`attribute` so that a reader of
the store gets the value the replay counted, not a re-derivation. Pairing (arm − baseline, per
recorded session) and the interval are computed here and nowhere else.

The interval is Student's t at 95% over the per-session values (paired: over the per-session
differences). Chosen over the percentile bootstrap the comparison used before because, resampling
real τ-bench differences (docs/replay.md, "Confidence intervals"; bench/bench_intervals.py), it
covers the true mean much more often at the small samples a dashboard run uses (5-12 sessions)
and as often from about 100, and it is deterministic without a seed: the same values give the
same interval in any order, on any machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracer.contract import names as sn

LEVEL = 0.95
DIGITS = 4  # every reported mean and bound is rounded to this many decimals, everywhere


@dataclass(frozen=True)
class Metric:
    """One per-session measure of a replay: its name (a :class:`SessionResult` field) and what it counts."""

    name: str
    doc: str


# The metrics a comparison pairs per session against a baseline, in report order.
COMPARED: tuple[Metric, ...] = (
    Metric("invalid_requests", "model calls whose rendered request fails the provider's validation"),
    Metric("orphan_results", "distinct tool-result ids whose call is not in the request"),
    Metric("dangling_calls", "distinct call ids whose result is not in the request"),
    Metric("duplicated_side_effects", "side-effecting calls re-issued by naive retries"),
    Metric("tokens_sent", "tokens in the context at each model call, summed"),
    Metric("peak_tokens", "the largest context seen, before or after any budget check"),
    Metric("prunes", "budget checks that pruned"),
    Metric("deferrals", "budget checks that deferred (including those that then spilled)"),
    Metric("spills", "units spilled to the spill store"),
    Metric("failures", "1 when the session ended in failure (hard ceiling, error), else 0"),
    Metric("retention", "share of references still available at the model call that used them; none without references"),
)
NAMES: tuple[str, ...] = tuple(m.name for m in COMPARED)
# Metrics an ungated arm cannot have: without the gate the runtime prunes whatever the policy picks
# and never waits for a commit boundary, so its "deferrals" is not applicable (None, shown "—"), not 0.
GATED_ONLY: tuple[str, ...] = ("deferrals",)
# A decision counts as a deferral when it deferred, or when its reason starts with one of these
# (defined in the contract: the store's session catalog counts deferrals the same way).
DEFERRAL_REASONS: tuple[str, ...] = sn.DEFERRAL_REASONS
# Counted by the replay and recorded with the metrics, not compared (context for the compared ones).
RECORDED_EXTRA: tuple[str, ...] = ("model_calls", "reinjects", "references", "retained", "lost_stream_heads")


def attribute(name: str) -> str:
    """The root-span attribute that holds a replay's value of metric ``name``."""
    return sn.REPLAY_METRIC_PREFIX + name


def applies(name: str, gated: bool | None) -> bool:
    """Whether metric ``name`` means anything for an arm gated or not (None: a recorded session)."""
    return not (gated is False and name in GATED_ONLY)


def value(result: Any, name: str) -> float | None:
    """A replay's value of metric ``name`` (None: undefined for this session, e.g. retention
    without references, or deferrals of an ungated replay)."""
    if not applies(name, getattr(result, "gated", None)):
        return None
    v = getattr(result, name)
    return None if v is None else float(v)


def root_attributes(result: Any) -> dict[str, Any]:
    """What a replay records on its root span when it ends: every compared and extra count."""
    out: dict[str, Any] = {attribute(n): getattr(result, n) for n in RECORDED_EXTRA}
    out.update({attribute(n): getattr(result, n) for n in NAMES})
    return out


def arm_label(policy: str, gated: bool | None) -> str:
    """The name of an arm: ``"salience · gated"``; a recorded session's is ``"(recorded)"``."""
    if gated is None:
        return policy
    return f"{policy} · {'gated' if gated else 'ungated'}"


# ------------------------------------------------------------------------------- the interval
_T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
}  # fmt: skip
_Z = 1.959963984540054


def t95(df: int) -> float:
    """Two-sided 95% Student t quantile: the table up to 30 degrees of freedom, beyond it the
    Cornish-Fisher expansion around the normal quantile (within 1e-4 of the exact value)."""
    if df < 1:
        raise ValueError("a t interval needs at least 2 values")
    if df in _T95:
        return _T95[df]
    z = _Z
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


@dataclass(frozen=True)
class Interval:
    """A mean and its 95% confidence interval over ``n`` values (bounds None for fewer than 2)."""

    n: int
    mean: float | None
    low: float | None
    high: float | None
    sd: float | None = None


def interval(values: Iterable[float | None]) -> Interval:
    """Mean and Student-t 95% interval of the values that are not None. Exact sums
    (:func:`math.fsum`), so the result does not depend on the order of the values."""
    xs = [float(v) for v in values if v is not None and not _nan(v)]
    n = len(xs)
    if n == 0:
        return Interval(0, None, None, None)
    mean = math.fsum(xs) / n
    if n == 1:
        return Interval(1, mean, None, None)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return Interval(n, mean, mean - half, mean + half, sd)


def _nan(v: float) -> bool:
    return isinstance(v, float) and v != v


def rounded(x: float | None) -> float | None:
    """How every mean and bound is reported (``DIGITS`` decimals; None stays None)."""
    return None if x is None or _nan(x) else round(x, DIGITS)


# ------------------------------------------------------------------------------- pairing
@dataclass(frozen=True)
class Pair:
    """One recorded session replayed under the baseline arm and another arm."""

    source_id: str
    arm: str
    baseline: float
    value: float

    @property
    def difference(self) -> float:
        return self.value - self.baseline


def pairs(rows: Iterable[Mapping[str, Any]], metric: str, baseline: str) -> list[Pair]:
    """Per recorded session (``source_id``) and arm other than ``baseline``: the arm's value of
    ``metric`` and the baseline's, for sessions both ran and where both are defined. Rows are
    ``{"source_id", "arm", metric: value}``; several rows of one session and arm are averaged.
    Sorted by arm, then session."""
    sums: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        v = row.get(metric)
        if v is None or _nan(v):
            continue
        sums.setdefault((str(row["source_id"]), str(row["arm"])), []).append(float(v))
    means = {k: math.fsum(vs) / len(vs) for k, vs in sums.items()}
    out = [Pair(src, arm, means[(src, baseline)], v) for (src, arm), v in means.items()
           if arm != baseline and (src, baseline) in means]
    return sorted(out, key=lambda p: (p.arm, p.source_id))


def difference_summary(rows: Iterable[Mapping[str, Any]], metric: str, baseline: str) -> list[dict[str, Any]]:
    """Per arm other than ``baseline``: the mean per-session difference (arm − baseline) of
    ``metric`` with its 95% interval, as ``{"arm", "baseline", "metric", "n", "mean_diff",
    "ci_low", "ci_high", "level"}`` (rounded to :data:`DIGITS`)."""
    by_arm: dict[str, list[float]] = {}
    for p in pairs(rows, metric, baseline):
        by_arm.setdefault(p.arm, []).append(p.difference)
    out = []
    for arm in sorted(by_arm):
        iv = interval(by_arm[arm])
        out.append({"arm": arm, "baseline": baseline, "metric": metric, "n": iv.n, "mean_diff": rounded(iv.mean),
                    "ci_low": rounded(iv.low), "ci_high": rounded(iv.high), "level": LEVEL})
    return out


def result_rows(specs: Sequence[Any], results: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Replay results as the rows :func:`pairs` takes: one per session and arm (``arm`` is
    :func:`arm_label` of the spec's name and gating), with every compared metric."""
    rows = []
    for spec, rs in zip(specs, results, strict=True):
        arm = arm_label(spec.name, spec.gated)
        for i, r in enumerate(rs):
            row: dict[str, Any] = {"source_id": r.source_id if r.source_id is not None else f"#{i}", "arm": arm}
            row.update({n: value(r, n) for n in NAMES})
            rows.append(row)
    return rows


__all__ = [
    "COMPARED", "DEFERRAL_REASONS", "DIGITS", "GATED_ONLY", "LEVEL", "NAMES", "RECORDED_EXTRA", "Interval", "Metric", "Pair", "applies", "arm_label",
    "attribute", "difference_summary", "interval", "pairs", "result_rows", "root_attributes", "rounded",
    "t95", "value",
]
