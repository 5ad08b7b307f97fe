"""``prunegate import``: recorded traffic into the trace store, one session per conversation.

Exit status: 0 everything read is in the store (counts read back), 1 some input was refused (the
rest is imported) or, with ``--otlp-endpoint``, some spans could not be sent, 2 a usage error, 3 some
sessions did not reach the store (spooled: the line printed names the ``prunegate recover`` command;
lost; or held by another process that never finished).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer.cli import add_command, options, status
from tracer.cli.export import add_otlp_options, send_after
from tracer.traffic.importers import FORMATS

if TYPE_CHECKING:
    from tracer.traffic.recorded import ImportReport


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
    options.add_json(parser, 'print {"sessions", "messages", "tool_calls", "refused", "renamed_ids", ...} as JSON')
    add_otlp_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.traffic.recorded import import_paths

    store = options.store_of(args)
    report = import_paths(args.paths, store, fmt=args.format, capture_content=args.content,
                          batch_spans=args.batch_spans)
    sent_status, sent = send_after(args, store, report.session_ids, "import")
    print_report(report, store.path, as_json=args.json, sent=sent)
    if not report.complete:
        return status.NOT_STORED
    return status.FOUND_PROBLEMS if report.refused or sent_status else status.SUCCESS


def print_report(report: ImportReport, store_path: Path, *, as_json: bool = False, sent: Any = None) -> None:
    """What an import did (text or JSON on stdout) and, one line each on stderr, what it refused and
    whatever did not reach the store; ``sent``, what ``--otlp-endpoint`` received, beside them."""
    from tracer.store.spool import spooled_line

    for r in report.refused:  # on stderr with --json too: one line each, file:line and why
        print(f"prunegate import: refused {r}", file=sys.stderr)
    if as_json:
        out = report.to_dict()
        if sent is not None:
            out["otlp"] = sent.to_dict()
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(f"imported {report.sessions} sessions ({report.spans} spans, read back from the store; "
              f"{report.messages} messages, {report.tool_calls} tool calls) into {store_path}")
        if report.skipped:
            print(f"skipped {len(report.skipped)} sessions already in the store")
        if report.renamed:
            print(f"renamed {len(report.renamed)} reused tool-call ids:")
            for ren in report.renamed:
                print(f"  {ren['session']} {ren['message']}: {ren['old']} -> {ren['new']}")
        if report.otlp_files:
            print(f"imported {report.otlp_spans} spans from {report.otlp_files} OTLP JSON files")
        if report.refused:
            print(f"refused {len(report.refused)} inputs (see above)")
        if sent is not None:
            print(sent.summary())
    if report.spooled_spans:
        print(f"prunegate import: {report.spooled_sessions} sessions: "
              + spooled_line(report.spooled_spans, Path(report.spool_dir or ""), store_path, report.store_error),
              file=sys.stderr)
    if report.lost_spans:
        print(f"prunegate import: {report.lost_sessions} sessions ({report.lost_spans} spans) reached neither the "
              f"store {store_path} ({report.store_error}) nor the spool {report.spool_dir} ({report.spool_error}); "
              "free space or fix permissions and import again", file=sys.stderr)
    if report.store_error and not (report.spooled_spans or report.lost_spans):
        print(f"prunegate import: could not write the store {store_path}: {report.store_error}", file=sys.stderr)
    if report.busy:
        print(f"prunegate import: {len(report.busy)} sessions are still being imported by another process; "
              "not verified here: run the import again once it is done", file=sys.stderr)
    if report.unverified:
        print(f"prunegate import: {len(report.unverified)} sessions written but not found whole when read back "
              f"from {store_path}: {', '.join(report.unverified[:5])}", file=sys.stderr)
