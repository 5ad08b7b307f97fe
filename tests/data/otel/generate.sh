#!/usr/bin/env bash
# Rebuild the OTLP JSON span files of tests/data/otel with the instrumentations pinned in
# VERSIONS.md, each group in a throw-away venv (they cannot share one). Needs PyPI; ~2 minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="${OTEL_FIXTURE_VENVS:-$(mktemp -d)}"
common=(openai==3.57.0 anthropic==2.16.0 httpx==0.29.0)
sdk_new="opentelemetry-sdk==1.45.2 opentelemetry-api==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2"
# the older instrumentations need the Events API, gone from opentelemetry-sdk 1.39
sdk_old="opentelemetry-sdk==1.38.0 opentelemetry-api==1.38.0 opentelemetry-exporter-otlp-proto-common==1.38.0 opentelemetry-instrumentation==0.59b0"
declare -A groups=(
  [current]="$sdk_new opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==1.1b0 openinference-instrumentation-openai==0.1.66 openinference-instrumentation-anthropic==3.1.0 opentelemetry-instrumentation-openai==0.62.4 opentelemetry-instrumentation-anthropic==0.62.4"
  [openllmetry-legacy]="$sdk_old opentelemetry-instrumentation-openai==0.47.5 opentelemetry-instrumentation-anthropic==0.47.5"
  [otel-legacy]="$sdk_old opentelemetry-instrumentation-openai-v2==2.1b0"
)
for group in current openllmetry-legacy otel-legacy; do
  venv="$work/$group"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q --pre "${common[@]}" ${groups[$group]}
  "$venv/bin/python" "$here/generate.py" --group "$group" --out "$here"
done
