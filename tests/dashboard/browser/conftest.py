"""The ``browser`` and ``page`` fixtures of the browser tests (their helpers: helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def browser(server: dict[str, Any]) -> Iterator[Any]:
    """Chromium for a browser test module, after its ``server`` fixture (which skips, or fails in
    CI, when /usr/bin/chromium is absent): helpers.py."""
    from tests.dashboard.browser.helpers import chromium

    with chromium() as b:
        yield b


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    """A fresh tall page; ``page.dialogs`` collects every dialog (helpers.py)."""
    from tests.dashboard.browser.helpers import new_page

    with new_page(browser) as pg:
        yield pg
