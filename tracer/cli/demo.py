"""``prunegate demo``: the main job. Record the sample traffic into the embedded DuckDB store,
replay it through several policies gated and ungated, and serve the dashboard over it.

Each step is the ordinary command (``import``, ``compare``, ``compact``, ``dashboard``), run in
this process, so the demo shows exactly what a user would get by typing them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tracer.cli.checks import store_dir
from tracer.store import ENV_STORE, default_store_path

DEMO_POLICIES = "salience,recency,similarity,mask,tiered,langchain_trim"


def _shared_traffic() -> Path | None:
    """``../shared/traffic`` beside the repository, when this is a development checkout."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "traffic"
        if candidate.is_dir():
            return candidate
    return None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="build the demo store from data/ (import, replay policies gated and ungated) and serve the dashboard",
        description="Import the sessions shipped in data/ (and the real recorded traffic in ../shared/traffic "
        "when it is there) into the store, replay them through several policies gated and ungated, fold the "
        "writers' segments into the DuckDB file, and serve the dashboard. An existing demo store is reused "
        "unless --fresh.",
    )
    parser.add_argument("--store", type=store_dir, help=f"store directory (default: ${ENV_STORE}, else ./prunegate-store)")
    parser.add_argument("--fresh", action="store_true", help="delete the store first and rebuild it")
    parser.add_argument("--policies", default=DEMO_POLICIES, help=f"policies to replay (default {DEMO_POLICIES})")
    parser.add_argument("--tau", type=int, default=20, metavar="N",
                        help="also import the first N τ-bench conversations from ../shared/traffic (default 20; 0: none)")
    parser.add_argument("--workers", type=int, default=2, help="replay processes (default 2)")
    parser.add_argument("--no-serve", dest="serve", action="store_false", help="build the store and stop")
    parser.add_argument("--host", default="127.0.0.1", help="dashboard address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8501, help="dashboard port (default 8501)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.cli import main as cli
    from tracer.traffic.importers import shipped_sessions_dir

    store = Path(args.store) if args.store else default_store_path()
    if args.fresh and store.exists():
        shutil.rmtree(store)
    marker = store / ".demo-built"
    if not marker.exists():
        data = shipped_sessions_dir()
        if data is None:
            print("prunegate demo: the sample sessions in data/sessions are missing", file=sys.stderr)
            return 2
        sources = [str(data)]
        shared = _shared_traffic()
        tau_file = None
        if shared is not None and args.tau > 0:
            tau_file = _tau_subset(shared, store, args.tau)
            sources.append(str(tau_file))
            sources.append(str(shared / "pydantic-ai-cassettes"))
        print(f"==> importing {', '.join(sources)} into {store}", flush=True)
        rc = cli(["import", *sources, "--store", str(store)])
        if rc == 2:
            return rc
        print(f"==> replaying through {args.policies}, gated and ungated", flush=True)
        rc = cli(["compare", "--policies", args.policies, "--gated", "both", "--store", str(store),
                  "--workers", str(args.workers), "--capture-content", "--seed", "7"])
        if rc != 0:
            return rc
        rc = cli(["compact", "--store", str(store)])
        if rc != 0:
            return rc
        marker.write_text("ok\n")
    else:
        print(f"==> reusing the demo store at {store} (--fresh rebuilds it)", flush=True)
    if not args.serve:
        return 0
    print(f"==> serving the dashboard on http://{args.host}:{args.port}", flush=True)
    return cli(["dashboard", "--store", str(store), "--host", args.host, "--port", str(args.port)])


def _tau_subset(shared: Path, store: Path, n: int) -> Path:
    """The first ``n`` τ-bench conversations as a file of their own (the full file has 200)."""
    import json

    source = shared / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    items = json.loads(source.read_text(encoding="utf-8"))[:n]
    store.mkdir(parents=True, exist_ok=True)
    target = store / "tau-bench-subset.json"
    target.write_text(json.dumps(items), encoding="utf-8")
    return target
