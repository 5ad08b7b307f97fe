"""``python -m dashboard [streamlit options]``: serve this app with Streamlit.

``prunegate dashboard`` runs this in a child process, so that tracer never imports (or searches
for) the dashboard package: arrows point dashboard -> tracer. The options are Streamlit's
(``--server.address``, ``--server.port``, ...); the store comes from ``$PRUNEGATE_STORE``.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")
WARM_GRACE = 5.0
"""Seconds a stopped server waits for its cache warm-ups to reach the end of their current query."""


class _NoRuntimeNotice(logging.Filter):
    """Drop Streamlit's "No runtime found" warning. The dashboard's cached queries are defined, and
    first warmed, before the server has a runtime; their in-memory caches are the ones the pages then
    use. Without this, every start printed a dozen of those lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No runtime found" not in record.getMessage()


def main(argv: list[str]) -> int:
    """``streamlit run dashboard/app.py <argv>`` in this process."""
    logging.getLogger("streamlit.runtime.caching.cache_data_api").addFilter(_NoRuntimeNotice())
    from streamlit.web import cli as streamlit_cli

    from dashboard.components import warm

    warm.start()  # the pages' first queries, while the server starts and the browser connects
    sys.argv = ["streamlit", "run", str(APP), *argv]
    code = 0
    try:
        streamlit_cli.main()  # a click command: it exits
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if not warm.finish(timeout=WARM_GRACE):
        # A warm-up still inside DuckDB would abort the interpreter's shutdown: end without it.
        print(f"prunegate dashboard: a cache warm-up was still running {WARM_GRACE:g} s after the server "
              "stopped; exiting without waiting for it", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
