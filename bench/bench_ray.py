"""Replay rate on Ray vs the local engine, in one run, on the same sessions and arms, traced.

    .venv/bin/python bench/bench_ray.py                  # 60 sessions x 4 arms, 2 local workers vs Ray of 2 CPUs
    .venv/bin/python bench/bench_ray.py --sessions 240 --cpus 2 --address auto   # an existing cluster

Each engine replays every session under every arm (recency and salience, gated and ungated) into a
fresh temporary store. Ray's start (``ray.init``) is timed apart: on a long-lived cluster it is paid
once. The results of both engines are compared field by field (replay ids and timings aside).
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
from tracer.lab.compare import arms, parse_policies, run_replays  # noqa: E402
from tracer.traffic.importers import Conversation, read_paths  # noqa: E402


def stable(results):
    """Per session, what the two engines must agree on (tracer.lab.replay.SessionResult.comparable_dict)."""
    return [[r.comparable_dict() for r in rs] for rs in results]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=60)
    ap.add_argument("--cpus", type=int, default=2, help="local workers, and CPUs of the local Ray")
    ap.add_argument("--address", help="an existing Ray cluster instead of a local one")
    ap.add_argument("--chunk", type=int, default=4)
    args = ap.parse_args()
    import ray

    source = tau_or_sessions()
    convs = [c for c in read_paths([source]) if isinstance(c, Conversation)][: args.sessions]
    specs = arms(parse_policies("recency,salience"), "both")
    n = len(convs) * len(specs)
    print(f"{len(convs)} sessions x {len(specs)} arms = {n} replays from {source}, traced")
    with tempfile.TemporaryDirectory(prefix="pg-bench-ray-") as tmp:
        t = time.perf_counter()
        local = run_replays(convs, specs, workers=args.cpus, store_path=Path(tmp) / "local", chunk=args.chunk)
        local_s = time.perf_counter() - t
        t = time.perf_counter()
        if args.address:
            ray.init(address=args.address, log_to_driver=False)
        else:
            ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        start_s = time.perf_counter() - t
        t = time.perf_counter()
        on_ray = run_replays(convs, specs, store_path=Path(tmp) / "ray", engine="ray", chunk=args.chunk)
        ray_s = time.perf_counter() - t
        ray.shutdown()
    print(f"  local engine, {args.cpus} processes   {local_s:7.2f} s  {n / local_s:7.1f} replays/s")
    print(f"  Ray ({'cluster' if args.address else f'local, {args.cpus} CPUs'})        {ray_s:7.2f} s  "
          f"{n / ray_s:7.1f} replays/s  (+ {start_s:.1f} s ray.init)")
    print(f"  Ray / local rate = {local_s / ray_s:.2f} (with ray.init: {local_s / (ray_s + start_s):.2f}); "
          f"results identical: {stable(on_ray) == stable(local)}")
    return 0 if stable(on_ray) == stable(local) else 1


if __name__ == "__main__":
    sys.exit(main())
