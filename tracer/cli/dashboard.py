"""``prunegate dashboard``: serve the Streamlit dashboard over a trace store.

Runs ``python -m dashboard`` (which is ``streamlit run dashboard/app.py``) as a child process bound
to 127.0.0.1 unless told otherwise, headless, without usage statistics, with the store path in
``$PRUNEGATE_STORE``. The child imports the dashboard; tracer never does (arrows point
dashboard -> tracer).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from tracer.cli import add_command, options
from tracer.errors import CommandError
from tracer.store.settings import STORE_ENV, BucketURL, resolve_store

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501


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


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "dashboard",
        description="Serve the Streamlit dashboard over a trace store. Binds 127.0.0.1 unless --host says "
        "otherwise. Stop it with Ctrl-C.",
    )
    options.add_store(parser)
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=options.port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    store = resolve_store(args.store)
    if not isinstance(store, BucketURL) and store.exists() and not store.is_dir():
        raise CommandError(f"--store {store}: not a directory")
    if not store.exists():
        print(f"prunegate dashboard: {store} does not exist yet; the dashboard will show sessions as "
              "they are recorded there", file=sys.stderr)
    env = dict(os.environ)
    env[STORE_ENV] = str(store.resolve())
    cmd = dashboard_command(args.host, args.port)
    print(f"prunegate dashboard: serving {store} on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
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
