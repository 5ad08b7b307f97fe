"""Where the benchmarks read traffic: the real recordings beside the repository, else the shipped sessions.

``../shared/traffic`` (τ-bench airline dialogues, pydantic-ai cassettes; MIT) sits beside a
development checkout; ``data/sessions`` ships with the repository. Every benchmark prints which one
it read, so a figure says what it was measured on.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAFFIC = ROOT.parent / "shared" / "traffic"
TAU_DIR = TRAFFIC / "tau-bench-gpt4o-airline"
TAU_FILE = TAU_DIR / "gpt-4o-airline.json"
SESSIONS = ROOT / "data" / "sessions"


def tau_or_sessions() -> Path:
    """The τ-bench folder when the recordings sit beside the repository, else ``data/sessions``."""
    return TAU_DIR if TAU_DIR.is_dir() else SESSIONS
