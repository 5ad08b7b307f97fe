"""Fixtures shared by the tests of several tracer wings (spans, guard)."""

from __future__ import annotations

import pytest

from tests.otel_memory import Recorder


@pytest.fixture
def rec() -> Recorder:
    """A real OpenTelemetry SDK pipeline into memory, one per test."""
    return Recorder()
