"""``prunegate import``: recorded traffic into the trace store, one session per conversation.

Exit status: 0 everything imported, 1 some input was refused (the rest is imported) or, with
``--otlp-endpoint``, some spans could not be sent; 2 the store cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys

from tracer.cli.export import add_otlp_options, send_after
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
    parser.add_argument("--store", help="store directory (default: $PRUNEGATE_STORE, else ./prunegate-store)")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detected per file)")
    parser.add_argument("--no-content", dest="content", action="store_false",
                        help="record structure only, not message content (content is recorded by default: "
                             "import is for files you own, and replay needs it to reproduce token counts exactly)")
    parser.add_argument("--json", action="store_true",
                        help='print {"sessions", "messages", "tool_calls", "refused", "renamed_ids", ...} as JSON')
    add_otlp_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.traffic.recorded import import_paths, store_path_arg

    store = store_path_arg(args.store)
    try:
        report = import_paths(args.paths, store, fmt=args.format, capture_content=args.content)
    except OSError as exc:
        print(f"prunegate import: cannot write the store at {store.path}: {exc}", file=sys.stderr)
        return 2
    sent_status, sent = send_after(args, store, report.session_ids, "import")
    if args.json:
        out = report.to_dict()
        if sent is not None:
            out["otlp"] = sent.to_dict()
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for r in report.refused:
            print(f"prunegate import: refused {r}", file=sys.stderr)
        print(f"imported {report.sessions} sessions ({report.messages} messages, {report.tool_calls} tool calls) "
              f"into {store.path}")
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
    return 1 if report.refused or sent_status else 0
