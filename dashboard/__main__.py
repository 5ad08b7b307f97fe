"""``python -m dashboard [streamlit options]``: serve this app with Streamlit.

``prunegate dashboard`` runs this in a child process, so that tracer never imports (or searches
for) the dashboard package: arrows point dashboard -> tracer. The options are Streamlit's
(``--server.address``, ``--server.port``, ...); the store comes from ``$PRUNEGATE_STORE``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")
WARM_GRACE = 5.0
"""Seconds a stopped server waits for its cache warm-ups to reach the end of their current query."""
DEFAULTS = {"--server.fileWatcherType": "none", "--runner.postScriptGC": "false", "--runner.magicEnabled": "false"}
"""Streamlit options this server sets unless given (on the command line or as ``STREAMLIT_...``).

- No file watcher: it is for editing an app's source while it runs, and after every page run it
  re-resolved the path of every imported module on the server's event loop: about 40 % of the
  server's CPU while chromium opened the Compare page at 10,024 sessions (py-spy, eight visits).
- No full garbage collection after every script run: ``gc.collect(2)`` walked the whole heap (pandas,
  Plotly, the query caches) after each page run and each fragment rerun, holding the GIL while the
  page's last messages waited to be sent: 0.14 s of every Compare visit at 10,024 sessions (py-spy,
  eight visits, 21 % of the server's samples). Python's own generational collector still runs.
- No "magic" (a bare expression on a page's line drawn with ``st.write``): no page uses it, and
  Streamlit rewrote each page's syntax tree for it whenever it compiled the page, which it does again
  on a visit after every browser tab had closed (py-spy: 18 % of the Replay page's server time when
  one tab opens it again and again)."""


class _NoRuntimeNotice(logging.Filter):
    """Drop Streamlit's "No runtime found" warning. The dashboard's cached queries are defined, and
    first warmed, before the server has a runtime; their in-memory caches are the ones the pages then
    use. Without this, every start printed a dozen of those lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No runtime found" not in record.getMessage()


def with_defaults(argv: list[str], environ: Mapping[str, str]) -> list[str]:
    """``argv`` with :data:`DEFAULTS` added for the options neither it nor the environment sets."""
    given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    extra = []
    for option, value in DEFAULTS.items():
        if option not in given and env_name(option) not in environ:
            extra += [option, value]
    return [*argv, *extra]


def env_name(option: str) -> str:
    """Streamlit's environment variable for an option (``--server.fileWatcherType``:
    ``STREAMLIT_SERVER_FILE_WATCHER_TYPE``), as Streamlit's own config option names it."""
    from streamlit.config_option import ConfigOption

    return ConfigOption(option.removeprefix("--"), description="", default_val=None).env_var


def main(argv: list[str]) -> int:
    """``streamlit run dashboard/app.py <argv>`` in this process."""
    logging.getLogger("streamlit.runtime.caching.cache_data_api").addFilter(_NoRuntimeNotice())
    from streamlit.web import cli as streamlit_cli

    from dashboard.components import warm

    warm.start()  # the pages' first queries, while the server starts and the browser connects
    sys.argv = ["streamlit", "run", str(APP), *with_defaults(argv, os.environ)]
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
