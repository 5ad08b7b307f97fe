#!/usr/bin/env bash
# Set up, record the sample traffic in data/ (and ../shared/traffic when present) into the embedded
# DuckDB store, replay it through several policies gated and ungated, and serve the dashboard.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/prunegate demo "$@"
