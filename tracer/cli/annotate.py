"""``prunegate annotate``: put a label and a note on a session, a decision or a violation; list them.

The annotation is a ``prunegate.annotation`` span written through the store like any other
(:mod:`tracer.queries.writes`): it shows on the dashboard's Replay, Sessions and Annotations
pages and goes out with ``prunegate export``. Exit status 0 stored (or listed), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tracer.cli import add_command, options, status
from tracer.errors import CommandError

if TYPE_CHECKING:
    from tracer.store import Store


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "annotate",
        description="Label a session, or one of its decisions or violations (--span SPAN_ID), with a short "
        "label and an optional note: `prunegate annotate SESSION --label bug --note 'evicted the answer'`. "
        "--list prints the annotations (of --session, with --label).",
    )
    options.add_store(parser)
    parser.add_argument("session", nargs="?", help="the session (id or name) to annotate")
    parser.add_argument("--span", metavar="SPAN_ID", help="annotate this decision or violation span of the session")
    parser.add_argument("--label", action="append", default=[], metavar="LABEL",
                        help="the label (with --list: only annotations with this label; repeatable)")
    parser.add_argument("--note", default="", help="a note (free text, shown as text)")
    parser.add_argument("--list", action="store_true", help="list annotations instead of adding one")
    options.add_json(parser, "print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.errors import AnnotationError

    store = options.existing_store(args)
    if args.list:
        return _list(args, store)
    if not args.session:
        raise CommandError("name the session to annotate (or --list)")
    if len(args.label) != 1:
        raise CommandError("give exactly one --label")
    from tracer.queries.writes import annotate

    try:
        row = annotate(store, args.session, label=args.label[0], note=args.note, span_id=args.span)
    except AnnotationError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(row, indent=2, ensure_ascii=False))
    else:
        print(f"annotated {row['target']} {row['span_id']} of session {row['session_id']}: "
              f"{row['label']!r} (annotation {row['id']}, stored in {store.path})")
    return status.SUCCESS


def _printable(text: str) -> str:
    """``text`` with control characters (terminal escapes a note may hold) shown escaped, not obeyed."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode() for ch in text)


def _list(args: argparse.Namespace, store: Store) -> int:
    from tracer import queries

    with store.reader() as r:
        frame = queries.annotation_list(r, session_id=args.session, labels=args.label or None)
    rows = [{k: (None if v != v else v) for k, v in rec.items()} for rec in frame.to_dict("records")]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return status.SUCCESS
    for row in rows:
        step = "" if row["step"] is None or row["target"] == "session" else f" at step {int(row['step'])}"
        what = f" ({row['what']})" if row["what"] else ""
        line = f"{row['id']}  {row['session_id']}  {row['target']}{what}{step}  [{row['label']}]  {row['note'] or ''}"
        print(_printable(line))
    print(f"{len(rows)} annotations")
    return status.SUCCESS
