"""A store exported to a real Arize Phoenix arrives whole and reads well there.

Phoenix (PyPI ``arize-phoenix``, the ``phoenix`` extra) is started by the test on 127.0.0.1 with
telemetry off and a temporary working directory; what arrived is counted from Phoenix's own APIs
(REST ``/v1/projects/{name}/spans``, GraphQL sessions). Phoenix pins ``anthropic<2`` while the
test extra's examples use anthropic 2, so Phoenix may live in a venv of its own: set
``PRUNEGATE_PHOENIX`` to its ``phoenix`` executable (else the one beside this interpreter, else the
one in ``~/.cache/prunegate/phoenix-venv``, else on PATH is used), or ``PRUNEGATE_PHOENIX_URL`` to
the base URL of a Phoenix already running.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.paths import SESSIONS, TEST_DATA
from tests.servers import free_port, wait_for_http
from tracer.cli import main
from tracer.spans.openinference import first_user_text, last_answer_text
from tracer.store import Store
from tracer.traffic import load_conversations

pytestmark = pytest.mark.slow

WEATHER = TEST_DATA / "otel" / "openllmetry-anthropic.jsonl"
PROJECT = "prunegate-test"


OWN_VENV = Path.home() / ".cache" / "prunegate" / "phoenix-venv"  # Phoenix in a venv of its own (see the docstring)


def _phoenix_bin() -> str | None:
    env = os.environ.get("PRUNEGATE_PHOENIX")
    if env:
        return env
    for candidate in (Path(sys.executable).with_name("phoenix"), OWN_VENV / "bin" / "phoenix"):
        if candidate.exists():
            return str(candidate)
    return shutil.which("phoenix")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback
        return json.loads(r.read())


def _graphql(base: str, query: str) -> Any:
    req = urllib.request.Request(f"{base}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310 - loopback
        out = json.loads(r.read())
    assert "errors" not in out, out
    return out["data"]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    running = os.environ.get("PRUNEGATE_PHOENIX_URL")  # a Phoenix already started (it may take minutes to start)
    if running:
        yield running.rstrip("/")
        return
    binary = _phoenix_bin()
    if binary is None:
        pytest.skip(f"arize-phoenix is not installed (bash scripts/setup.sh --phoenix puts it in {OWN_VENV}; "
                    "or pip install -e '.[phoenix]', or set PRUNEGATE_PHOENIX)")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = free_port(), free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc)}
    log = open(work / "phoenix.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/healthz", proc, "Phoenix", seconds=180, pause=1,
                      output=lambda: (work / "phoenix.log").read_text())
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """Imported sessions (with content) and their ungated replays (content captured, violations)."""
    path = tmp_path_factory.mktemp("store") / "s"
    assert main(["import", str(SESSIONS / "anthropic-parallel.jsonl"), str(WEATHER), "--store", str(path)]) == 0
    assert main(["replay", "--policy", "salience", "--ungated", "--budget", "1500", "--capture-content",
                 "--store", str(path)]) == 0
    return Store(path)


def _phoenix_spans(base: str, project: str = PROJECT) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = _get(f"{base}/v1/projects/{project}/spans?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
        out.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return out


@pytest.fixture(scope="module")
def exported(phoenix: str, store: Store) -> tuple[dict[str, Any], int]:
    """The store exported once into PROJECT, once Phoenix has ingested it: (export's JSON report,
    Phoenix's record count). Once only: Phoenix keeps a span id once across projects (a second export
    of the same spans into another project is accepted and dropped, so waiting for it never ends)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["export", "--store", str(store.path), "--otlp-endpoint", phoenix, "--project", PROJECT, "--json"])
    assert code == 0, out.getvalue()
    n = store.query("SELECT count(*) AS n FROM spans")[0]["n"]
    deadline = time.monotonic() + 90  # Phoenix ingests in the background (seconds here)
    count = -1
    while time.monotonic() < deadline:
        projects = _graphql(phoenix, "{ projects { edges { node { name recordCount } } } }")["projects"]["edges"]
        count = next((p["node"]["recordCount"] for p in projects if p["node"]["name"] == PROJECT), 0)
        if count >= n:
            break
        time.sleep(1)
    return json.loads(out.getvalue()), count


def test_an_exported_store_arrives_whole_in_phoenix_and_reads_well(phoenix, store, exported) -> None:
    stored = {(r["trace_id"], r["span_id"]) for r in store.query("SELECT trace_id, span_id FROM spans")}
    result, count = exported
    assert result["failed"] == 0 and result["sent"] == len(stored)
    spans = _phoenix_spans(phoenix)
    ids = [(s["context"]["trace_id"], s["context"]["span_id"]) for s in spans]
    assert count == len(ids) == len(set(ids)) == len(stored)  # every span, once
    assert set(ids) == stored

    kinds: dict[str, set[str]] = {}
    for s in spans:
        kinds.setdefault(s["name"].split(" ")[0], set()).add(s["span_kind"])
    assert kinds["prunegate.session"] == kinds["prunegate.prune"] == kinds["prunegate.budget_check"] == {"CHAIN"}
    assert kinds["prunegate.violation"] == kinds["prunegate.message"] == {"CHAIN"}
    assert kinds["chat"] == {"LLM"}
    assert not any("UNKNOWN" in k for name, k in kinds.items() if name.startswith("prunegate."))

    # sessions: first input and last output, as the recorded conversations have them
    data = _graphql(phoenix, "{ projects { edges { node { name sessions(first: 1000) { edges { node { "
                             "sessionId firstInput { value } lastOutput { value } } } } } } } }")
    node = next(p["node"] for p in data["projects"]["edges"] if p["node"]["name"] == PROJECT)
    shown = {e["node"]["sessionId"]: e["node"] for e in node["sessions"]["edges"]}
    convs = load_conversations(store, None, sources=("import", "replay"))
    imported = [c for c in convs if not (c.session_id or "").startswith("replay-")]
    assert len(shown) == len(convs) and imported
    for conv in imported:
        pairs = [(m.role, " ".join(b.text or "" for b in m.blocks if b.type == "text").strip()) for m in conv.messages]
        assert shown[conv.session_id]["firstInput"]["value"] == first_user_text(pairs)
        assert shown[conv.session_id]["lastOutput"]["value"] == last_answer_text(pairs)

    # Phoenix keeps no span links: the violation's cause is in its attributes, and it is there
    by_id = {s["context"]["span_id"]: s for s in spans}
    caused = [s for s in spans if s["name"] == "prunegate.violation"
              and s["attributes"].get("prunegate.violation.cause_span_id")]
    assert caused
    assert all(by_id[s["attributes"]["prunegate.violation.cause_span_id"]]["name"] == "prunegate.prune" for s in caused)


def _seconds(span: dict[str, Any]) -> float:
    """A span's duration from Phoenix's own timestamps."""
    from datetime import datetime

    return (datetime.fromisoformat(span["end_time"]) - datetime.fromisoformat(span["start_time"])).total_seconds()


def _attr(attributes: dict[str, Any], dotted: str) -> Any:
    """An attribute as Phoenix's REST API returns it, flat (``a.b.c``) or nested (``{"a": {"b": ...}}``)."""
    if dotted in attributes:
        return attributes[dotted]
    node: Any = attributes
    for part in dotted.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def test_exported_llm_spans_show_their_input_durations_status_and_tree_in_phoenix(phoenix, store, exported) -> None:
    """What a user looks at on an LLM span in Phoenix: the request's messages, its duration, its
    status (ERROR for an invalid request), and where it sits in the trace."""
    stored = {r["span_id"]: r for r in store.query(
        "SELECT span_id, parent_span_id, name, status_code, end_time_ns - start_time_ns AS ns, "
        "attributes->>'gen_ai.input.messages' AS inp FROM spans")}
    spans = _phoenix_spans(phoenix)
    assert len(spans) == len(stored)
    by_id = {s["context"]["span_id"]: s for s in spans}
    llm = [s for s in spans if s["span_kind"] == "LLM" and s["name"].startswith("chat ")]  # prunegate's, not
    assert len(llm) > 10  # the imported file's own OpenLLMetry spans (stored as they are)
    for s in llm:
        mine = stored[s["context"]["span_id"]]
        sent = json.loads(mine["inp"])
        assert json.loads(_attr(s["attributes"], "input.value")) == sent  # the request's messages
        assert _attr(s["attributes"], "llm.input_messages.0.message.role") == sent[0]["role"]
        assert abs(_seconds(s) - mine["ns"] / 1e9) < 1e-3  # the duration as recorded, in Phoenix's timestamps
        assert s["status_code"] == ("ERROR" if mine["status_code"] == "ERROR" else "UNSET")
        parent = by_id[s["parent_id"]]  # a child of its session's root, in the same trace
        assert parent["name"] == "prunegate.session" and parent["context"]["trace_id"] == s["context"]["trace_id"]
    assert any(s["status_code"] == "ERROR" for s in llm)  # the ungated replay sent invalid requests
    # a replay's model call lasts from its first check to its send, and the checks that gated it are
    # its children in Phoenix's tree, each as long as the gate took
    replayed = [s for s in llm if str(_attr(s["attributes"], "prunegate.session.id")).startswith("replay-")]
    assert replayed and all(_seconds(s) > 0 for s in replayed)
    checks = [s for s in spans if s["name"] == "prunegate.budget_check" and s["parent_id"] in by_id
              and by_id[s["parent_id"]]["name"].startswith("chat ")]
    assert checks and all(_seconds(s) > 0 for s in checks)
    assert {by_id[s["parent_id"]]["context"]["span_id"] for s in checks} <= {s["context"]["span_id"] for s in replayed}
    violations = [s for s in spans if s["name"] == "prunegate.violation"]
    assert violations and all(s["status_code"] == "ERROR" for s in violations)
    for s in spans:  # the tree: every parent arrived
        assert s["parent_id"] is None or s["parent_id"] in by_id

