"""The shipped alert rules and dashboard against Debian's real ``promtool`` and ``prometheus``.

A real Prometheus server (a temporary config, 127.0.0.1, a 1 s scrape interval, the shipped alert
rules) scrapes a guarded agent loop (``python -m tests.metered``) and ``prunegate serve --metrics``
while the test sends serve spans and forces a 429; the assertions are PromQL results read from
Prometheus's HTTP API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO
from tests.servers import free_port, wait_for_http

RULES = REPO / "deploy" / "prometheus" / "prunegate-alerts.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "prunegate-alerts.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "prunegate.json"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")


def need(tool: str | None, name: str) -> str:
    """The tool's path; without it skip with the reason (fail under CI, where setup.sh installs it)."""
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Debian's {name} is missing: bash scripts/setup.sh --browser installs it")
        pytest.skip(f"Debian's {name} is not installed (bash scripts/setup.sh --browser installs it)")
    return tool


def test_promtool_checks_the_alert_rules_and_their_unit_tests() -> None:
    promtool = need(PROMTOOL, "promtool (package prometheus)")
    check = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 4 rules found" in check.stdout, check.stdout + check.stderr
    unit = subprocess.run([promtool, "test", "rules", RULE_TESTS.name], capture_output=True, text=True, timeout=60,
                          cwd=RULE_TESTS.parent)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the Grafana dashboard, with its variables given values."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    return [e.replace("$__rate_interval", "20s").replace("$policy", ".*") for e in exprs]


def prometheus_names() -> set[str]:
    """The series names docs/metrics.md's metrics have in Prometheus (snake_case, unit, _total, _bucket...)."""
    docs = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    out = set()
    for name, kind, unit in re.findall(r"^\| `([a-z_.]+)` \| (\w+) \| `([^`]+)` \|", docs, re.M):
        base = name.replace(".", "_") + {"s": "_seconds", "By": "_bytes"}.get(unit, "")
        out |= {"counter": {base + "_total"}, "histogram": {base + s for s in ("_bucket", "_sum", "_count")}}.get(
            kind, {base})
    return out


def test_the_dashboard_is_grafana_json_over_documented_metrics() -> None:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert doc["uid"] == "prunegate" and doc["__inputs"][0]["pluginId"] == "prometheus"
    exprs = dashboard_queries()
    bare = [re.sub(r"\{[^}]*\}|\b(?:by|without) \([^)]*\)", "", e) for e in exprs]  # no label names left
    used = {m for e in bare for m in re.findall(r"\b[a-z_]+_[a-z_]+\b", e)} - {"histogram_quantile", "__rate_interval"}
    assert used and used <= prometheus_names(), f"not metrics of docs/metrics.md: {sorted(used - prometheus_names())}"


def query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
        body = json.load(resp)
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


def value(base: str, expr: str) -> float:
    found = query(base, expr)
    return float(found[0]["value"][1]) if found else float("nan")


def eventually(base: str, expr: str, ok: Any, seconds: float = 40.0) -> float:
    """The value of ``expr`` once ``ok(value)`` holds (Prometheus scrapes every second)."""
    deadline = time.monotonic() + seconds
    while True:
        v = value(base, expr)
        if ok(v):
            return v
        assert time.monotonic() < deadline, f"{expr} = {v}"
        time.sleep(0.5)


def spawn(args: list[str], log: Path, **kw: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT, **kw)


@pytest.fixture
def scraped(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A guarded agent loop, prunegate serve (--max-inflight 1) and Prometheus scraping both."""
    prometheus = need(PROMETHEUS, "prometheus")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    agent_port, serve_port, serve_metrics, prom_port = (free_port() for _ in range(4))
    procs = [spawn([sys.executable, "-m", "tests.metered", str(agent_port)], tmp_path / "agent.log", cwd=REPO, env=env),
             spawn([sys.executable, "-m", "tracer.cli", "serve", "--store", str(tmp_path / "store"), "--port",
                    str(serve_port), f"--metrics={serve_metrics}", "--max-inflight", "1", "--compact-every", "0"],
                   tmp_path / "serve.log", cwd=REPO, env=env)]
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: agent
    static_configs: [{{targets: ["127.0.0.1:{agent_port}"]}}]
  - job_name: serve
    static_configs: [{{targets: ["127.0.0.1:{serve_metrics}"]}}]
""", encoding="utf-8")
    procs.append(spawn([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                        f"--web.listen-address=127.0.0.1:{prom_port}"], tmp_path / "prometheus.log"))
    try:
        base = f"http://127.0.0.1:{prom_port}"
        for port, proc, what in ((agent_port, procs[0], "the agent loop"), (serve_metrics, procs[1], "serve"),
                                 (prom_port, procs[2], "prometheus")):
            path = "/-/ready" if what == "prometheus" else "/metrics"
            wait_for_http(f"http://127.0.0.1:{port}{path}", proc, what,
                          output=lambda w=what: (tmp_path / f"{w.split()[-1]}.log").read_text(errors="replace"))
        yield {"base": base, "serve": serve_port}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


ONE_SPAN = (b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c",'
            b'"spanId":"%s","name":"x","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}')


def post(port: int, body: bytes) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - loopback
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.mark.slow
def test_prometheus_scrapes_the_guard_and_serve_and_the_alerts_fire(scraped: dict[str, Any]) -> None:
    base, serve = scraped["base"], scraped["serve"]
    for i in range(3):
        assert post(serve, ONE_SPAN % f"b7ad6b716920333{i}".encode()) == 200
    # back-pressure for real: one request holds serve's only slot (its body never comes), the next gets 429
    # (once Prometheus has scraped the count at 0, so that increase() sees it rise)
    eventually(base, 'sum(prunegate_serve_refused_total{http_response_status_code="429"})', lambda v: v == 0)
    holder = socket.create_connection(("127.0.0.1", serve), timeout=10)
    holder.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
    time.sleep(0.5)
    assert post(serve, ONE_SPAN % b"b7ad6b7169203339") == 429
    inflight = eventually(base, "max(prunegate_serve_inflight)", lambda v: v == 1)
    holder.close()

    assert eventually(base, "sum(prunegate_serve_spans_total)", lambda v: v == 3) == 3
    assert value(base, "sum(prunegate_serve_requests_total)") == 3
    assert eventually(base, 'sum(prunegate_serve_refused_total{http_response_status_code="429"})',
                      lambda v: v >= 1) == 1
    assert inflight == value(base, "max(prunegate_serve_inflight_limit)") == 1
    assert value(base, "max(process_memory_usage_bytes{job='serve'})") > 10 << 20
    assert value(base, "max(prunegate_serve_conversations_pending)") == 0
    # the guarded agent loop: rates over the scrapes, ratios by label
    assert eventually(base, "sum(rate(prunegate_checks_total[20s]))", lambda v: v > 0) > 0
    assert value(base, "sum(prunegate_hard_ceiling_failures_total)") >= 1
    ratio = value(base, 'sum(prunegate_violations_caused_total{prunegate_gated="false"}) / '
                        'sum(prunegate_checks_total{prunegate_gated="false"})')
    assert ratio == 1.0  # the naive guard's one check orphans one result every pass of the loop
    assert value(base, 'sum(prunegate_violations_caused_total{prunegate_gated="false",'
                       'prunegate_violation_code="orphan_tool_result"})') >= 1
    assert value(base, 'sum(prunegate_violations_prevented_total{prunegate_prevention="grown"})') >= 1
    assert value(base, 'sum(prunegate_deferrals_total{prunegate_reason="pending_calls"})') >= 1
    assert value(base, "histogram_quantile(0.5, sum by (le) (rate(prunegate_check_duration_seconds_bucket[20s])))") > 0
    # every query of the shipped dashboard is valid PromQL with data behind it
    empty = [e for e in dashboard_queries() if not query(base, e)]
    assert not empty, f"dashboard queries with no data: {empty}"
    # the shipped alerts: the hard ceiling fires at once, the others are pending (they wait 'for' minutes)
    alerts = {}
    deadline = time.monotonic() + 30
    while len(alerts) < 4 and time.monotonic() < deadline:
        alerts = {r["metric"]["alertname"]: r["metric"]["alertstate"] for r in query(base, "ALERTS")}
        time.sleep(0.5)
    assert alerts == {"PrunegateHardCeilingFailures": "firing", "PrunegateShadowViolations": "pending",
                      "PrunegateGuardErrors": "pending", "PrunegateServeBackPressure": "pending"}
