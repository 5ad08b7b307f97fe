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
from typing import Any

from tracer.errors import CollectorFileError

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


def decompress(data: bytes) -> bytes:
    """A gzip or zstd stream (possibly several concatenated frames), decompressed; else ``data``."""
    if data[:2] == GZIP_MAGIC:
        import gzip

        return gzip.decompress(data)
    if data[:4] == ZSTD_MAGIC:
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            return reader.read()
    return data


def requests(data: bytes) -> Iterator[tuple[int, Any]]:
    """``(record number, request object)`` for each request in a file's bytes."""
    data = decompress(data)
    if not _framed_at(data, 0, len(data)):
        for n, line in enumerate(data.split(b"\n"), 1):
            if line.strip():
                yield n, _json(n, line)
        return
    pos, n = 0, 0
    while pos < len(data):
        n += 1
        if len(data) < pos + 4:
            raise CollectorFileError(n, f"truncated length prefix at byte {pos}")
        size = int.from_bytes(data[pos:pos + 4], "big")
        payload = data[pos + 4:pos + 4 + size]
        if len(payload) < size:
            raise CollectorFileError(n, f"truncated record at byte {pos}: {len(payload)} of {size} bytes")
        pos += 4 + size
        try:
            payload = decompress(payload)
        except Exception as exc:  # zstd/gzip errors have no common base class
            raise CollectorFileError(n, f"cannot decompress: {exc}") from None
        yield n, _json(n, payload) if payload[:1] == b"{" else _proto(n, payload)


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
