"""Text that is valid Unicode before it is written: lone surrogates become U+FFFD, counted.

A Python ``str`` can hold code points UTF-8 cannot encode: the surrogates U+D800..U+DFFF, which
``json.loads`` makes of an escaped ``"\\ud800"`` and ``surrogateescape`` makes of bad bytes. JSON
text written with such a value is refused by DuckDB's JSON type ("no low surrogate in string"),
which used to make every reader of the store fail on one row. Every door that writes text goes
through :func:`scrub` (or :func:`scrub_text`), which replaces each with U+FFFD and says how many;
the span that carried them gets the count as ``prunegate.text.replaced`` (docs/store.md, Faults).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "has_escaped_surrogate", "scrub", "scrub_text"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def scrub_text(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate replaced by U+FFFD, and how many were replaced."""
    if text.isascii():  # O(1) in CPython: the usual case costs nothing
        return text, 0
    return _SURROGATE.subn(REPLACEMENT, text)


def scrub(value: Any) -> tuple[Any, int]:
    """A JSON-like value (dicts, lists, tuples, strings, scalars) with every string scrubbed (keys
    too), and the number of code points replaced. The value itself when nothing was replaced."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        total = 0
        out: dict[Any, Any] = {}
        for k, v in value.items():
            k2, n1 = scrub_text(k) if isinstance(k, str) else (k, 0)
            v2, n2 = scrub(v)
            out[k2] = v2
            total += n1 + n2
        return (out, total) if total else (value, 0)
    if isinstance(value, (list, tuple)):
        items, total = [], 0
        for v in value:
            v2, n = scrub(v)
            items.append(v2)
            total += n
        if not total:
            return value, 0
        return (tuple(items) if isinstance(value, tuple) else items), total
    return value, 0


def has_escaped_surrogate(json_text: str) -> bool:
    """Whether JSON text escapes a surrogate (``\\ud800``): only then can parsing it make one."""
    return _ESCAPED.search(json_text) is not None
