"""Fixtures shared by several test modules, and the markers of the quick loop.

Markers (registered in pyproject.toml): ``browser`` for the Playwright tests against a real
dashboard server, ``slow`` for tests that take 15 s or more on a loaded 2-CPU machine. The quick
loop leaves both out: ``.venv/bin/pytest -m "not browser and not slow"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.otel_memory import Recorder
from tests.traffic import TAU
from tracer.traffic.importers import Conversation, read_file


@pytest.fixture
def rec() -> Recorder:
    """A real OpenTelemetry SDK pipeline into memory, one per test."""
    return Recorder()


@pytest.fixture(scope="session")
def tau_sessions() -> list[Conversation]:
    """Every τ-bench dialogue of the traffic (full or sample) as the importer reads it, read once."""
    return [c for c in read_file(TAU) if isinstance(c, Conversation)]


@pytest.fixture(scope="module")
def browser(server: dict[str, Any]) -> Iterator[Any]:
    """Chromium for a browser test module, after its ``server`` fixture (which skips, or fails in
    CI, when /usr/bin/chromium is absent): tests/browser.py."""
    from tests.browser import chromium

    with chromium() as b:
        yield b


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    """A fresh tall page; ``page.dialogs`` collects every dialog (tests/browser.py)."""
    from tests.browser import new_page

    with new_page(browser) as pg:
        yield pg
