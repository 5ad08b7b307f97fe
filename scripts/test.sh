#!/usr/bin/env bash
# Set up everything (virtualenv, Debian chromium) and run every test. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --browser --phoenix  # Phoenix in its own venv: tests/tracer/spans/test_phoenix.py
echo "==> ruff"
.venv/bin/ruff check .
echo "==> mypy"
.venv/bin/mypy
echo "==> pytest"
exec .venv/bin/pytest -q -p no:cacheprovider "$@"
