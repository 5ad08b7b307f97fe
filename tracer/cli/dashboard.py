"""``prunegate dashboard``: serve the Streamlit dashboard over a trace store (the server process:
:mod:`tracer.cli.launch`, which ``prunegate demo`` starts the same way)."""

from __future__ import annotations

import argparse

from tracer.cli import add_command, options
from tracer.cli.launch import COMPACT_AT, DEFAULT_PORT


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "dashboard",
        description="Serve the Streamlit dashboard over a trace store. Binds 127.0.0.1 unless --host says "
        "otherwise. Stop it with Ctrl-C.",
    )
    options.add_store(parser)
    options.add_listen(parser, port_default=DEFAULT_PORT, what="the dashboard")
    parser.add_argument("--no-compact", dest="compact", action="store_false",
                        help=f"serve the store as it is; by default a local store with {COMPACT_AT} or more "
                             "segments is compacted first (what `prunegate compact` does), so the Sessions page "
                             "reads its catalog instead of every segment")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.cli.launch import serve_dashboard

    return serve_dashboard(args.store, args.host, args.port, compact=args.compact)
