"""prunegate's environment variables, named and documented once, and the readers of the simple ones.

Every ``PRUNEGATE_*`` variable the project reads is a constant here with what it does; code reads
them through these names. Every wing reads some of them, so they sit on the contract floor
(standard library only). Turning a ``--store`` argument (or its absence) into a store location is
the store's business: :func:`tracer.store.resolve_store` (``tracer/store/location.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "PRUNEGATE_STORE"
"""The trace store used when none is given (``--store``, ``Store(path)``, the dashboard's): a directory
or ``s3://bucket/prefix``. ``prunegate dashboard`` sets it for the Streamlit process it starts."""

S3_ENDPOINT_ENV = "PRUNEGATE_S3_ENDPOINT"
"""Endpoint URL of the S3-compatible service for ``s3://`` stores (MinIO, moto, R2, ...); when unset,
boto3's own ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` or AWS itself. Credentials and region come
from the usual AWS variables and files (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, ``AWS_REGION``, ...)."""

SPOOL_DIR_ENV = "PRUNEGATE_SPOOL_DIR"
"""Where writers spool span batches the store refused (one subdirectory per store path);
default ``$XDG_CACHE_HOME/prunegate/spool`` (``~/.cache/prunegate/spool``)."""

S3_CACHE_ENV = "PRUNEGATE_S3_CACHE"
"""Where readers of ``s3://`` stores keep the objects they downloaded (objects are immutable, so a copy
never goes stale); ``off`` keeps none. Default ``$XDG_CACHE_HOME/prunegate/s3``
(``~/.cache/prunegate/s3``), at most 2 GiB: the least recently read objects go first."""

CAPTURE_CONTENT_ENV = "PRUNEGATE_CAPTURE_CONTENT"
"""``true``/``false``: record message content in spans (structure is always recorded). When unset,
the GenAI convention's ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` decides; default off."""

MAX_INPUT_BYTES_ENV = "PRUNEGATE_MAX_INPUT_BYTES"
"""Largest JSON value ``prunegate import`` and ``validate`` parse (a JSONL line, or a file holding one
value), in bytes; default 256 MiB."""

MAX_FILE_BYTES_ENV = "PRUNEGATE_MAX_FILE_BYTES"
"""Most bytes ``prunegate import`` reads from one input file, and most it decompresses from one
``.gz``/``.zst`` file; default 4 GiB. Import streams: its memory does not grow with the file."""

FAULT_STOP_ENV = "PRUNEGATE_FAULT_STOP"
"""Test hook of the fault-injection suite: ``<point>:<n>`` stops (SIGSTOP) an importer the n-th time it
reaches ``<point>``. Never set it outside the tests."""

PRICES_ENV = "PRUNEGATE_PRICES"
"""A price table (JSON or TOML) laid over the dated default for compare/recommend costs (docs/replay.md)."""

NO_ACCELERATOR_ENV = "PRUNEGATE_NO_ACCELERATOR"
"""Set (to anything): span records are converted for the store by the Python path even where the C
accelerator (``tracer/store/_columns.c``) is built; the same tables, slower (docs/store.md)."""

ENVIRONMENT: dict[str, str] = {
    STORE_ENV: "trace store (directory or s3://bucket/prefix) when --store is not given (default ./prunegate-store)",
    S3_ENDPOINT_ENV: "endpoint URL of the S3-compatible service for s3:// stores (default: AWS_ENDPOINT_URL_S3, AWS)",
    SPOOL_DIR_ENV: "spool directory for span batches the store refused (default ~/.cache/prunegate/spool)",
    S3_CACHE_ENV: "where readers of s3:// stores keep downloaded objects, or off (default ~/.cache/prunegate/s3)",
    NO_ACCELERATOR_ENV: "set: convert span records in Python even where the C accelerator is built",
    CAPTURE_CONTENT_ENV: "true/false: record message content in spans (default: off)",
    PRICES_ENV: "price table (JSON or TOML) over the dated default, for compare and recommend",
    MAX_INPUT_BYTES_ENV: "largest JSON value (a JSONL line, a one-value file) import parses, in bytes (default 256 MiB)",
    MAX_FILE_BYTES_ENV: "most bytes import reads, or decompresses, from one input file (default 4 GiB)",
    FAULT_STOP_ENV: "test hook of the fault-injection suite; never set it otherwise",
}
"""Every ``PRUNEGATE_*`` variable, with one line on what it does (shown by ``prunegate --help``)."""

DEFAULT_STORE_DIRNAME = "prunegate-store"
STORE_HELP = f"trace store: a directory or s3://bucket/prefix (default: ${STORE_ENV}, else ./{DEFAULT_STORE_DIRNAME})"
BUCKET_SCHEME = "s3://"


def s3_endpoint() -> str | None:
    """The endpoint URL for ``s3://`` stores: ``$PRUNEGATE_S3_ENDPOINT``, else boto3's own resolution (None)."""
    return os.environ.get(S3_ENDPOINT_ENV) or None


def spool_base() -> Path:
    """The directory under which each store gets its spool (``$PRUNEGATE_SPOOL_DIR`` or the user cache)."""
    base = os.environ.get(SPOOL_DIR_ENV)
    if base:
        return Path(base)
    return _user_cache() / "spool"


def s3_cache_dir() -> Path | None:
    """Where bucket objects are cached (``$PRUNEGATE_S3_CACHE``), None when it says ``off``."""
    value = os.environ.get(S3_CACHE_ENV)
    if value is not None and value.strip().lower() in ("off", "0", "false", "no", "none"):
        return None
    return Path(value) if value else _user_cache() / "s3"


def _user_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "prunegate"
