"""``prunegate export``: a store, or chosen sessions, to any OpenTelemetry backend over OTLP/HTTP.

The ``--otlp-endpoint`` options of ``import``, ``replay`` and ``compare``, which send the sessions a
command recorded once they are in the store, are :func:`tracer.cli.outcome.send_after`.

Exit status: 0 every span sent, 1 some spans failed, 2 bad arguments or an unreadable store.
"""

from __future__ import annotations

import argparse
import json

from tracer.cli import add_command, options, status
from tracer.errors import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "export",
        description="Send stored spans to an OpenTelemetry backend over OTLP/HTTP, protobuf unless --json-encoding. "
        "Spans carry what LLM-trace backends read: openinference.span.kind (CHAIN for sessions and decisions, LLM "
        "for model calls, TOOL for tool calls), session.id, the session's first input and last output, and the "
        "span that caused each violation. Prints spans sent and failed; exits 1 when any failed.",
    )
    options.add_store(parser)
    options.add_sessions(parser, "send only these sessions (id or name); default: every span in the store")
    options.add_otlp_options(parser, required=True)
    options.add_json(parser, "print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.cli.outcome import send

    store = options.existing_store(args)
    try:
        result = send(args, store, args.session)
    except KeyError as exc:
        raise CommandError(f"no session {exc.args[0]} in {store.path}") from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.summary())
    return status.FOUND_PROBLEMS if result.failed else status.SUCCESS
