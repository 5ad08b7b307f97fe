"""Where things are, for test modules at any depth of tests/: the repository and the test data."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / "data" / "sessions"  # the sessions the demo imports (made by data/generate.py)
TEST_DATA = REPO / "tests" / "data"  # files shipped for the tests (sample traffic, OTel span files)
ARTIFACTS = REPO / "tests" / "artifacts"  # screenshots of the browser tests (gitignored)
