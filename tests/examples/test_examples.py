"""The example agent loops, run as real processes: official SDKs -> local stand-in server -> trace store."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests import traffic
from tests.paths import REPO
from tracer.store import Store

EXAMPLES = REPO / "examples"
CASSETTES = traffic.CASSETTES / "tests" / "models" / "cassettes"


@pytest.fixture(scope="module")
def standin():
    """The stand-in provider server in its own process, on an ephemeral port of 127.0.0.1."""
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / "standin_server.py"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def recorded(name: str) -> list[dict]:
    return yaml.safe_load((CASSETTES / name).read_text())["interactions"]


def test_the_standin_answers_recorded_responses_and_refuses_what_the_provider_refuses(standin):
    first, second = recorded("test_anthropic/test_multiple_parallel_tool_calls.yaml")
    status, body = post(f"{standin}/v1/messages", first["request"]["parsed_body"])
    assert status == 200 and body == first["response"]["parsed_body"]
    status, body = post(f"{standin}/v1/messages", second["request"]["parsed_body"])
    assert status == 200 and body == second["response"]["parsed_body"]
    broken = copy.deepcopy(second["request"]["parsed_body"])
    del broken["messages"][1]  # the assistant turn with the parallel batch
    status, body = post(f"{standin}/v1/messages", broken)
    assert status == 400 and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "unexpected `tool_use_id` found in `tool_result` blocks" in body["error"]["message"]


def test_the_standin_speaks_openai_too(standin):
    calls = [i for i in recorded("test_openai/test_multiple_agent_tool_calls.yaml")
             if i["request"]["uri"].endswith("/chat/completions")]
    status, body = post(f"{standin}/v1/chat/completions", calls[1]["request"]["parsed_body"])
    assert status == 200 and body == calls[1]["response"]["parsed_body"]
    broken = copy.deepcopy(calls[1]["request"]["parsed_body"])
    del broken["messages"][5]  # the assistant message whose call the last tool message answers
    status, body = post(f"{standin}/v1/chat/completions", broken)
    assert status == 400
    assert body == {"error": {"message": "Invalid parameter: messages with role 'tool' must be a response to a "
                                         "preceeding message with 'tool_calls'.",
                              "type": "invalid_request_error", "param": "messages", "code": None}}
    status, body = post(f"{standin}/v1/chat/completions", {"model": "m", "messages": [{"role": "user",
                                                                                        "content": "unrecorded"}]})
    assert status == 404 and body["error"]["type"] == "not_found_error"


def run_examples(script: str, url: str, store: Path) -> tuple[dict, dict]:
    """The gated and the ungated run of one example, at the same time, into the same store."""
    procs = {
        gated: subprocess.Popen([sys.executable, str(EXAMPLES / script), "--base-url", url, "--store", str(store),
                                 *([] if gated else ["--ungated"])],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for gated in (True, False)
    }
    out = {}
    for gated, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out[gated] = json.loads(stdout.strip().splitlines()[-1])
    return out[True], out[False]


@pytest.mark.slow
@pytest.mark.parametrize("script,turns", [("anthropic_agent.py", 3), ("openai_agent.py", 2)])
def test_the_gate_keeps_every_request_valid_where_naive_trimming_gets_a_400(standin, tmp_path, script, turns):
    store_dir = tmp_path / "store"
    gated, naive = run_examples(script, standin, store_dir)
    assert gated["rejected"] == [] and len(gated["answers"]) == turns
    assert gated["violations"] == 0 and gated["errors"] == gated["observer_errors"] == gated["tracer_errors"] == 0
    assert gated["messages"] < gated["history_messages"], "the gate pruned"
    assert naive["rejected"] and "400" in naive["rejected"][0]
    assert naive["violations"] >= 1

    store = Store(store_dir)
    sessions = {s["session_id"]: s for s in store.sessions()}
    assert set(sessions) == {gated["session_id"], naive["session_id"]}
    g = store.spans(gated["session_id"])
    assert not [s for s in g if s["name"] == "prunegate.violation"]
    prunes = [s for s in g if s["name"] == "prunegate.prune"]
    assert prunes and all(p["attributes"]["prunegate.gated"] is True for p in prunes)
    chats = [s for s in g if s["name"].startswith("chat ")]
    assert len(chats) == gated["requests"] and all(c["status_code"] != "ERROR" for c in chats)
    assert all(c["attributes"]["prunegate.request.valid"] is True for c in chats)
    assert all("gen_ai.usage.input_tokens" in c["attributes"] for c in chats)

    n = store.spans(naive["session_id"])
    failed = [s for s in n if s["name"].startswith("chat ") and s["status_code"] == "ERROR"]
    assert failed and failed[0]["status_message"] in naive["rejected"][0]
    violation = next(s for s in n if s["name"] == "prunegate.violation")
    assert violation["attributes"]["prunegate.violation.code"] == "orphan_tool_result"
    link = violation["links"][0]
    cause = next(s for s in n if s["span_id"] == link["span_id"])
    assert cause["name"] == "prunegate.prune" and cause["attributes"]["prunegate.gated"] is False
    assert link["attributes"] == {"prunegate.link": "caused_by"}
    assert violation["attributes"]["prunegate.violation.evicted_id"] in cause["attributes"]["prunegate.pruned.ids"]
    tools = [s for s in n + g if s["name"].startswith("execute_tool ")]
    assert tools and all(t["attributes"]["gen_ai.tool.call.id"] for t in tools)
