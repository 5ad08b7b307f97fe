"""Fixtures of the lab tests (replay, compare)."""

from __future__ import annotations

import pytest

from tests.traffic import TAU
from tracer.traffic import Conversation, read_file


@pytest.fixture(scope="session")
def tau_sessions() -> list[Conversation]:
    """Every τ-bench dialogue of the traffic (full or sample) as the importer reads it, read once."""
    return [c for c in read_file(TAU) if isinstance(c, Conversation)]
