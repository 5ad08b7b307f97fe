"""prunegate's environment variables, named and documented once, and the one place that resolves the store.

Every ``PRUNEGATE_*`` variable the project reads is a constant here with what it does; code reads
them through these names. :func:`resolve_store` is the only function that turns a ``--store``
argument (or its absence) into a path: ``Store()``, every command and the dashboard call it.
Standard library only, like the rest of the store.
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "PRUNEGATE_STORE"
"""The trace store directory used when none is given (``--store``, ``Store(path)``, the dashboard's).
``prunegate dashboard`` sets it for the Streamlit process it starts."""

SPOOL_DIR_ENV = "PRUNEGATE_SPOOL_DIR"
"""Where writers spool span batches the store refused (one subdirectory per store path);
default ``$XDG_CACHE_HOME/prunegate/spool`` (``~/.cache/prunegate/spool``)."""

CAPTURE_CONTENT_ENV = "PRUNEGATE_CAPTURE_CONTENT"
"""``true``/``false``: record message content in spans (structure is always recorded). When unset,
the GenAI convention's ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` decides; default off."""

MAX_INPUT_BYTES_ENV = "PRUNEGATE_MAX_INPUT_BYTES"
"""Largest input file ``prunegate import`` reads (bytes); default 256 MiB."""

FAULT_STOP_ENV = "PRUNEGATE_FAULT_STOP"
"""Test hook of the fault-injection suite: ``<point>:<n>`` stops (SIGSTOP) an importer the n-th time it
reaches ``<point>``. Never set it outside the tests."""

PRICES_ENV = "PRUNEGATE_PRICES"
"""A price table (JSON or TOML) laid over the dated default for compare/recommend costs (docs/replay.md)."""

ENVIRONMENT: dict[str, str] = {
    STORE_ENV: "trace store directory when --store is not given (default ./prunegate-store)",
    SPOOL_DIR_ENV: "spool directory for span batches the store refused (default ~/.cache/prunegate/spool)",
    CAPTURE_CONTENT_ENV: "true/false: record message content in spans (default: off)",
    PRICES_ENV: "price table (JSON or TOML) over the dated default, for compare and recommend",
    MAX_INPUT_BYTES_ENV: "largest input file import reads, in bytes (default 256 MiB)",
    FAULT_STOP_ENV: "test hook of the fault-injection suite; never set it otherwise",
}
"""Every ``PRUNEGATE_*`` variable, with one line on what it does (shown by ``prunegate --help``)."""

DEFAULT_STORE_DIRNAME = "prunegate-store"
STORE_HELP = f"trace store directory (default: ${STORE_ENV}, else ./{DEFAULT_STORE_DIRNAME})"


def resolve_store(arg: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: ``arg`` when given, else ``$PRUNEGATE_STORE``, else ``./prunegate-store``."""
    if arg is not None and str(arg) != "":
        return Path(arg)
    env = os.environ.get(STORE_ENV)
    return Path(env) if env else Path.cwd() / DEFAULT_STORE_DIRNAME


def spool_base() -> Path:
    """The directory under which each store gets its spool (``$PRUNEGATE_SPOOL_DIR`` or the user cache)."""
    base = os.environ.get(SPOOL_DIR_ENV)
    if base:
        return Path(base)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "prunegate" / "spool"
