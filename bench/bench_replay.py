"""Replay throughput: events per second, gated and ungated, traced and untraced, and the speed-up
of replaying across two worker processes — all measured side by side in one run.

    .venv/bin/python bench/bench_replay.py                       # τ-bench (../shared/traffic) or data/sessions
    .venv/bin/python bench/bench_replay.py --policy salience --sessions 100 --stream-results 3

An *event* is one entry of a session's event stream (append, open, delta, close, tool execution,
model call; see docs/replay.md). Traced runs record every replay into a fresh temporary store
(Parquet segments through the OpenTelemetry pipeline), so they include the cost of tracing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sources import tau_or_sessions  # noqa: E402
from tracer.lab.compare import run_replays  # noqa: E402
from tracer.lab.replay import ReplaySpec  # noqa: E402
from tracer.traffic.importers import Conversation, read_paths  # noqa: E402


def load(limit: int) -> tuple[str, list[Conversation]]:
    source = tau_or_sessions()
    convs = [c for c in read_paths([source]) if isinstance(c, Conversation)]
    return str(source), convs[:limit]


def measure(convs: list[Conversation], spec: ReplaySpec, *, traced: bool, workers: int) -> tuple[int, float]:
    """(events replayed, seconds) for one run, a fresh store when traced."""
    with tempfile.TemporaryDirectory(prefix="pg-bench-") as tmp:
        start = time.perf_counter()
        results = run_replays(convs, [spec], workers=workers, store_path=Path(tmp) / "store" if traced else None)
        seconds = time.perf_counter() - start
    return sum(r.events for r in results[0]), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="recency")
    parser.add_argument("--budget", type=int, default=3000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--stream-results", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell; the best is reported")
    parser.add_argument("--untraced-copies", type=int, default=8,
                        help="untraced cells replay the sessions this many times (they are fast; a longer run "
                             "amortizes starting the worker processes)")
    args = parser.parse_args(argv)
    source, convs = load(args.sessions)
    print(f"{len(convs)} sessions from {source} (x{args.untraced_copies} untraced); policy {args.policy}, "
          f"budget {args.budget}, stream results {args.stream_results}, best of {args.repeat}")

    def best(spec: ReplaySpec, traced: bool, workers: int) -> tuple[int, float]:
        work = convs if traced else convs * args.untraced_copies
        runs = [measure(work, spec, traced=traced, workers=workers) for _ in range(args.repeat)]
        return min(runs, key=lambda r: r[1])

    cells: dict[tuple[bool, bool, int], tuple[int, float]] = {}
    for gated in (True, False):
        spec = ReplaySpec(args.policy, gated=gated, budget=args.budget, stream_results=args.stream_results)
        for traced in (False, True):
            for workers in (1, 2):
                cells[(gated, traced, workers)] = best(spec, traced, workers)

    print()
    print(f"{'':26}{'1 worker':>16}{'2 workers':>16}{'speed-up':>10}")
    for gated in (True, False):
        for traced in (False, True):
            (n1, t1), (n2, t2) = cells[(gated, traced, 1)], cells[(gated, traced, 2)]
            label = f"{'gated' if gated else 'ungated'}, {'traced' if traced else 'untraced'}"
            print(f"{label:26}{n1 / t1:>12,.0f} ev/s{n2 / t2:>12,.0f} ev/s{t1 / t2:>9.2f}x")
    print()
    for gated in (True, False):
        (n_u, t_u), (n_t, t_t) = cells[(gated, False, 1)], cells[(gated, True, 1)]
        print(f"tracing cost ({'gated' if gated else 'ungated'}, 1 worker): traced runs at "
              f"{(n_t / t_t) / (n_u / t_u):.2f}x the untraced rate")
    (n_g, t_g), (n_n, t_n) = cells[(True, False, 1)], cells[(False, False, 1)]
    print(f"gate cost (untraced, 1 worker): gated runs at {(n_g / t_g) / (n_n / t_n):.2f}x the ungated rate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
