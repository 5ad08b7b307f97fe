"""``prunegate import``: recorded traffic into the trace store, one session per conversation.

Exit status: 0 everything read is in the store (counts read back), 1 some input was refused (the
rest is imported), 2 a usage error, 3 some sessions did not reach the store (spooled: the line
printed names the ``prunegate recover`` command; lost; or held by another process that never
finished).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tracer.cli.checks import positive_int, store_dir
from tracer.traffic.importers import FORMATS


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "import",
        help="import recorded traffic (Anthropic/OpenAI bodies, OTLP JSON, τ-bench, VCR cassettes) into the store",
        description="Import recorded conversations into the trace store, one session per conversation: Anthropic "
        "Messages or OpenAI Chat Completions request bodies (one per JSON file or per JSONL line), OTLP JSON span "
        "files, τ-bench trajectory files and VCR cassettes (the last request of a cassette). Directories are "
        "searched for .json/.jsonl/.yaml/.yml files. Reused tool-call ids are renamed (id~2, ...) and reported; "
        "input that cannot be read is refused with its file, line and reason, and the rest is imported.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to import")
    parser.add_argument("--store", type=store_dir, help="store directory (default: $PRUNEGATE_STORE, else ./prunegate-store)")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detected per file)")
    parser.add_argument("--no-content", dest="content", action="store_false",
                        help="record structure only, not message content (content is recorded by default: "
                             "import is for files you own, and replay needs it to reproduce token counts exactly)")
    parser.add_argument("--batch-spans", type=positive_int, default=2048, metavar="N",
                        help="sessions are written whole, several to a segment of about N spans (default 2048)")
    parser.add_argument("--json", action="store_true",
                        help='print {"sessions", "messages", "tool_calls", "refused", "renamed_ids", ...} as JSON')
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.store.spool import spooled_line
    from tracer.traffic.recorded import import_paths, store_path_arg

    store = store_path_arg(args.store)
    report = import_paths(args.paths, store, fmt=args.format, capture_content=args.content,
                          batch_spans=args.batch_spans)
    for r in report.refused:  # on stderr with --json too: one line each, file:line and why
        print(f"prunegate import: refused {r}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(f"imported {report.sessions} sessions ({report.spans} spans, read back from the store; "
              f"{report.messages} messages, {report.tool_calls} tool calls) into {store.path}")
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
    if report.spooled_spans:
        print(f"prunegate import: {report.spooled_sessions} sessions: "
              + spooled_line(report.spooled_spans, Path(report.spool_dir or ""), store.path, report.store_error),
              file=sys.stderr)
    if report.lost_spans:
        print(f"prunegate import: {report.lost_sessions} sessions ({report.lost_spans} spans) reached neither the "
              f"store {store.path} ({report.store_error}) nor the spool {report.spool_dir} ({report.spool_error}); "
              "free space or fix permissions and import again", file=sys.stderr)
    if report.store_error and not (report.spooled_spans or report.lost_spans):
        print(f"prunegate import: could not write the store {store.path}: {report.store_error}", file=sys.stderr)
    if report.busy:
        print(f"prunegate import: {len(report.busy)} sessions are still being imported by another process; "
              "not verified here: run the import again once it is done", file=sys.stderr)
    if report.unverified:
        print(f"prunegate import: {len(report.unverified)} sessions written but not found whole when read back "
              f"from {store.path}: {', '.join(report.unverified[:5])}", file=sys.stderr)
    if not report.complete:
        return 3
    return 1 if report.refused else 0
