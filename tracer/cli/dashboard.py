"""``prunegate dashboard``: serve the Streamlit dashboard over a trace store.

Runs ``streamlit run <dashboard/app.py>`` as a child process bound to 127.0.0.1 unless told
otherwise, headless, without usage statistics, with the store path in ``$PRUNEGATE_STORE``. The
app file is located with ``importlib.util.find_spec("dashboard")`` so that tracer never imports
the dashboard package (arrows point dashboard -> tracer).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

from tracer.cli.checks import store_dir
from tracer.store import ENV_STORE, default_store_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501


def app_path() -> Path:
    """Where ``dashboard/app.py`` is, without importing the dashboard package."""
    spec = importlib.util.find_spec("dashboard")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the 'dashboard' package is not installed next to tracer "
                                "(pip install -e . in the repository)")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "app.py"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"dashboard/app.py not found in {list(spec.submodule_search_locations)}")


def streamlit_command(app: Path, host: str, port: int) -> list[str]:
    """The command line that serves ``app`` (the current interpreter's streamlit)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",
    ]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be an integer, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 1 and 65535, got {value}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "dashboard",
        help="serve the web dashboard (sessions, replay, violations, compare, live) over a trace store",
        description="Serve the Streamlit dashboard over a trace store. Binds 127.0.0.1 unless --host says "
        "otherwise. Stop it with Ctrl-C.",
    )
    parser.add_argument("--store", type=store_dir, help=f"trace store directory (default: ${ENV_STORE}, else ./prunegate-store)")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    store = Path(args.store) if args.store else default_store_path()
    try:
        app = app_path()
    except FileNotFoundError as exc:
        print(f"prunegate dashboard: {exc}", file=sys.stderr)
        return 2
    if store.exists() and not store.is_dir():
        print(f"prunegate dashboard: --store {store}: not a directory", file=sys.stderr)
        return 2
    if not store.exists():
        print(f"prunegate dashboard: {store} does not exist yet; the dashboard will show sessions as "
              "they are recorded there", file=sys.stderr)
    env = dict(os.environ)
    env[ENV_STORE] = str(store.resolve())
    cmd = streamlit_command(app, args.host, args.port)
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
