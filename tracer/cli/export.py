"""``prunegate export``: a store, or chosen sessions, to any OpenTelemetry backend over OTLP/HTTP.

Also the ``--otlp-endpoint`` options of ``import``, ``replay`` and ``compare``, which send the
sessions a command recorded once they are in the store (:func:`send_after`).

Exit status: 0 every span sent, 1 some spans failed, 2 bad arguments or an unreadable store.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any


def add_otlp_options(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--otlp-endpoint``, ``--project``, ``--json-encoding``, ``--otlp-header``."""
    parser.add_argument("--otlp-endpoint", required=required, metavar="URL",
                        help="OTLP/HTTP endpoint (base URL such as http://127.0.0.1:6006, or its /v1/traces URL)"
                        + ("" if required else "; the sessions this command records are sent there once stored"))
    parser.add_argument("--project", metavar="NAME",
                        help="project name for the backend (resource attribute openinference.project.name)")
    parser.add_argument("--json-encoding", action="store_true", help="send OTLP JSON instead of protobuf")
    parser.add_argument("--otlp-header", action="append", default=[], metavar="K=V",
                        help="HTTP header for the endpoint (repeatable), e.g. authorization=Bearer ...")


def register(sub: argparse._SubParsersAction) -> None:
    from tracer.cli import add_command, options

    parser = add_command(
        sub, "export",
        description="Send stored spans to an OpenTelemetry backend over OTLP/HTTP, protobuf unless --json-encoding. "
        "Spans carry what LLM-trace backends read: openinference.span.kind (CHAIN for sessions and decisions, LLM "
        "for model calls, TOOL for tool calls), session.id, the session's first input and last output, and the "
        "span that caused each violation. Prints spans sent and failed; exits 1 when any failed.",
    )
    options.add_store(parser)
    parser.add_argument("--session", nargs="+", action="extend", metavar="ID",
                        help="send only these sessions (id or name); default: every span in the store")
    add_otlp_options(parser, required=True)
    options.add_json(parser, "print the result as JSON")
    parser.set_defaults(func=run)


def headers_of(pairs: Iterable[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--otlp-header expects K=V, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _send(args: argparse.Namespace, store: Any, session_ids: list[str] | None) -> Any:
    from tracer.wire.export import export_store

    return export_store(store, args.otlp_endpoint, session_ids, json_encoding=args.json_encoding,
                        project=args.project, headers=headers_of(args.otlp_header))


def run(args: argparse.Namespace) -> int:
    from tracer.cli import options, status
    from tracer.errors import CommandError

    store = options.existing_store(args)
    try:
        result = _send(args, store, args.session)
    except KeyError as exc:
        raise CommandError(f"no session {exc.args[0]} in {store.path}") from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.summary())
    return status.FOUND_PROBLEMS if result.failed else status.SUCCESS


def send_after(args: argparse.Namespace, store: Any, session_ids: list[str], command: str) -> tuple[int, Any]:
    """After ``command`` recorded ``session_ids``: send them when ``--otlp-endpoint`` was given.

    Returns (exit status contribution: 0 or 1, the result or None); the caller prints the result's
    counters beside its own (or puts them in its JSON as ``"otlp"``).
    """
    from tracer.cli import status

    if not getattr(args, "otlp_endpoint", None):
        return status.SUCCESS, None
    if not session_ids:
        result = None
        print(f"prunegate {command}: nothing recorded, nothing sent to {args.otlp_endpoint}", file=sys.stderr)
        return status.SUCCESS, result
    try:
        result = _send(args, store, session_ids)
    except (KeyError, ValueError) as exc:
        print(f"prunegate {command}: cannot send to {args.otlp_endpoint}: {exc}", file=sys.stderr)
        return status.FOUND_PROBLEMS, None
    return (status.FOUND_PROBLEMS if result.failed else status.SUCCESS), result
