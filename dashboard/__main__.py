"""``python -m dashboard [streamlit options]``: serve this app with Streamlit.

``prunegate dashboard`` runs this in a child process, so that tracer never imports (or searches
for) the dashboard package: arrows point dashboard -> tracer. The options are Streamlit's
(``--server.address``, ``--server.port``, ...); the store comes from ``$PRUNEGATE_STORE``.
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")


def main(argv: list[str]) -> int:
    """``streamlit run dashboard/app.py <argv>`` in this process."""
    from streamlit.web import cli as streamlit_cli

    from dashboard.components import warm

    warm.start()  # the pages' first queries, while the server starts and the browser connects
    sys.argv = ["streamlit", "run", str(APP), *argv]
    try:
        streamlit_cli.main()  # a click command: it exits
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
