"""The ``prunegate`` console script: one subcommand per module in :mod:`tracer.cli`."""

from __future__ import annotations

import argparse
import importlib
import sys

from tracer.cli.checks import OneLineParser, check_args, fail_usage

# Each module in tracer/commands exposes ``register(subparsers)``; it adds its parser and sets
# ``func`` (args -> exit code) as the parser default. Listed here so `--help` shows them all.
COMMANDS = (
    "validate",
    "import_cmd",
    "sessions",
    "replay",
    "compare",
    "recommend",
    "compact",
    "serve",
    "recover",
    "dashboard",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="prunegate",
        description="Safe, observable context pruning for LLM agents.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"tracer.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tracer.cli.{name}":
                continue  # command not shipped in this build
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    problem = check_args(args)  # before any work, for every subcommand
    if problem:
        fail_usage(f"prunegate {args.command}", problem)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
