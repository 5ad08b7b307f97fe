"""How often does the comparison's 95% interval contain the true mean difference, on real traffic?

The evidence behind the choice of interval in ``tracer/lab/metrics.py`` (docs/replay.md,
"Confidence intervals: why Student t"). The sessions are replayed (untraced) under two policies,
gated and ungated; their per-session differences (``tracer.lab.metrics.pairs``, as
``prunegate compare`` pairs them) are taken as the population. Samples of n sessions are drawn
with replacement, and for each the Student-t interval of ``tracer.lab.metrics.interval`` and a
percentile bootstrap (the method ``prunegate compare`` used before) are checked against the
population's mean. Prints the coverage of both, side by side, per metric and sample size.

    .venv/bin/python bench/bench_intervals.py                     # τ-bench (../shared/traffic) or data/sessions
    .venv/bin/python bench/bench_intervals.py --samples 500 --sizes 5,30
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sources import tau_or_sessions  # noqa: E402
from tracer.lab import metrics  # noqa: E402
from tracer.lab.compare import arms, parse_policies, run_replays  # noqa: E402
from tracer.traffic.importers import Conversation, read_paths  # noqa: E402


def bootstrap_covers(sample: np.ndarray, mu: float, rng: np.random.Generator, resamples: int) -> bool:
    """The percentile bootstrap interval of the sample's mean (the former method) contains ``mu``."""
    n = len(sample)
    means = np.sort(sample[rng.integers(0, n, size=(resamples, n))].mean(axis=1))
    lo, hi = means[int(0.025 * resamples)], means[min(resamples - 1, int(0.975 * resamples))]
    return bool(lo <= mu <= hi)


def t_covers(sample: np.ndarray, mu: float) -> bool:
    """:func:`tracer.lab.metrics.interval` of the sample contains ``mu``."""
    iv = metrics.interval(sample.tolist())
    return iv.low is not None and iv.high is not None and iv.low <= mu <= iv.high


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="recency,salience", help="baseline first (default recency,salience)")
    ap.add_argument("--budget", type=int, default=3000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--sizes", default="5,12,30,100", help="sample sizes (sessions per comparison)")
    ap.add_argument("--samples", type=int, default=2000, help="samples drawn per size")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per sample")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    source = tau_or_sessions()
    convs = [c for c in read_paths([source]) if isinstance(c, Conversation)][: args.sessions]
    policies = parse_policies(args.policies)
    specs = arms(policies, "both", budget=args.budget)
    t0 = time.perf_counter()
    results = run_replays(convs, specs)
    rows = metrics.result_rows(specs, results)
    print(f"{len(convs)} sessions from {source}, {len(specs)} arms replayed in {time.perf_counter() - t0:.1f} s; "
          f"{args.samples} samples per size, bootstrap {args.resamples} resamples\n")
    sizes = [int(x) for x in args.sizes.split(",")]
    rng = np.random.default_rng(args.seed)
    print(f"{'arm − baseline, metric':58} {'skew':>6} {'zeros':>6} " + " ".join(f"{'n=' + str(n):>13}" for n in sizes))
    t_ahead = cells = 0
    for gated in (True, False):
        baseline = metrics.arm_label(specs[0].name, gated)  # pairs key unrecorded sessions by position
        for metric in metrics.NAMES:
            by_arm: dict[str, list[float]] = {}
            for p in metrics.pairs(rows, metric, baseline):
                by_arm.setdefault(p.arm, []).append(p.difference)
            same_gating = {metrics.arm_label(s.name, s.gated) for s in specs if s.gated == gated}
            for arm, diffs in sorted(by_arm.items()):
                if arm not in same_gating:
                    continue
                d = np.array(diffs)
                if d.std() == 0:
                    continue
                mu = float(d.mean())
                skew = float(((d - mu) ** 3).mean() / d.std() ** 3)
                cols = []
                for n in sizes:
                    samples = d[rng.integers(0, len(d), size=(args.samples, n))]
                    t = np.mean([t_covers(s, mu) for s in samples])
                    b = np.mean([bootstrap_covers(s, mu, rng, args.resamples) for s in samples])
                    cols.append(f"{t:.3f} / {b:.3f}")
                    cells += 1
                    t_ahead += t >= b
                print(f"{arm + ' − ' + baseline + ', ' + metric:58} {skew:6.2f} {np.mean(d == 0):6.2f} "
                      + " ".join(f"{c:>13}" for c in cols), flush=True)
    print(f"\ncoverage of the 95% interval, Student t / percentile bootstrap; t at least as high in {t_ahead} "
          f"of {cells} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
