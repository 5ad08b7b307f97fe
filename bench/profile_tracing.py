"""cProfile of the two traced hot paths, top functions by own time (docs/performance.md).

    .venv/bin/python bench/profile_tracing.py check     # bench_tracer_overhead's traced-store variant
    .venv/bin/python bench/profile_tracing.py replay    # a traced one-worker replay (bench_replay's cell)
    .venv/bin/python bench/profile_tracing.py check --root /tmp/old-checkout   # another checkout's code

``check`` also prints the agent thread's CPU time per append+check, untraced and traced (thread
CPU time is less disturbed by other processes than wall time). The profile covers the whole
drive loop, so the message copies the benchmark makes outside its timed region show up too.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

TRAFFIC = Path(__file__).resolve().parents[2] / "shared" / "traffic"


def profile_check(n: int, top: int) -> None:
    import bench_tracer_overhead as b

    convs = b.conversations(n)
    root = Path(tempfile.mkdtemp(prefix="pg-prof-"))
    for label, make in (("untraced", b.variant_untraced), ("traced", b.variant_store(root, capture=False))):
        obs, finish = make()
        for c in convs[:3]:
            b.drive(c, obs)
        t0, checks = time.thread_time(), 0
        for c in convs:
            checks += b.drive(c, obs)[2]
        print(f"{label}: agent thread CPU {(time.thread_time() - t0) / checks * 1e6:.1f} µs per append+check")
        finish()
    obs, finish = b.variant_store(root, capture=False)()
    prof = cProfile.Profile()
    prof.enable()
    for c in convs:
        b.drive(c, obs)
    prof.disable()
    finish()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def profile_replay(n: int, top: int) -> None:
    from tracer.lab.compare import run_replays
    from tracer.lab.replay import ReplaySpec
    from tracer.traffic.importers import Conversation, read_paths

    convs = [c for c in read_paths([TRAFFIC / "tau-bench-gpt4o-airline"]) if isinstance(c, Conversation)][:n]
    spec = ReplaySpec("recency", gated=True, budget=3000)
    with tempfile.TemporaryDirectory(prefix="pg-prof-") as tmp:
        run_replays(convs[:5], [spec], store_path=Path(tmp) / "warm")
        prof = cProfile.Profile()
        prof.enable()
        run_replays(convs, [spec], store_path=Path(tmp) / "s")
        prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("check", "replay"))
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="checkout whose code runs")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--top", type=int, default=16)
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    sys.path.insert(0, str(Path(args.root) / "bench"))
    if args.what == "check":
        profile_check(args.sessions or 40, args.top)
    else:
        profile_replay(args.sessions or 60, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
