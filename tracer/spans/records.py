"""The attribute cleaning of span records, by the OpenTelemetry SDK's rule (no pyarrow, so that a
traced session costs no pyarrow import).

The record's shape is the contract's (:mod:`tracer.contract.records`); :mod:`tracer.spans.direct`
writes records, and hands :func:`clean_chunk` to the store through the record's ``meta`` for the
records it wrote uncleaned (the store never imports the SDK).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, compress, repeat
from operator import contains
from typing import Any

from opentelemetry.attributes import BoundedAttributes

from tracer.contract.records import R_ATTRS, R_CLEAN

_SCALARS = (str, int, bool, float)
_SEQUENCES = (list, tuple, set, frozenset)
_AS_IS = frozenset((str, int, bool, float, type(None), list, tuple))  # see clean_chunk
_IS_LIST = frozenset((list, tuple)).__contains__


def clean_attributes(attributes: Mapping[str, Any], out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Attributes as the SDK stores them after ``tracer.spans.session.clean``: ``None`` left out,
    sequences as tuples of str, other non-scalar values by the SDK's own rule (added to ``out``)."""
    out = {} if out is None else out
    for key, value in attributes.items():
        if value is None:
            continue
        t = type(value)
        if t in _SCALARS:
            out[key] = value
        elif t in _SEQUENCES:
            out[key] = tuple(map(str, value))
        else:
            checked = BoundedAttributes(attributes={key: value})  # the SDK's own rule (rare values)
            if key in checked:
                out[key] = checked[key]
    return out


def record_attributes(record: tuple) -> dict[str, Any]:
    """A record's attributes, cleaned."""
    attrs = record[R_ATTRS]
    return attrs if record[R_CLEAN] else clean_attributes(attrs)


def clean_chunk(dicts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Many records' attributes, each as :func:`clean_attributes` would store it (as JSON: a list
    of str stands for the tuple of str it would become), tested in C over the whole chunk first.

    The usual chunk (scalars, lists of str, a few ``None``) then costs one dict copy per dict that
    holds a ``None``, instead of a Python loop over every attribute of every span (measured: about
    4 µs per span on the reference machine). Anything else is cleaned the slow, exact way.
    """
    values: list[Any] = list(chain.from_iterable(map(dict.values, dicts)))  # type: ignore[arg-type]  # Mappings here are dicts
    types = set(map(type, values))
    if not types <= _AS_IS:
        return [clean_attributes(d) for d in dicts]
    if list in types or tuple in types:
        items = set(map(type, chain.from_iterable(compress(values, map(_IS_LIST, map(type, values))))))
        if not items <= {str}:
            return [clean_attributes(d) for d in dicts]
    out = list(dicts)
    if type(None) in types:
        for i in compress(range(len(out)), map(contains, map(dict.values, dicts), repeat(None))):  # type: ignore[arg-type]  # dicts
            out[i] = {k: v for k, v in out[i].items() if v is not None}
    return out
