"""The ``prunegate`` console script: a table of commands, one module each, imported only when run.

``COMMANDS`` maps each command to its module and a one-line summary (pip's ``commands/__init__.py``
pattern), so ``prunegate --help`` imports no command module. A command module exposes
``register(subparsers)``, which adds its parser (its ``help`` is the summary here) and sets
``func`` (args -> exit status, :mod:`tracer.cli.status`) as the parser default. Every command is
written the same way: its parser from :func:`add_command`, its shared options and argument types
from :mod:`tracer.cli.options`, a named status returned, and a failure raised (a
:class:`~tracer.errors.CommandError` or any other :class:`~policies.errors.PrunegateError`), never
printed-and-returned; no command module imports another (``tests/tracer/cli/test_help.py``).

:func:`main` runs the command and hands whatever expected failure it raises (and the problems
:func:`~tracer.cli.checks.check_args` finds before any work) to :func:`tracer.cli.status.failed`:
one line on stderr and the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from policies.errors import PrunegateError
from tracer.cli import status
from tracer.cli.checks import OneLineParser, check_args
from tracer.contract.settings import ENVIRONMENT

__all__ = ["COMMANDS", "CommandInfo", "build_parser", "main"]


class CommandInfo(NamedTuple):
    module: str
    summary: str


COMMANDS: dict[str, CommandInfo] = {
    "validate": CommandInfo("tracer.cli.validate", "check recorded request bodies against a provider's tool-call rules"),
    "import": CommandInfo(
        "tracer.cli.import_cmd",
        "import recorded traffic (Anthropic/OpenAI bodies, OTLP JSON and Collector files, τ-bench, VCR cassettes) "
        "into the store"),
    "sessions": CommandInfo("tracer.cli.sessions", "list the sessions in the trace store"),
    "replay": CommandInfo("tracer.cli.replay",
                          "replay recorded sessions through a policy, gated or not; recorded as new traces"),
    "compare": CommandInfo("tracer.cli.compare",
                           "compare policies on recorded sessions (A/B metrics with paired 95% confidence intervals; sweeps)"),
    "annotate": CommandInfo("tracer.cli.annotate",
                            "label a session, a decision or a violation with a note; list the annotations"),
    "export": CommandInfo(
        "tracer.cli.export",
        "send the store (or chosen sessions) to an OTLP/HTTP endpoint (Phoenix, Langfuse, a collector)"),
    "recommend": CommandInfo("tracer.cli.recommend",
                             "name the cheapest arm of the last sweep that keeps retention above a minimum"),
    "compact": CommandInfo("tracer.cli.compact", "move recorded segments into the store's main database"),
    "serve": CommandInfo("tracer.cli.serve",
                         "receive OTLP/HTTP spans (/v1/traces, protobuf or JSON) from any SDK or Collector into the store"),
    "recover": CommandInfo("tracer.cli.recover",
                           "move spooled spans (written aside when the store refused them) into the store"),
    "dashboard": CommandInfo(
        "tracer.cli.dashboard",
        "serve the web dashboard (sessions, replay, violations, compare, live) over a trace store"),
    "demo": CommandInfo(
        "tracer.cli.demo",
        "build the demo store from data/ (import, replay policies gated and ungated) and serve the dashboard"),
}


def add_command(sub: argparse._SubParsersAction, name: str, *, description: str) -> argparse.ArgumentParser:
    """The parser of command ``name``, with its summary from :data:`COMMANDS` (for command modules)."""
    return sub.add_parser(name, help=_help(COMMANDS[name].summary), description=description)


def _help(text: str) -> str:
    """A summary as argparse help text (which %-formats it)."""
    return text.replace("%", "%%")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``prunegate`` parser; only ``command``'s module is imported (the others are listed by summary)."""
    epilog = "environment:\n" + "\n".join(f"  {name:<28}{doc}" for name, doc in ENVIRONMENT.items())
    parser = OneLineParser(
        prog="prunegate",
        description="Safe, observable context pruning for LLM agents.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name, info in COMMANDS.items():
        if name == command:
            importlib.import_module(info.module).register(sub)
        else:
            sub.add_parser(name, help=_help(info.summary))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status (argparse exits 2 itself on bad arguments)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = args_list[0] if args_list and args_list[0] in COMMANDS else None
    parser = build_parser(command)
    args = parser.parse_args(args_list)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return status.ERROR
    from tracer.errors import UsageError

    try:
        problem = check_args(args)  # before any work, for every command
        if problem:
            raise UsageError(problem)
        return int(func(args))
    except PrunegateError as exc:
        return status.failed(args.command, exc)
    except Exception as exc:
        damaged = _damaged_store(args, exc)  # a query that met a damaged spans.duckdb block
        if damaged is None:
            raise
        return status.failed(args.command, damaged)


def _damaged_store(args: argparse.Namespace, exc: Exception) -> PrunegateError | None:
    """The one-line error naming ``prunegate recover`` when ``exc`` says the store's database is damaged."""
    from tracer.store.compact import damaged, is_damage

    if not is_damage(exc):
        return None
    from tracer.cli.options import store_of

    return damaged(store_of(args).layout, exc)


if __name__ == "__main__":
    sys.exit(main())
