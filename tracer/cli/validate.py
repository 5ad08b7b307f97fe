"""``prunegate validate``: would the provider accept these recorded request bodies?

Reads files holding one request body (a JSON object) or one body per line (JSONL, each line may
carry an ``"id"`` key beside the body keys) and checks each with :func:`policies.validate.validate`.
Exit status: 0 every body valid, 1 some body invalid, 2 some input could not be read.
"""

from __future__ import annotations

import argparse
import json
import math
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
    from tracer.traffic.jsonparse import deep_enough

    results: list[tuple[Record, list[Violation]]] = []
    unreadable = False
    with deep_enough():
        for path in args.files:
            try:
                records, problems = read_records(path)
            except InputError as exc:
                print(f"prunegate: {exc}", file=sys.stderr)
                unreadable = True
                continue
            for problem in problems:
                print(f"prunegate: {problem}", file=sys.stderr)
                unreadable = True
            results.extend((record, validate(record.body, args.provider)) for record in records)
        if args.json:  # strict JSON (RFC 8259): no NaN or Infinity, whatever the input held
            print(json.dumps([_as_json(record, errors) for record, errors in results], indent=2,
                             ensure_ascii=False, allow_nan=False))
        else:
            for record, errors in results:
                print(_as_text(record, errors))
    if unreadable:
        return status.ERROR
    return status.FOUND_PROBLEMS if any(errors for _, errors in results) else status.SUCCESS


def _number(text: str) -> Any:
    """A JSON number as a float, or its own text when a double cannot hold it (``1e999``)."""
    value = float(text)
    return value if math.isfinite(value) else text


def _loads(text: str) -> Any:
    from tracer.traffic.jsonparse import loads

    return loads(text, parse_float=_number)


def read_records(path: str) -> tuple[list[Record], list[InputError]]:
    """The request bodies in ``path`` (one JSON object, or JSONL when the file is not one JSON value),
    and the lines that could not be read (each names its file, line and reason; the rest are read).
    Raises :class:`InputError` when the file as a whole cannot be read."""
    from tracer.traffic.jsonparse import Unparseable, refusal_reason

    name = "<stdin>" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    text = data.decode("utf-8", "surrogateescape")
    bad_utf8 = text.encode("utf-8", "surrogateescape") != data or _has_surrogate(text)
    try:
        if bad_utf8:
            raise Unparseable("not UTF-8 text")
        value = _loads(text)
    except (json.JSONDecodeError, Unparseable) as whole:
        lines = [line.rstrip("\r") for line in text.split("\n")]  # not splitlines(): U+2028 is legal JSON
        first = next((n for n, line in enumerate(lines, 1) if line.strip()), None)
        if first is None:
            raise InputError(f"{name}: empty file; expected a JSON request body or JSONL") from None
        if not lines[first - 1].lstrip().startswith("{") or not lines[first - 1].rstrip().endswith("}"):
            lineno = whole.lineno if isinstance(whole, json.JSONDecodeError) else first
            raise InputError(f"{name}:{lineno}: {_reason(whole, refusal_reason)}") from None
        records, problems = [], []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                if _has_surrogate(line):
                    raise Unparseable("not UTF-8 text")
                records.append(_record(name, n, _loads(line)))
            except (json.JSONDecodeError, Unparseable) as exc:
                problems.append(InputError(f"{name}:{n}: {_reason(exc, refusal_reason)}"))
            except InputError as exc:
                problems.append(exc)
        return records, problems
    return [_record(name, 1, value)], []


def _reason(exc: Exception, refusal_reason: Any) -> str:
    reason = refusal_reason(exc)
    return reason.replace("malformed JSON", "invalid JSON", 1)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
