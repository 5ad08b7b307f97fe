#!/usr/bin/env bash
# One-time (idempotent) set-up: a virtualenv with prunegate and its test tools, and, with
# --browser, Debian's chromium for the real-browser tests (Playwright cannot download browsers here)
# and Debian's prometheus (promtool and a real server for the metrics tests); with --phoenix, Arize
# Phoenix in a venv of its own (~/.cache/prunegate/phoenix-venv: it pins packages the test extra
# needs newer), which tests/tracer/spans/test_phoenix.py starts.
set -euo pipefail
cd "$(dirname "$0")/.."

want_browser=0
want_phoenix=0
for arg in "$@"; do
  case "$arg" in
    --browser) want_browser=1 ;;
    --phoenix) want_phoenix=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

debs=()
if [ "$want_browser" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  debs+=(chromium fonts-dejavu-core)  # the browser tests
fi
if [ "$want_browser" = 1 ] && { [ ! -x /usr/bin/prometheus ] || [ ! -x /usr/bin/promtool ]; }; then
  debs+=(prometheus)  # promtool checks the shipped alert rules; a real Prometheus scrapes prunegate (docs/metrics.md)
fi
if [ "${#debs[@]}" -gt 0 ]; then
  echo "==> installing Debian's ${debs[*]} (test tools)"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${debs[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.prunegate-installed
# pyproject.toml, setup.py (the C accelerator's build) or the accelerator itself newer: install again
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
   || [ tracer/store/_columns.c -nt "$stamp" ]; then
  echo "==> installing prunegate and its test dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi

if [ "$want_phoenix" = 1 ]; then
  phoenix_venv="$HOME/.cache/prunegate/phoenix-venv"
  if [ ! -x "$phoenix_venv/bin/phoenix" ]; then
    echo "==> installing arize-phoenix into $phoenix_venv (its own venv)"
    "$PY" -m venv "$phoenix_venv"
    "$phoenix_venv/bin/python" -m pip install -q arize-phoenix
  fi
fi
