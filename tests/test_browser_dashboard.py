"""The dashboard in a real browser: Debian's chromium driven by Playwright against a real
``prunegate dashboard`` server on 127.0.0.1, over a demo-like store.

Skipped (with the reason) only when /usr/bin/chromium is absent outside CI; in CI (``CI=true``)
a missing browser fails. Screenshots land in tests/artifacts/ (gitignored).
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
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard_fixtures import (
    HOSTILE,
    HOSTILE_NAME,
    demo_store,
    gated_session,
    orphan_session,
    recording,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
IN_CI = os.environ.get("CI", "").lower() == "true"

pytestmark = pytest.mark.browser


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    if IN_CI:
        pytest.fail(f"{CHROMIUM} is missing in CI (CI=true): the browser tests must run there")
    pytest.skip(f"{CHROMIUM} is not installed (apt install chromium); browser tests need Debian's chromium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prunegate() -> list[str]:
    script = Path(sys.executable).parent / "prunegate"
    if script.exists():
        return [str(script)]
    found = shutil.which("prunegate")
    return [found] if found else [sys.executable, "-m", "tracer.cli"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A demo-like store and a real ``prunegate dashboard`` serving it on a free local port."""
    _require_chromium()
    path = tmp_path_factory.mktemp("browser") / "store"
    info = demo_store(path, per_file=2)
    with recording(path) as provider:  # written last: the most recent session, named with HTML
        gated_session(provider)
        orphan_session(provider, name=HOSTILE_NAME)
    port = _free_port()
    log = open(tmp_path_factory.mktemp("logs") / "dashboard.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*_prunegate(), "dashboard", "--store", str(path), "--host", "127.0.0.1",
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
        yield {"base": base, "info": info, "path": path, "proc": proc}
    finally:
        proc.send_signal(signal.SIGTERM)  # prunegate passes it on to streamlit
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser(server: dict[str, Any]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 2400})
    pg = context.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
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


def wait_for_url(pg: Any, part: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while part not in pg.url and time.monotonic() < deadline:
        time.sleep(0.25)
    assert part in pg.url, f"expected {part!r} in {pg.url}"


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


def open_page(pg: Any, server: dict[str, Any], path: str, charts: int = 0) -> None:
    pg.goto(server["base"] + path)
    settle(pg, charts=charts)


def assert_literal_hostile_text(pg: Any, where: str, expect: str) -> None:
    """``expect`` (recorded HTML) is visible as literal text; nothing it holds became markup."""
    assert pg.dialogs == [], f"{where}: a dialog fired: {pg.dialogs}"
    shown = pg.get_by_text(expect, exact=False)
    assert shown.count() > 0 and any(shown.nth(i).is_visible() for i in range(shown.count())), \
        f"{where}: {expect!r} is not visible as text"
    assert pg.locator("b", has_text="bold").count() == 0, f"{where}: a <b> element was created from recorded text"
    assert pg.locator("script", has_text="alert(1)").count() == 0, f"{where}: a <script> element was created"


def pick_option(pg: Any, label: str, option_text: str) -> None:
    """Choose an option of the Streamlit selectbox labelled ``label``."""
    pg.get_by_role("combobox", name=label, exact=True).click()
    pg.get_by_role("option").filter(has_text=option_text).first.click()
    settle(pg)


# ----------------------------------------------------------------------------- tests
def test_browser_opens_a_violation_and_shows_its_causal_eviction(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/")
    assert page.get_by_role("heading", name="Sessions").is_visible()
    click_until(page, page.get_by_role("link", name="Violations").first, lambda: "/violations" in page.url,
                "open the Violations page")
    assert page.get_by_role("heading", name="Violations").is_visible()
    pick_option(page, "Violation", "s-orphan · step 8 · orphan_tool_result")
    settle(page, charts=2)
    assert page.get_by_text("orphan_tool_result at step 8 of session s-orphan").is_visible()
    assert page.get_by_role("heading", name="Causal eviction").is_visible()
    cause = page.get_by_text("Caused by prunegate.prune at step 5 (budget check #1): policy salience, ungated, "
                             "evicted m3")
    assert cause.is_visible()
    assert page.get_by_text("before the prune (step 4)").count() > 0  # the context before/after charts
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "violation-causal-eviction.png"), full_page=True)
    # and the link to the replay at the prune's step
    click_until(page, page.get_by_role("link", name="Open in replay at step 5"), lambda: "/replay" in page.url,
                "open the replay at the prune")
    wait_for_url(page, "step=5")
    assert page.get_by_role("heading", name="Replay").is_visible()
    page.screenshot(path=str(ARTIFACTS / "replay-at-prune.png"), full_page=True)


def test_browser_renders_recorded_html_as_text_on_every_page(server: dict[str, Any], page: Any) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    # Sessions: search the hostile name; the picker shows it literally
    open_page(page, server, "/")
    page.get_by_label("Search id or name").fill("bold")
    page.get_by_label("Search id or name").press("Enter")
    settle(page)
    assert_literal_hostile_text(page, "sessions", HOSTILE_NAME)
    page.screenshot(path=str(ARTIFACTS / "hostile-sessions.png"), full_page=True)

    # Replay: the session's name and the tool result holding the script, as text
    open_page(page, server, "/replay?session=s-orphan&step=7", charts=2)
    assert_literal_hostile_text(page, "replay", HOSTILE_NAME)
    assert_literal_hostile_text(page, "replay content", "<script>alert(1)</script> and <b>bold</b>")
    page.screenshot(path=str(ARTIFACTS / "hostile-replay.png"), full_page=True)

    # Violations: the evicted turn's recorded content
    open_page(page, server, "/violations?session=s-orphan", charts=2)
    assert_literal_hostile_text(page, "violations", HOSTILE)
    page.screenshot(path=str(ARTIFACTS / "hostile-violations.png"), full_page=True)

    # Compare: recorded session names in the picker and the chart labels
    open_page(page, server, "/compare", charts=3)
    assert_literal_hostile_text(page, "compare", "trip <b>bold</b>")
    page.screenshot(path=str(ARTIFACTS / "hostile-compare.png"), full_page=True)

    # Live: the most recent session (named with HTML) is followed by default
    open_page(page, server, "/live", charts=1)
    assert_literal_hostile_text(page, "live", HOSTILE_NAME)
    page.screenshot(path=str(ARTIFACTS / "hostile-live.png"), full_page=True)
    assert page.dialogs == []


def test_browser_replay_steps_and_plays(server: dict[str, Any], page: Any) -> None:
    open_page(page, server, "/replay?session=s-gated&step=0", charts=2)
    click_until(page, page.get_by_role("button", name="Next deferral"), lambda: "step=5" in page.url,
                "jump to the next deferral")
    open_page(page, server, "/replay?session=s-gated&step=8", charts=2)
    switch = page.get_by_role("switch", name="Play")  # the input is hidden; its label takes the click
    click_until(page, page.get_by_text("Play", exact=True), lambda: switch.is_checked() or "step=8" not in page.url,
                "press Play")
    thumb = page.locator('[data-testid="stSliderThumbValue"]')
    deadline = time.monotonic() + 60  # Play reaches the last step, then switches itself off
    while time.monotonic() < deadline and (switch.is_checked() or thumb.inner_text().strip() != "10"):
        time.sleep(0.5)
    assert thumb.inner_text().strip() == "10", f"Play stopped at step {thumb.inner_text()} ({page.url})"
    assert not switch.is_checked()
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "replay-played.png"), full_page=True)
