"""``prunegate import``: recorded traffic into the trace store, one session per conversation.

Exit status: 0 everything read is in the store (counts read back), 1 some input was refused (the
rest is imported) or, with ``--otlp-endpoint``, some spans could not be sent, 2 a usage error, 3 some
sessions did not reach the store (spooled: the line printed names the ``prunegate recover`` command;
lost; or held by another process that never finished).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tracer.cli import add_command, options, status
from tracer.traffic.importers import FORMATS

if TYPE_CHECKING:
    pass


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "import",
        description="Import recorded conversations into the trace store, one session per conversation: Anthropic "
        "Messages or OpenAI Chat Completions request bodies (one per JSON file or per JSONL line), OTLP JSON span "
        "files (also the OpenTelemetry Collector file exporter's framed, zstd or gzip output), τ-bench trajectory "
        "files and VCR cassettes (the last request of a cassette). Directories are searched for "
        ".json/.jsonl/.yaml/.yml/.gz/.zst files. Reused tool-call ids are renamed (id~2, ...) and reported; "
        "input that cannot be read is refused with its file, line and reason, and the rest is imported.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to import")
    options.add_store(parser)
    parser.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detected per file)")
    parser.add_argument("--no-content", dest="content", action="store_false",
                        help="record structure only, not message content (content is recorded by default: "
                             "import is for files you own, and replay needs it to reproduce token counts exactly)")
    parser.add_argument("--batch-spans", type=options.positive, default=2048, metavar="N",
                        help="sessions are written whole, several to a segment of about N spans (default 2048)")
    options.add_detail(parser, "full")
    options.add_json(parser, 'print {"sessions", "messages", "tool_calls", "refused", "renamed_ids", ...} as JSON')
    options.add_otlp_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.cli.outcome import send_after
    from tracer.cli.output import print_report
    from tracer.traffic.recorded import import_paths

    store = options.store_of(args)
    report = import_paths(args.paths, store, fmt=args.format, capture_content=args.content,
                          batch_spans=args.batch_spans, detail=args.detail)
    sent_status, sent = send_after(args, store, report.session_ids, "import")
    print_report(report, store.path, as_json=args.json, sent=sent)
    if not report.complete:
        return status.NOT_STORED
    return status.FOUND_PROBLEMS if report.refused or sent_status else status.SUCCESS


