"""Starting the dashboard's server process, for ``prunegate dashboard`` and ``prunegate demo``.

Runs ``python -m dashboard`` (which is ``streamlit run dashboard/app.py``) as a child process bound
to 127.0.0.1 unless told otherwise, headless, without usage statistics, with the store path in
``$PRUNEGATE_STORE``. The child imports the dashboard; tracer never does (arrows point
dashboard -> tracer).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tracer.contract.settings import STORE_ENV
from tracer.errors import CommandError
from tracer.store import BucketURL, resolve_store

DEFAULT_PORT = 8501
COMPACT_AT = 16
"""Pending segments from which the command compacts the store before serving it: the Sessions page
reads the session catalog compaction keeps, and rebuilds those rows from segments otherwise (seconds
at 10,000 sessions). Below this a compaction would gain nothing a reader would notice."""


def dashboard_command(host: str, port: int) -> list[str]:
    """The command line that serves the dashboard (this interpreter's ``python -m dashboard``)."""
    return [
        sys.executable, "-m", "dashboard",
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",
    ]


def compact_first(path: Path) -> None:
    """Fold a store's pending segments into its database before serving it, saying so on stderr. A
    store that cannot be compacted (read-only, busy) is served as it is, with one line saying why."""
    from tracer.errors import TracerError
    from tracer.store import Store

    store = Store(path)
    pending = len(store.pending_segments())
    if pending < COMPACT_AT:
        return
    print(f"prunegate dashboard: compacting {pending} segments of {path} first (--no-compact to skip)",
          file=sys.stderr, flush=True)
    try:
        result = store.compact(timeout=30.0)
    except (TracerError, OSError) as exc:
        print(f"prunegate dashboard: not compacted ({exc}); serving the segments as they are", file=sys.stderr)
        return
    if result.busy:
        print(f"prunegate dashboard: not compacted ({result.busy}); serving the segments as they are",
              file=sys.stderr)
    else:
        print(f"prunegate dashboard: compacted {result.segments_compacted} segments "
              f"({result.rows_inserted} spans) into {path}", file=sys.stderr)


def serve_dashboard(store_arg: str | None, host: str, port: int, *, compact: bool) -> int:
    """Serve the dashboard over the store ``store_arg`` names until it stops; its exit status."""
    store = resolve_store(store_arg)
    if not isinstance(store, BucketURL) and store.exists() and not store.is_dir():
        raise CommandError(f"--store {store}: not a directory")
    if not store.exists():
        print(f"prunegate dashboard: {store} does not exist yet; the dashboard will show sessions as "
              "they are recorded there", file=sys.stderr)
    if compact and not isinstance(store, BucketURL) and store.is_dir():
        compact_first(store)
    env = dict(os.environ)
    env[STORE_ENV] = str(store.resolve())
    cmd = dashboard_command(host, port)
    print(f"prunegate dashboard: serving {store} on http://{host}:{port}", file=sys.stderr, flush=True)
    child = subprocess.Popen(cmd, env=env)
    # Stopping us stops the server: SIGTERM is passed on (Ctrl-C reaches both through the terminal).
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: child.send_signal(signum))
    try:
        return child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        try:
            return child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            return child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
