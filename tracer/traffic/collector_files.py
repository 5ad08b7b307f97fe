"""What the OpenTelemetry Collector's file exporter writes, as OTLP request objects.

Why: a Collector in front of prunegate can buffer to files (``file`` exporter, rotated) while
``prunegate serve`` is down or unreachable; ``prunegate import`` then reads those files. The
exporter writes, depending on ``format`` and ``compression``:

- ``format: json``, no compression: one ExportTraceServiceRequest JSON object per line (read by
  :func:`tracer.traffic.otlp_json.read_otlp_json` as text);
- ``compression: zstd`` or ``format: proto``: each request *framed*: a 4-byte big-endian length,
  then the (zstd-compressed) JSON or protobuf bytes;
- a whole file compressed as one stream (``.zst`` native compression, or ``.gz`` after log
  rotation): decompressed, then read as one of the above.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from tracer.errors import CollectorFileError, TooLarge

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PROTO_START = b"\x0a"  # field 1 (resource_spans), length-delimited


def is_binary_otlp(head: bytes, size: int) -> bool:
    """Whether a file of ``size`` bytes starting with ``head`` (8 bytes read) is compressed or framed OTLP."""
    return head[:2] == GZIP_MAGIC or head[:4] == ZSTD_MAGIC or _framed_at(head, 0, size)


def _framed_at(data: bytes, pos: int, size: int) -> bool:
    """A length prefix that fits the file, then JSON, protobuf or a zstd frame (text never fits:
    its first four bytes read as a length far beyond the file)."""
    if len(data) < pos + 5:
        return False
    n = int.from_bytes(data[pos:pos + 4], "big")
    first = data[pos + 4:pos + 5]
    return 0 < n <= size - pos - 4 and (first in (b"{", PROTO_START) or data[pos + 4:pos + 8] == ZSTD_MAGIC)


def decompress(data: bytes, limit: int | None = None) -> bytes:
    """A gzip or zstd stream (possibly several concatenated frames), decompressed; else ``data``.
    Raises :class:`~tracer.errors.TooLarge` past ``limit`` decompressed bytes (one framed record)."""
    from tracer.traffic.bounded import capped_read
    from tracer.traffic.jsonparse import max_bytes

    limit = max_bytes() if limit is None else limit
    if data[:2] == GZIP_MAGIC or data[:4] == ZSTD_MAGIC:
        with _inflating(io.BytesIO(data)) as stream:
            return capped_read(stream, limit, "a decompressed record")
    return data


def _inflating(raw: BinaryIO) -> BinaryIO:
    """``raw`` (positioned at a gzip or zstd stream) decompressed as it is read."""
    head = raw.read(4)
    raw.seek(-len(head), io.SEEK_CUR)
    if head[:2] == GZIP_MAGIC:
        import gzip

        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]  # GzipFile reads as a BinaryIO does
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)


class _Counted(io.RawIOBase):
    """A stream refused (:class:`~tracer.traffic.bounded.FileTooLarge`) once ``limit`` bytes were read."""

    def __init__(self, inner: BinaryIO, limit: int) -> None:
        self.inner, self.limit, self.count = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            self._refuse()
        buffer[: len(data)] = data
        return len(data)

    def _refuse(self) -> None:
        from tracer.contract.settings import MAX_FILE_BYTES_ENV
        from tracer.traffic.bounded import FileTooLarge

        raise FileTooLarge(f"decompressed over {self.limit:,} bytes (${MAX_FILE_BYTES_ENV}); the rest is not read")

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        self.count += len(data)
        if self.count > self.limit:
            from tracer.contract.settings import MAX_FILE_BYTES_ENV
            from tracer.traffic.bounded import FileTooLarge

            raise FileTooLarge(f"decompressed over {self.limit:,} bytes (${MAX_FILE_BYTES_ENV}); the rest is not read")
        return data


def requests(path: Any) -> Iterator[tuple[int, Any]]:
    """``(record number, request object)`` for each request of a Collector file, read as a stream:
    memory holds one record (at most ``$PRUNEGATE_MAX_INPUT_BYTES``), whatever the file's size or
    what it decompresses to (at most ``$PRUNEGATE_MAX_FILE_BYTES``, else refused)."""
    from tracer.traffic.bounded import lines, max_file_bytes
    from tracer.traffic.jsonparse import max_bytes

    file_limit, record_limit = max_file_bytes(), max_bytes()
    with open(path, "rb") as raw:
        try:
            head = raw.read(4)
            raw.seek(0)
            stream: BinaryIO = raw
            if head[:2] == GZIP_MAGIC or head[:4] == ZSTD_MAGIC:
                stream = _Counted(_inflating(raw), file_limit)  # type: ignore[assignment]  # _Counted has read/readinto
            else:
                stream = _Counted(raw, file_limit)  # type: ignore[assignment]  # as above
            buffered = io.BufferedReader(stream, 1 << 20)  # type: ignore[type-var]  # a raw stream by duck typing
            first = buffered.peek(8)[:8]
            if not _framed_at(first, 0, 1 << 62):
                for n, line in lines(buffered, file_limit=file_limit, line_limit=record_limit):
                    if isinstance(line, Exception):
                        raise CollectorFileError(n, str(line))
                    if line.strip():
                        yield n, _json(n, line)
                return
            n = 0
            while True:
                prefix = buffered.read(4)
                if not prefix:
                    return
                n += 1
                if len(prefix) < 4:
                    raise CollectorFileError(n, "truncated length prefix")
                size = int.from_bytes(prefix, "big")
                if size > record_limit:
                    raise CollectorFileError(n, f"too large: a record of {size:,} bytes (the limit is "
                                                f"{record_limit:,} bytes, $PRUNEGATE_MAX_INPUT_BYTES)")
                payload = buffered.read(size)
                if len(payload) < size:
                    raise CollectorFileError(n, f"truncated record: {len(payload)} of {size} bytes")
                try:
                    payload = decompress(payload, record_limit)
                except TooLarge as exc:
                    raise CollectorFileError(n, str(exc)) from None
                except Exception as exc:  # noqa: BLE001 - zstd/gzip errors have no common base class
                    raise CollectorFileError(n, f"cannot decompress: {exc}") from None
                yield n, _json(n, payload) if payload[:1] == b"{" else _proto(n, payload)
        except TooLarge as exc:
            raise CollectorFileError(0, str(exc)) from None
        except CollectorFileError:
            raise
        except (OSError, EOFError, ValueError) as exc:  # a garbage .gz/.zst: BadGzipFile, zlib.error, ZstdError
            raise CollectorFileError(0, f"cannot decompress: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - zlib.error and zstandard.ZstdError share no base class
            raise CollectorFileError(0, f"cannot decompress: {exc}") from None


def _json(n: int, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CollectorFileError(n, f"invalid JSON: {exc}") from None


def _proto(n: int, raw: bytes) -> Any:
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    msg = ExportTraceServiceRequest()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise CollectorFileError(n, f"not an OTLP protobuf request: {exc}") from None
    return MessageToDict(msg)
