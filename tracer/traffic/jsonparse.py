"""Parsing recorded JSON with limits: too deep, too large, not JSON, each refused with a reason.

Python's ``json`` raises ``RecursionError`` past about a thousand levels of nesting, which used to
crash ``import`` and ``validate`` and abort every file after the bad line. Here nesting up to
:data:`MAX_DEPTH` levels parses (valid recorded bodies a few thousand levels deep exist: tool
inputs are arbitrary JSON), deeper input is refused as :class:`TooDeep`, input over
:data:`max_bytes` as :class:`TooLarge`, and the non-JSON constants ``NaN``/``Infinity`` as
:class:`Unparseable`. :func:`deep_enough` gives code that walks such values (``json.dumps``, the
token counter) the same headroom.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from policies.errors import SettingsError
from tracer.contract.settings import MAX_INPUT_BYTES_ENV
from tracer.errors import TooDeep, TooLarge, Unparseable

__all__ = ["TooDeep", "TooLarge", "Unparseable", "deep_enough", "loads", "max_bytes", "refusal_reason"]

MAX_DEPTH = 5000  # levels of nesting accepted (the C parser and encoder use the C stack per level)
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
MAX_BYTES_ENV = MAX_INPUT_BYTES_ENV

_lock = threading.Lock()
_users = 0
_saved_limit = 0


def max_bytes() -> int:
    """The largest JSON value (a file, or one JSONL line) accepted: ``$PRUNEGATE_MAX_INPUT_BYTES``
    or 256 MiB."""
    text = os.environ.get(MAX_BYTES_ENV)
    if text:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value > 0:
            return value
        raise SettingsError(f"${MAX_BYTES_ENV} must be a positive integer (bytes), got {text!r}")
    return DEFAULT_MAX_BYTES


def _stack_depth() -> int:
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]  # None ends the loop; typeshed types f_back loosely
    return depth


@contextmanager
def deep_enough() -> Iterator[None]:
    """Raise the interpreter's recursion limit so that values :data:`MAX_DEPTH` deep can be parsed,
    encoded and counted; restored when the last user leaves."""
    global _users, _saved_limit
    needed = _stack_depth() + MAX_DEPTH + 200
    with _lock:
        if _users == 0:
            _saved_limit = sys.getrecursionlimit()
        _users += 1
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                sys.setrecursionlimit(_saved_limit)


def _refuse_constant(name: str) -> Any:
    raise Unparseable(f"not JSON: {name} is not a JSON number (RFC 8259)")


def loads(text: str, *, parse_float: Callable[[str], Any] | None = None) -> Any:
    """``json.loads`` with the limits above. Raises ``json.JSONDecodeError`` for malformed JSON
    and :class:`Unparseable` (:class:`TooDeep`, :class:`TooLarge`) for the rest."""
    limit = max_bytes()
    if len(text) > limit:
        raise TooLarge(f"too large: {len(text)} characters (the limit is {limit} bytes, ${MAX_BYTES_ENV})")
    with deep_enough():
        try:
            return json.loads(text, parse_constant=_refuse_constant, parse_float=parse_float)
        except RecursionError:
            raise TooDeep(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
        except json.JSONDecodeError:
            raise
        except ValueError as exc:  # an integer of more digits than Python converts (4,300)
            raise Unparseable(f"not JSON this reader accepts: {exc}".split("; use sys.")[0]) from None


def refusal_reason(exc: json.JSONDecodeError | Unparseable) -> str:
    """A one-line reason for a value :func:`loads` refused."""
    if isinstance(exc, json.JSONDecodeError):
        return f"malformed JSON: {exc.msg} (column {exc.colno})"
    return str(exc)
