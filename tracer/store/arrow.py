"""Arrow arrays built straight from buffers, for the export thread.

Why not ``pa.array(list)``: on its first call it imports pandas when pandas is installed (to check
whether the list is a pandas object). In an agent that is half a second with the GIL held on the
export thread, and about 30,000 more objects for every full garbage collection afterwards. Building
the three buffers (validity, offsets, data) ourselves avoids both and is as fast for our columns.
"""

from __future__ import annotations

import array
from itertools import accumulate

import pyarrow as pa

_MAX_OFFSET = 2**31 - 1


def _validity(values: list) -> tuple[pa.Buffer | None, int]:
    """LSB-first validity bitmap (None -> 0) and the null count; no bitmap when nothing is null."""
    if None not in values:
        return None, 0
    bits = "".join(["0" if v is None else "1" for v in reversed(values)])
    n = len(values)
    bitmap = int(bits, 2).to_bytes((n + 7) // 8, "little")
    return pa.py_buffer(bitmap), values.count(None)


def _encode(values: list) -> list[bytes]:
    try:
        return [b"" if v is None else v.encode() for v in values]
    except UnicodeEncodeError:  # lone surrogates cannot be UTF-8: keep the text, replace the code unit
        return [b"" if v is None else v.encode("utf-8", "replace") for v in values]


def string_array(values: list, *, nullable: bool = True) -> pa.Array:
    """A ``pa.string()`` array from a list of ``str`` (and ``None`` when ``nullable``)."""
    n = len(values)
    validity, nulls = _validity(values) if nullable else (None, 0)
    if nulls == n:
        return pa.nulls(n, pa.string())
    present = values if not nulls else ["" if v is None else v for v in values]
    text = "".join(present)
    if text.isascii():  # the usual case (ids, names, JSON): one encode, lengths from the str
        return _from_parts(text.encode("ascii"), map(len, present), n, validity, nulls)
    encoded = _encode(present)
    return _from_parts(b"".join(encoded), map(len, encoded), n, validity, nulls)


def utf8_array(data: bytes | bytearray, ends: list[int]) -> pa.Array:
    """A ``pa.string()`` array from UTF-8 text back to back and each value's end offset."""
    if len(data) > _MAX_OFFSET:
        raise ValueError(f"{len(data)} bytes of text in one column chunk; the limit is 2 GiB")
    offsets = array.array("i", [0])
    offsets.extend(ends)
    return pa.Array.from_buffers(pa.string(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)], 0)


def _from_parts(data: bytes, lengths: object, n: int, validity: pa.Buffer | None, nulls: int) -> pa.Array:
    if len(data) > _MAX_OFFSET:
        raise ValueError(f"{len(data)} bytes of text in one column chunk; the limit is 2 GiB")
    offsets = array.array("i", [0])
    offsets.extend(accumulate(lengths))  # type: ignore[call-overload]  # typeshed wants a list; any iterable of int works
    return pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], nulls)


_SAME: dict[tuple[str, int], pa.Array] = {}  # (value, n) -> array: the same few every chunk (arrays are immutable)


def same_string(value: str | None, n: int) -> pa.Array:
    """``n`` copies of one string (or ``n`` nulls)."""
    if value is None:
        return pa.nulls(n, pa.string())
    cached = _SAME.get((value, n))
    if cached is not None:
        return cached
    raw = value.encode("utf-8", "replace")
    width = len(raw)
    if width * n > _MAX_OFFSET:
        raise ValueError(f"{width * n} bytes of text in one column chunk; the limit is 2 GiB")
    offsets = array.array("i", range(0, width * n + 1, width)) if width else array.array("i", [0] * (n + 1))
    out = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], 0)
    if len(_SAME) < 64 and width <= 4096:
        _SAME[(value, n)] = out
    return out


_FIXED: dict[tuple[int, int], pa.Buffer] = {}  # (width, n) -> offsets 0, width, 2 * width, ...


def fixed_width_array(values: list, width: int) -> pa.Array:
    """A ``pa.string()`` array of ASCII strings that are all ``width`` characters long (or None),
    such as hex ids: the offsets are the same for every chunk of the same size."""
    n = len(values)
    validity, nulls = _validity(values)
    if nulls == n:
        return pa.nulls(n, pa.string())
    present = values if not nulls else ["0" * width if v is None else v for v in values]
    text = "".join(present)
    if len(text) != width * n or not text.isascii():  # not what the caller said: the general way
        return string_array(values)
    # a null's bytes stay in the data (its validity bit says null), as Arrow allows
    return pa.Array.from_buffers(pa.string(), n, [validity, _fixed_offsets(width, n),
                                                  pa.py_buffer(text.encode("ascii"))], nulls)


def _fixed_offsets(width: int, n: int) -> pa.Buffer:
    offsets = _FIXED.get((width, n))
    if offsets is None:
        offsets = pa.py_buffer(array.array("i", range(0, width * n + 1, width)))
        if len(_FIXED) < 64:
            _FIXED[(width, n)] = offsets
    return offsets


# ------------------------------------------------------------------ from the C accelerator's buffers
# (tracer/store/_columns.c: validity bytes or None, the null count, then the data buffers)
def from_buffers(typ: pa.DataType, n: int, parts: tuple) -> pa.Array:
    """An array from ``(validity, nulls, offsets, data)`` (strings) or ``(validity, nulls, data)``."""
    validity, nulls = parts[0], parts[1]
    if nulls == n:
        return pa.nulls(n, typ)
    buffers = [None if validity is None else pa.py_buffer(validity), *map(pa.py_buffer, parts[2:])]
    return pa.Array.from_buffers(typ, n, buffers, nulls)


def fixed_width_from(parts: tuple, width: int, n: int) -> pa.Array:
    """A string array of ``width``-character ASCII values from ``(validity, nulls, data)``."""
    validity, nulls, data = parts
    if nulls == n:
        return pa.nulls(n, pa.string())
    return pa.Array.from_buffers(pa.string(), n, [None if validity is None else pa.py_buffer(validity),
                                                  _fixed_offsets(width, n), pa.py_buffer(data)], nulls)


def int64_array(values: list, *, nullable: bool = True) -> pa.Array:
    """A ``pa.int64()`` array from a list of ``int`` / ``None`` (raises OverflowError past int64)."""
    n = len(values)
    validity, nulls = _validity(values) if nullable else (None, 0)
    if nulls == n:
        return pa.nulls(n, pa.int64())
    data = array.array("q", values if not nulls else [0 if v is None else v for v in values])
    return pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(data)], nulls)


def bool_array(values: list) -> pa.Array:
    """A ``pa.bool_()`` array from a list of ``bool`` / ``None``."""
    n = len(values)
    validity, nulls = _validity(values)
    if nulls == n:
        return pa.nulls(n, pa.bool_())
    bits = "".join(["1" if v else "0" for v in reversed(values)])
    data = int(bits, 2).to_bytes((n + 7) // 8, "little")
    return pa.Array.from_buffers(pa.bool_(), n, [validity, pa.py_buffer(data)], nulls)


def float64_array(values: list) -> pa.Array:
    """A ``pa.float64()`` array from a list of ``float`` / ``int`` / ``None``."""
    n = len(values)
    validity, nulls = _validity(values)
    if nulls == n:
        return pa.nulls(n, pa.float64())
    data = array.array("d", values if not nulls else [0.0 if v is None else v for v in values])
    return pa.Array.from_buffers(pa.float64(), n, [validity, pa.py_buffer(data)], nulls)


def column(values: list, typ: pa.DataType, *, nullable: bool = True) -> pa.Array:
    """One column of the store schema (strings, int64 and booleans)."""
    if typ == pa.string():
        return string_array(values, nullable=nullable)
    if typ == pa.int64():
        return int64_array(values, nullable=nullable)
    if typ == pa.bool_():
        return bool_array(values)
    if typ == pa.float64():
        return float64_array(values)
    raise TypeError(f"no buffer builder for {typ}")
