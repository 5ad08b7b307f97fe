"""The README's two commands, run exactly as the README gives them.

A newcomer copies the first code block of README.md: ``bash scripts/demo.sh`` and
``bash scripts/test.sh``. These tests read that block, check it still holds those two commands, and
run each line verbatim from the repository root (through the shell, as typed):

- the demo until the dashboard answers on 127.0.0.1:8501 and its page renders in Debian's chromium
  without an exception, then the demo's process group is stopped. Only the environment differs:
  ``PRUNEGATE_STORE`` points the demo's store at a temporary directory;
- the test command with ``PYTEST_ADDOPTS`` narrowing pytest to one tiny test of this file, so it
  runs its set-up, ruff, mypy and pytest without running the suite (or itself) again.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.paths import ARTIFACTS, REPO

README_COMMANDS = ["bash scripts/demo.sh", "bash scripts/test.sh"]
DASHBOARD = "http://127.0.0.1:8501"  # where the README says the demo serves
TINY_TEST = "tests/test_readme_commands.py::test_readme_first_block_is_the_two_commands"


def readme_commands() -> list[str]:
    """The command lines of README.md's first fenced code block (comments after ``#`` dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
    assert block is not None, "README.md has no fenced code block"
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def test_readme_first_block_is_the_two_commands() -> None:
    assert readme_commands() == README_COMMANDS


def _port_free(port: int) -> bool:
    """Nothing accepts connections on 127.0.0.1:``port`` (a closed port may linger in TIME_WAIT)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def _stop_group(proc: subprocess.Popen) -> None:
    """Stop the command and everything it started (its own process group): SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:  # children left behind by a command that exited before its group
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_readme_demo_command_serves_a_dashboard_that_renders(tmp_path: Path) -> None:
    from tests.dashboard.browser.chromium import CHROMIUM, CHROMIUM_ARGS, require_chromium, settle

    require_chromium()
    line = readme_commands()[0]
    assert line == "bash scripts/demo.sh"
    assert _port_free(8501), "127.0.0.1:8501 is taken: the README's demo serves there; stop what listens on it"
    env = {**os.environ, "PRUNEGATE_STORE": str(tmp_path / "store")}
    env.pop("PYTEST_ADDOPTS", None)
    log_path = tmp_path / "demo.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(line, shell=True, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 1500  # a fresh machine's set-up takes minutes before the build
        while True:
            try:
                with urllib.request.urlopen(DASHBOARD + "/_stcore/health", timeout=2) as resp:  # noqa: S310
                    if resp.read().strip() == b"ok":
                        break
            except OSError:
                pass
            assert proc.poll() is None, f"the demo exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no dashboard after 1500 s:\n{log_path.read_text()[-3000:]}"
            time.sleep(1)
        output = log_path.read_text()
        assert "serving the dashboard on http://127.0.0.1:8501" in output, output[-3000:]
        assert (tmp_path / "store" / "spans.duckdb").exists(), "the demo served without building its store"
        sweeps = list((tmp_path / "store" / "sweeps").glob("*.json"))
        assert sweeps, "the demo stored no sweep: the dashboard's Frontier would be empty"

        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                pg = browser.new_page(viewport={"width": 1500, "height": 1400})
                errors: list[str] = []
                pg.on("pageerror", lambda exc: errors.append(str(exc)))
                pg.goto(DASHBOARD, timeout=60_000)
                settle(pg, timeout=60)
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                pg.screenshot(path=str(ARTIFACTS / "readme-demo.png"), full_page=True)
                shown = pg.locator('[data-testid="stException"]')
                assert shown.count() == 0, f"the page shows an exception: {shown.first.inner_text()[:2000]}"
                assert errors == [], f"the page raised in the browser: {errors}"
                assert pg.locator("h1").first.inner_text().strip(), "the page has no title"
                # The store the demo built is the one served, with its sessions and spans counted.
                caption = pg.get_by_text(re.compile(r"^[\d,]+ sessions · [\d,]+ spans$")).first
                caption.wait_for(timeout=30_000)
                sessions = int(caption.inner_text().split()[0].replace(",", ""))
                assert sessions > 0, f"the demo's dashboard shows no sessions: {caption.inner_text()}"
            finally:
                browser.close()
    finally:
        _stop_group(proc)
    deadline = time.monotonic() + 15
    while not _port_free(8501) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _port_free(8501), "the dashboard still answers on 8501 15 s after the demo's process group was stopped"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_readme_test_command_runs_setup_ruff_mypy_and_pytest(tmp_path: Path) -> None:
    line = readme_commands()[1]
    assert line == "bash scripts/test.sh"
    env = {**os.environ, "PYTEST_ADDOPTS": TINY_TEST}
    done = subprocess.run(line, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=1700,
                          start_new_session=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    for step in ("==> ruff", "==> mypy", "==> pytest"):
        assert step in output, f"{step!r} not in the test command's output:\n{output[-4000:]}"
    assert re.search(r"^1 passed\b", output, flags=re.M), output[-2000:]
