"""``prunegate validate``: would the provider accept these recorded request bodies?

Reads files holding one request body (a JSON object) or one body per line (JSONL, each line may
carry an ``"id"`` key beside the body keys) and checks each with :func:`policies.validate.validate`.
Exit status: 0 every body valid, 1 some body invalid, 2 some input could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies.validate import PROVIDERS, Violation, validate
from tracer.cli import add_command, options, status
from tracer.errors import InputError


@dataclass(frozen=True)
class Record:
    """One request body and where it came from."""

    file: str
    line: int
    id: Any
    body: dict[str, Any]


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "validate",
        description="Check request bodies (a JSON file with one body, or JSONL with one per line and an "
        "optional \"id\" key) against the provider's structural rules for tool calls. Exit 0 when all "
        "are valid, 1 when any is not, 2 when an input cannot be read.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSON or JSONL file ('-' reads stdin)")
    parser.add_argument("--provider", required=True, choices=PROVIDERS, help="whose rules to apply")
    options.add_json(parser, "print a JSON list of results instead of text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    results: list[tuple[Record, list[Violation]]] = []
    unreadable = False
    for path in args.files:
        try:
            records = read_records(path)
        except InputError as exc:
            print(f"prunegate: {exc}", file=sys.stderr)
            unreadable = True
            continue
        results.extend((record, validate(record.body, args.provider)) for record in records)
    if args.json:
        print(json.dumps([_as_json(record, errors) for record, errors in results], indent=2, ensure_ascii=False))
    else:
        for record, errors in results:
            print(_as_text(record, errors))
    if unreadable:
        return status.ERROR
    return status.FOUND_PROBLEMS if any(errors for _, errors in results) else status.SUCCESS


def read_records(path: str) -> list[Record]:
    """The request bodies in ``path``: one JSON object, or JSONL when the file is not one JSON value."""
    name = "<stdin>" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [line.rstrip("\r") for line in text.split("\n")]  # not splitlines(): U+2028 is legal JSON
        first = next((n for n, line in enumerate(lines, 1) if line.strip()), None)
        if first is None:
            raise InputError(f"{name}: empty file; expected a JSON request body or JSONL") from None
        if not _is_object(lines[first - 1]):  # not JSONL either: report the whole-file error
            raise InputError(f"{name}:{whole.lineno}: invalid JSON: {whole.msg} (column {whole.colno})") from None
        return [_record(name, n, _parse_line(name, n, line)) for n, line in enumerate(lines, 1) if line.strip()]
    return [_record(name, 1, value)]


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _parse_line(name: str, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{n}: invalid JSON: {exc.msg} (column {exc.colno})") from None


def _record(name: str, line: int, value: Any) -> Record:
    if not isinstance(value, dict):
        kind = "array" if isinstance(value, list) else type(value).__name__
        raise InputError(f"{name}:{line}: expected a JSON object (one request body), got {kind}")
    body = {k: v for k, v in value.items() if k != "id"}
    return Record(name, line, value.get("id"), body)


def _as_text(record: Record, errors: list[Violation]) -> str:
    label = f"{record.file}:{record.line}" + ("" if record.id is None else f" {record.id}")
    lines = [f"{label}: {'INVALID' if errors else 'OK'}"]
    lines.extend(f"  {v.code}: {v.message}" for v in errors)
    return "\n".join(lines)


def _as_json(record: Record, errors: list[Violation]) -> dict[str, Any]:
    return {
        "file": record.file,
        "line": record.line,
        "id": record.id,
        "valid": not errors,
        "errors": [v.to_dict() for v in errors],
    }
