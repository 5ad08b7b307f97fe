"""Reading input files with bounded memory: line by line, every byte counted, decompression capped.

``prunegate import`` used to read a whole file into memory (several copies: bytes, text, lines),
decompress a ``.gz`` whole before looking at it, and read ``/dev/zero`` until the kernel killed it.
Here a file is read in chunks: :func:`lines` yields one line at a time and never holds more than
one line (up to the per-value limit, ``$PRUNEGATE_MAX_INPUT_BYTES``) plus a chunk; a longer line is
skipped without being kept and refused; a file stops being read at ``$PRUNEGATE_MAX_FILE_BYTES``
(bytes read, and bytes decompressed: a small ``.gz`` holding gigabytes is refused at the cap);
anything that is not a regular file (a device, a pipe) is refused before it is opened.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from policies.errors import SettingsError
from tracer.contract.settings import MAX_FILE_BYTES_ENV, MAX_INPUT_BYTES_ENV
from tracer.errors import TooLarge
from tracer.traffic.jsonparse import max_bytes

__all__ = ["CHUNK", "FileTooLarge", "LineTooLong", "capped_read", "lines", "max_file_bytes", "not_regular"]

DEFAULT_MAX_FILE_BYTES = 4 * 1024**3
CHUNK = 1 << 20


class FileTooLarge(TooLarge):
    """A file (or what it decompresses to) over ``$PRUNEGATE_MAX_FILE_BYTES``."""


class LineTooLong(TooLarge):
    """One line over ``$PRUNEGATE_MAX_INPUT_BYTES`` (skipped without being kept)."""


def max_file_bytes() -> int:
    """``$PRUNEGATE_MAX_FILE_BYTES`` or 4 GiB (raises :class:`SettingsError` naming the variable when it
    is not a positive integer)."""
    text = os.environ.get(MAX_FILE_BYTES_ENV)
    if not text:
        return DEFAULT_MAX_FILE_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise SettingsError(f"${MAX_FILE_BYTES_ENV} must be a positive integer (bytes), got {text!r}")
    return value


def not_regular(path: Path) -> str | None:
    """Why ``path`` cannot be imported when it is not a regular file (a device such as /dev/zero, a
    pipe, a socket), else None. Stat errors are left to the open that follows."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kind = "a directory" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
        "a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    return f"not a regular file ({kind}): import reads files"


def _too_large(what: str, limit: int) -> FileTooLarge:
    return FileTooLarge(f"{what} over {limit:,} bytes (${MAX_FILE_BYTES_ENV}); the rest of the file is not read")


def capped_read(stream: BinaryIO, limit: int, what: str = "file") -> bytes:
    """All of ``stream``, refused (:class:`FileTooLarge`) as soon as it passes ``limit`` bytes."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _too_large(what, limit)
    return data


def lines(stream: BinaryIO, *, file_limit: int | None = None, line_limit: int | None = None,
          what: str = "file") -> Iterator[tuple[int, bytes | LineTooLong]]:
    """``(line number, line without its newline)`` for each line of ``stream``, or a
    :class:`LineTooLong` in place of a line over ``line_limit`` (its bytes are not kept). Raises
    :class:`FileTooLarge` once ``file_limit`` bytes have been read."""
    file_limit = max_file_bytes() if file_limit is None else file_limit
    line_limit = max_bytes() if line_limit is None else line_limit
    read = 0
    n = 0
    parts: list[bytes] = []
    held = 0
    skipping = False
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        read += len(chunk)
        if read > file_limit:
            raise _too_large(what, file_limit)
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping:
                held += len(piece)
                if held > line_limit:
                    skipping, parts = True, []
                else:
                    parts.append(piece)
            if end < 0:
                break
            n += 1
            yield n, _too_long(line_limit) if skipping else b"".join(parts)
            parts, held, skipping = [], 0, False
            start = end + 1
    if parts or skipping:
        n += 1
        yield n, _too_long(line_limit) if skipping else b"".join(parts)


def _too_long(limit: int) -> LineTooLong:
    return LineTooLong(f"too large: a line over {limit:,} bytes (${MAX_INPUT_BYTES_ENV})")
