"""Fixtures of the browser tests: one chromium per module, a fresh page per test.

Each test module defines its own ``server`` fixture (the store it serves); ``browser`` starts once
that server is up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.browser.chromium import CHROMIUM, CHROMIUM_ARGS


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
    """A page of a new browser context; ``page.dialogs`` lists the messages of dialogs that fired
    (each is dismissed, as Playwright does by default)."""
    context = browser.new_context(viewport={"width": 1500, "height": 2400})
    pg = context.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        context.close()
