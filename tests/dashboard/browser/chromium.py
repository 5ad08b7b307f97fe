"""What the browser tests share: Debian's chromium, a real ``prunegate dashboard`` server, and the
waits that make Playwright's clicks land on a Streamlit page (fixtures ``browser`` and ``page`` are
in this folder's conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port, prunegate_command, wait_for_http

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IN_CI = os.environ.get("CI", "").lower() == "true"


def require_chromium() -> None:
    """Skip (with the reason) without /usr/bin/chromium, except in CI (``CI=true``), where it fails."""
    if CHROMIUM.exists():
        return
    if IN_CI:
        pytest.fail(f"{CHROMIUM} is missing in CI (CI=true): the browser tests must run there")
    pytest.skip(f"{CHROMIUM} is not installed (apt install chromium); browser tests need Debian's chromium")


@contextmanager
def dashboard_server(store: Path, logs: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A real ``prunegate dashboard`` over ``store`` on a free local port: its base URL and process,
    stopped (SIGTERM, then SIGKILL of its process group) on exit. Its output goes to ``logs``."""
    port = free_port()
    with open(logs / "dashboard.log", "w") as log:
        proc = subprocess.Popen([*prunegate_command(), "dashboard", "--store", str(store), "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"

        def output() -> str:
            log.flush()
            return (logs / "dashboard.log").read_text()

        try:
            wait_for_http(base + "/_stcore/health", proc, "the dashboard", seconds=60, expect=b"ok", output=output)
            yield base, proc
        finally:
            proc.send_signal(signal.SIGTERM)  # prunegate passes it on to streamlit
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the group we started
                proc.wait()


def settle(pg: Any, timeout: float = 30.0, charts: int = 0) -> None:
    """Wait until Streamlit is connected and idle, and ``charts`` Plotly charts are drawn (Plotly's
    code loads lazily, seconds after the script finished; clicks landing before that get lost)."""
    pg.wait_for_selector("h1", timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        idle = pg.locator('[data-testid="stApp"][data-test-script-state="notRunning"]'
                          '[data-test-connection-state="CONNECTED"]').count()
        drawn = pg.locator('[data-testid="stPlotlyChart"] .js-plotly-plot').count()
        quiet = quiet + 1 if idle and drawn >= charts else 0
        if quiet >= 3:
            return
        time.sleep(0.2)


def click_until(pg: Any, target: Any, done: Any, what: str, tries: int = 4, shows: Any = None) -> None:
    """Click ``target`` until ``done()`` holds: a click that lands while Streamlit is re-running
    the script can be dropped by the page, so the effect is what is checked, not the click.
    ``shows``: a locator the new page must then show (the address bar changes before the page
    re-runs, so a URL in ``done`` does not mean the page has been drawn)."""
    for attempt in range(tries):
        if attempt:
            print(f"click_until {what}: retry {attempt}")  # noqa: T201 - shows in -s runs
        if target.count():
            target.click()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if done():
                settle(pg)
                if shows is not None:
                    shows.wait_for(timeout=30_000)
                return
            time.sleep(0.25)
    raise AssertionError(f"{what}: no effect after {tries} clicks (url {pg.url})")
