"""``prunegate import``: recorded traffic into the trace store, one session per conversation.

Exit status: 0 everything imported, 1 some input was refused (the rest is imported), 2 the store
cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracer.cli import add_command, options, status
from tracer.errors import CommandError
from tracer.traffic.importers import FORMATS

if TYPE_CHECKING:
    from tracer.traffic.recorded import ImportReport


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "import",
        description="Import recorded conversations into the trace store, one session per conversation: Anthropic "
        "Messages or OpenAI Chat Completions request bodies (one per JSON file or per JSONL line), OTLP JSON span "
        "files, τ-bench trajectory files and VCR cassettes (the last request of a cassette). Directories are "
        "searched for .json/.jsonl/.yaml/.yml files. Reused tool-call ids are renamed (id~2, ...) and reported; "
        "input that cannot be read is refused with its file, line and reason, and the rest is imported.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories to import")
    options.add_store(parser)
    parser.add_argument("--format", choices=FORMATS, default="auto", help="input format (default: detected per file)")
    parser.add_argument("--no-content", dest="content", action="store_false",
                        help="record structure only, not message content (content is recorded by default: "
                             "import is for files you own, and replay needs it to reproduce token counts exactly)")
    options.add_json(parser, 'print {"sessions", "messages", "tool_calls", "refused", "renamed_ids", ...} as JSON')
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.traffic.recorded import import_paths

    store = options.store_of(args)
    try:
        report = import_paths(args.paths, store, fmt=args.format, capture_content=args.content)
    except OSError as exc:
        raise CommandError(f"cannot write the store at {store.path}: {exc}") from exc
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_report(report, store.path)
    return status.FOUND_PROBLEMS if report.refused else status.SUCCESS


def print_report(report: ImportReport, store_path: Path) -> None:
    """What an import did, as text (refusals on stderr)."""
    for r in report.refused:
        print(f"prunegate import: refused {r}", file=sys.stderr)
    print(f"imported {report.sessions} sessions ({report.messages} messages, {report.tool_calls} tool calls) "
          f"into {store_path}")
    if report.skipped:
        print(f"skipped {len(report.skipped)} sessions already in the store")
    if report.renamed:
        print(f"renamed {len(report.renamed)} reused tool-call ids:")
        for rn in report.renamed:
            print(f"  {rn['session']} {rn['message']}: {rn['old']} -> {rn['new']}")
    if report.otlp_files:
        print(f"imported {report.otlp_spans} spans from {report.otlp_files} OTLP JSON files")
    if report.refused:
        print(f"refused {len(report.refused)} inputs (see above)")
