"""What the browser tests share: Debian's chromium under Playwright, a real ``prunegate dashboard``
server on a free 127.0.0.1 port, and the waits that make clicks on a Streamlit page reliable.

Used by the test_browser_*.py modules beside it: each defines a module-scoped ``server`` fixture (its
store served by :func:`dashboard_server`); the ``browser`` and ``page`` fixtures (conftest.py here)
build on it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IN_CI = os.environ.get("CI", "").lower() == "true"


def require_chromium() -> None:
    """Skip (saying why) when /usr/bin/chromium is absent, except in CI, where that fails."""
    if CHROMIUM.exists():
        return
    if IN_CI:
        pytest.fail(f"{CHROMIUM} is missing in CI (CI=true): the browser tests must run there")
    pytest.skip(f"{CHROMIUM} is not installed (apt install chromium); browser tests need Debian's chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prunegate_command() -> list[str]:
    script = Path(sys.executable).parent / "prunegate"
    if script.exists():
        return [str(script)]
    found = shutil.which("prunegate")
    return [found] if found else [sys.executable, "-m", "tracer.cli"]


@contextmanager
def dashboard_server(store: Path, logs: Path) -> Iterator[dict[str, Any]]:
    """``prunegate dashboard`` over ``store`` until it answers its health check; stopped (SIGTERM,
    then SIGKILL of the group it started) on exit. Yields ``base`` (URL) and ``proc``."""
    port = free_port()
    log = open(logs / "dashboard.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*prunegate_command(), "dashboard", "--store", str(store), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as resp:
                    if resp.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(f"the dashboard did not start: {Path(log.name).read_text()[-2000:]}")
            time.sleep(0.3)
        yield {"base": base, "proc": proc}
    finally:
        proc.send_signal(signal.SIGTERM)  # prunegate passes it on to streamlit
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started
            proc.wait()
        log.close()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Debian chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def new_page(browser: Any) -> Iterator[Any]:
    """A tall page in a fresh context; ``pg.dialogs`` collects (and dismisses) every dialog."""
    context = browser.new_context(viewport={"width": 1500, "height": 2400})
    pg = context.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    try:
        yield pg
    finally:
        context.close()


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


def address(pg: Any) -> str:
    """The address bar (history.replaceState can run ahead of Playwright's ``pg.url``)."""
    return str(pg.evaluate("location.href"))


def wait_for_url(pg: Any, part: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while part not in address(pg) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert part in address(pg), f"expected {part!r} in {address(pg)}"


def click_until(pg: Any, target: Any, done: Any, what: str, tries: int = 4) -> None:
    """Click ``target`` until ``done()`` holds: a click that lands while Streamlit is re-running
    the script can be dropped by the page, so the effect is what is checked, not the click."""
    for attempt in range(tries):
        if attempt:
            print(f"click_until {what}: retry {attempt}")  # noqa: T201 - shows in -s runs
        if target.count():
            target.click()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if done():
                settle(pg)
                return
            time.sleep(0.25)
    raise AssertionError(f"{what}: no effect after {tries} clicks (url {pg.url})")


def open_page(pg: Any, base: str, path: str, charts: int = 0) -> None:
    pg.goto(base + path)
    settle(pg, charts=charts)


def pick_option(pg: Any, label: str, option_text: str) -> None:
    """Choose an option of the Streamlit selectbox labelled ``label``."""
    pg.get_by_role("combobox", name=label, exact=True).click()
    pg.get_by_role("option").filter(has_text=option_text).first.click()
    settle(pg)


def assert_literal_text(pg: Any, where: str, expect: str) -> None:
    """``expect`` (recorded HTML) is visible as literal text; nothing it holds became markup."""
    assert pg.dialogs == [], f"{where}: a dialog fired: {pg.dialogs}"
    shown = pg.get_by_text(expect, exact=False)
    assert shown.count() > 0 and any(shown.nth(i).is_visible() for i in range(shown.count())), \
        f"{where}: {expect!r} is not visible as text"
    assert pg.locator("b", has_text="bold").count() == 0, f"{where}: a <b> element was created from recorded text"
    assert pg.locator("script", has_text="alert(1)").count() == 0, f"{where}: a <script> element was created"
