"""``prunegate demo``: the main job. Record the sample traffic into the embedded DuckDB store,
replay it through several policies gated and ungated, and serve the dashboard over it.

Each step calls what the ordinary command calls (``import``, ``compare``, ``compact``,
``dashboard``) with that command's defaults and prints what it prints, so the demo shows what a
user would get by typing them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tracer.cli import add_command, options, status
from tracer.cli.launch import DEFAULT_PORT
from tracer.errors import CommandError
from tracer.store import local_store

DEMO_POLICIES = "salience,recency,similarity,mask,tiered,langchain_trim"
DEMO_SEED = 7  # the arrival order of parallel tool results in the demo's replays (said when it runs)


def _shared_traffic() -> Path | None:
    """``../shared/traffic`` beside the repository, when this is a development checkout."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "traffic"
        if candidate.is_dir():
            return candidate
    return None


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "demo",
        description="Import the sessions shipped in data/ (and the real recorded traffic in ../shared/traffic "
        "when it is there) into the store, replay them through several policies gated and ungated, fold the "
        "writers' segments into the DuckDB file, and serve the dashboard. An existing demo store is reused "
        "unless --fresh.",
    )
    options.add_store(parser)
    parser.add_argument("--fresh", action="store_true", help="delete the store first and rebuild it")
    options.add_policies(parser, f"policies to replay (default {DEMO_POLICIES})", default=DEMO_POLICIES)
    parser.add_argument("--tau", type=options.nonnegative, default=20, metavar="N",
                        help="also import the first N τ-bench conversations from ../shared/traffic (default 20; 0: none)")
    options.add_workers(parser, default=2, help="replay processes (default 2)")
    parser.add_argument("--no-serve", dest="serve", action="store_false", help="build the store and stop")
    options.add_listen(parser, port_default=DEFAULT_PORT, what="the dashboard")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.cli.launch import serve_dashboard

    try:
        path = local_store(args.store)
    except ValueError as exc:
        raise CommandError(f"--store {exc}") from None
    if args.fresh and path.exists():
        shutil.rmtree(path)
    marker = path / ".demo-built"
    if not marker.exists():
        rc = _build(args, path)
        if rc != status.SUCCESS:
            return rc
        marker.write_text("ok\n")
    else:
        print(f"==> reusing the demo store at {path} (--fresh rebuilds it)", flush=True)
    if not args.serve:
        return status.SUCCESS
    print(f"==> serving the dashboard on http://{args.host}:{args.port}", flush=True)
    # The dashboard command's own defaults (compact first when many segments are pending).
    return serve_dashboard(str(path), args.host, args.port, compact=True)


def _build(args: argparse.Namespace, path: Path) -> int:
    """Import the sample traffic, replay it through the policies gated and ungated, compact."""
    from tracer.cli.outcome import check_recorded
    from tracer.cli.output import depends_on, describe, format_row, print_report
    from tracer.lab import sweep
    from tracer.lab.compare import compare, parse_policies, progress_bar
    from tracer.lab.cost import load_prices
    from tracer.store import Store
    from tracer.traffic.importers import shipped_sessions_dir
    from tracer.traffic.recorded import import_paths, load_conversations

    data = shipped_sessions_dir()
    if data is None:
        raise CommandError("the sample sessions in data/sessions are missing")
    try:
        policies = parse_policies(args.policies)
    except ValueError as exc:
        raise CommandError(f"--policies: {exc}") from exc
    sources = [str(data)]
    shared = _shared_traffic()
    if shared is not None and args.tau > 0:
        sources.append(str(_tau_subset(shared, path, args.tau)))
        sources.append(str(shared / "pydantic-ai-cassettes"))
    store = Store(path)
    print(f"==> importing {', '.join(sources)} into {path}", flush=True)
    try:
        report = import_paths(sources, store, capture_content=True)
    except OSError as exc:
        raise CommandError(f"cannot write the store at {path}: {exc}") from exc
    print_report(report, path)
    if not report.complete:
        return status.NOT_STORED
    print(f"==> replaying through {args.policies}, gated and ungated, with --seed {DEMO_SEED}: each parallel "
          f"batch's tool results arrive in an order shuffled with seed {DEMO_SEED}. `prunegate compare` "
          f"without --seed keeps the recorded order, so its figures differ; add --seed {DEMO_SEED} to get "
          "the demo's.", flush=True)
    convs = load_conversations(store)
    if not convs:
        raise CommandError(f"no sessions to replay in {path}")
    prices = load_prices(None)
    result = compare(convs, policies, gated="both", seed=DEMO_SEED, workers=args.workers, store_path=path,
                     capture_content=True, progress=progress_bar(), prices=prices)
    # Stored as a sweep, as `prunegate compare` stores every run: the dashboard's Frontier shows it.
    rec = sweep.record(result, options={"store": str(path.resolve()), "seed": DEMO_SEED, "traced": True},
                       sessions=convs, prices=prices.to_dict(), models=result.models, policies=args.policies,
                       budgets=[None], gated="both")
    print(f"sweep stored (the dashboard's Compare → Frontier): {sweep.save(path, rec)}", flush=True)
    replayed = [r.replay_id for rs in result.results for r in rs]
    said = argparse.Namespace(budget=None, hard_ceiling=None, seed=DEMO_SEED, stream_results=None)
    print(describe(depends_on(said, path, len(replayed))))
    for row in result.rows:
        print(format_row(row))
    rc = check_recorded("demo", store, replayed)
    if rc != status.SUCCESS:
        return rc
    compacted = store.compact(timeout=30.0)
    print(f"{path}: {compacted.segments_compacted} segments, {compacted.rows_inserted} spans moved into "
          "spans.duckdb", flush=True)
    if compacted.busy:
        print(f"prunegate demo: {path}: busy: {compacted.busy}; nothing lost, run again", file=sys.stderr)
        return status.BUSY
    return status.SUCCESS


def _tau_subset(shared: Path, store: Path, n: int) -> Path:
    """The first ``n`` τ-bench conversations as a file of their own (the full file has 200)."""
    import json

    source = shared / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    items = json.loads(source.read_text(encoding="utf-8"))[:n]
    store.mkdir(parents=True, exist_ok=True)
    target = store / "tau-bench-subset.json"
    target.write_text(json.dumps(items), encoding="utf-8")
    return target
