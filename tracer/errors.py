"""Every error the tracer raises, under one root: ``TracerError``, itself a :class:`PrunegateError`.

One module so that a caller (the command line above all) can catch the family in one place and
map it to one line and an exit code, and so that no wing has to import another to name an error.
The classes keep the standard base they always had (``RuntimeError``, ``ValueError``) so existing
``except`` clauses still catch them.
"""

from __future__ import annotations

import os

from policies.errors import PrunegateError

__all__ = [
    "CommandError",
    "CompactionCancelled",
    "EngineError",
    "ExportFailed",
    "InputError",
    "OtlpJsonError",
    "PriceError",
    "RedactionFailed",
    "SegmentDamaged",
    "StoreDamaged",
    "StoreError",
    "StoreNoSpace",
    "StorePermissionError",
    "TooDeep",
    "TooLarge",
    "TracerError",
    "Unparseable",
    "UsageError",
]


class TracerError(PrunegateError):
    """Base class of the tracer's errors."""


class StoreError(TracerError, RuntimeError):
    """The store cannot be read (damaged file, bad query); the message names the path."""


class StorePermissionError(StoreError):
    """The store (or one of its files) cannot be written or read for lack of permission; the
    message names the path. Never reported as "busy": waiting does not help, permissions do."""


class StoreDamaged(StoreError):
    """``spans.duckdb`` cannot be read (not a DuckDB file, a block failing its checksum); the message
    names the file and the command that rebuilds it (``prunegate recover``)."""


class SegmentDamaged(TracerError, ValueError):
    """A segment file that cannot be trusted (damaged pages, another schema, JSON that is not JSON);
    ``str()`` says which check failed and where. Readers skip it; compaction quarantines it."""


class CompactionCancelled(TracerError):
    """Raised inside a compaction at a step boundary once its :class:`tracer.store.cancel.Cancel` was
    called; :func:`tracer.store.compact.compact` turns it into ``result.busy`` (the store as it was)."""


class EngineError(TracerError, RuntimeError):
    """The replay engine cannot run (Ray missing, its cluster unreachable); the text says which and why."""


class StoreNoSpace(StoreError):
    """A compaction found no room for the new database it writes beside the old; the store is
    unchanged and readable. Exit status 3: nothing is lost, run it again with space."""

    exit_status = 3


class OtlpJsonError(TracerError, ValueError):
    """Bad OTLP JSON input; ``path``, ``line`` and ``where`` say exactly where."""

    def __init__(self, path: str | os.PathLike[str], line: int, where: str, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.where = where
        location = f"{self.path}:{line}" + (f": {where}" if where else "")
        super().__init__(f"{location}: {message}")


class CollectorFileError(TracerError, ValueError):
    """A record of a Collector file-exporter file that cannot be decoded; ``record`` is its 1-based position."""

    def __init__(self, record: int, message: str) -> None:
        super().__init__(message)
        self.record = record


class RedactionFailed(TracerError):
    """The redaction hook raised; the content is not recorded."""


class ExportFailed(TracerError, RuntimeError):
    """An exporter returned FAILURE instead of raising."""


class Unparseable(TracerError, ValueError):
    """A JSON value that cannot be accepted; ``str()`` is the reason (no file or line: callers add them)."""


class TooDeep(Unparseable):
    """JSON nested deeper than the parser accepts."""


class TooLarge(Unparseable):
    """A JSON value larger than ``$PRUNEGATE_MAX_INPUT_BYTES``."""


class PriceError(TracerError, ValueError):
    """A price file that cannot be read or says something impossible (names the file and entry)."""


class DecodeError(TracerError, ValueError):
    """Another instrumentation's span whose recorded content cannot be read (the text says which attribute
    and why); :mod:`tracer.traffic.genai_spans` raises it, the importer turns it into a refusal."""


class InputError(TracerError):
    """A file that cannot be read as request bodies; the text says which file, which line, why."""


class CommandError(TracerError):
    """A command cannot do what it was asked (no store, no such session...); the text says where and why.

    The command line prints it as one line, ``prunegate <command>: <text>``, and exits with
    ``exit_status`` (:data:`tracer.cli.status.ERROR` when None: it could not do what it was asked).
    """

    def __init__(self, message: str, *, exit_status: int | None = None) -> None:
        super().__init__(message)
        self.exit_status = exit_status


class UsageError(CommandError):
    """Arguments that cannot work together (found after parsing); printed as argparse prints a usage
    error, ``prunegate <command>: error: <text>``, exit :data:`tracer.cli.status.ERROR`."""


class AnnotationError(TracerError, ValueError):
    """An annotation that cannot be stored: no such session or span, an empty or too long label."""
