"""Google ADK, the fifth framework: the gate as its ``before_model_callback``, driven for real.

google-adk pins an older OpenTelemetry than prunegate's other test packages (``pip check`` says so
when both share a venv), so ADK runs in a venv of its own: ``$PRUNEGATE_ADK_PYTHON``, else this
interpreter when it has google-adk, else one this test builds (once, in
``~/.cache/prunegate/adk-venv``, or ``$PRUNEGATE_ADK_VENV``). If it cannot be built the test skips
with the reason, except under ``CI=true``, where it fails. The example ``examples/google_adk_agent.py``
runs there against the stand-in started here (it speaks Gemini's ``generateContent`` and
``streamGenerateContent``); what is asserted is read back from the requests the server received and
from the trace store.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policies.builtin.mask import MASK_PREFIX
from tests.paths import REPO
from tracer.store import Store

sys.path.insert(0, str(REPO / "examples"))

from scripted import ScriptedConversation  # noqa: E402
from standin_server import StandIn  # noqa: E402

pytestmark = pytest.mark.slow

BUDGET = 3000
ROUNDS = 24
# what prunegate's tracer needs at run time, beside google-adk (not the dashboard's packages)
ADK_PACKAGES = ["google-adk>=2.0", "duckdb>=1.1", "pyarrow>=15", "opentelemetry-exporter-otlp-proto-http",
                "opentelemetry-exporter-prometheus", "orjson>=3.9", "zstandard>=0.22", "pyyaml>=6", "rank-bm25>=0.2.2",
                "tiktoken>=0.7", "bpe-openai>=0.1.4"]  # the tokens extra: the guard counts as the stand-in does


def _build(venv: Path) -> str:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
        subprocess.run([str(python), "-m", "ensurepip", "--upgrade"], check=True, capture_output=True, timeout=300)
    probe = subprocess.run([str(python), "-c", "import google.adk, duckdb, opentelemetry.sdk, tiktoken, bpe_openai"],
                           capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *ADK_PACKAGES], check=True, capture_output=True,
                       text=True, timeout=1200)
    return str(python)


@pytest.fixture(scope="module")
def adk_python() -> str:
    if os.environ.get("PRUNEGATE_ADK_PYTHON"):
        return os.environ["PRUNEGATE_ADK_PYTHON"]
    if importlib.util.find_spec("google.adk") is not None:
        return sys.executable
    venv = Path(os.environ.get("PRUNEGATE_ADK_VENV") or Path.home() / ".cache" / "prunegate" / "adk-venv")
    try:
        return _build(venv)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        reason = f"could not build a venv with google-adk at {venv}: {str(detail).strip()[-300:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_every_request_is_valid_within_budget_and_one_session(tmp_path, adk_python, mode):
    store = tmp_path / "store"
    conversation = ScriptedConversation(ROUNDS)
    with StandIn(recording=conversation) as server:
        done = subprocess.run([adk_python, str(REPO / "examples" / "google_adk_agent.py"), "--base-url",
                               f"{server.url}/v1", "--store", str(store), "--budget", str(BUDGET), "--mode", mode],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    seen = conversation.requests
    assert len(seen) == ROUNDS + 1, "every round reached the model, then the final answer"
    assert [r.error for r in seen if not r.valid] == [] and said["guard_errors"] == 0
    assert max(r.tokens for r in seen) <= BUDGET, [r.tokens for r in seen]
    if mode == "stream":
        assert all(r.body is not None for r in seen)
    # the gate's rewrites reached the model: masked results, fewer parts than the session holds
    sent = [p["functionResponse"]["response"] for r in seen for c in r.body["contents"] for p in c["parts"]
            if "functionResponse" in p]
    assert any(str(v.get("result", "")).startswith(MASK_PREFIX) for v in sent), "masked results were sent"
    assert len(seen[-1].body["contents"]) < 2 * ROUNDS, "older rounds were pruned"
    sessions = Store(store).sessions()
    assert [s["session_id"] for s in sessions] == [said["session_id"]]
    assert sessions[0]["violations"] == 0 and sessions[0]["decisions"] > 0
    (key,) = said["conversations"]
    assert key.startswith("session:"), "keyed on the ADK session"


ROUND_TRIP = r'''
import json
from google.genai import types
from policies.adapters._native import Originals
from policies.adapters.google_adk import from_adk, to_adk
from policies.messages import TOOL_RESULT

png = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\r\n"))
contents = [
    types.Content(role="user", parts=[types.Part(text="look at this"), png]),
    types.Content(role="model", parts=[types.Part(text="thinking it over", thought=True), types.Part(text="calling"),
                                       types.Part(function_call=types.FunctionCall(name="lookup", args={"q": 1})),
                                       types.Part(function_call=types.FunctionCall(id="c2", name="weather",
                                                                                   args={"city": "Oslo"}))]),
    types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(name="lookup",
                                                                                          response={"a": [1, 2]})),
                                      types.Part(function_response=types.FunctionResponse(id="c2", name="weather",
                                                                                          response={"t": 3}))]),
    types.Content(role="model", parts=[types.Part(text="done")]),
    types.Content(role="user", parts=[types.Part(text="done")]),
]
o = Originals()
messages = from_adk(contents, o)
same = to_adk(messages, o)
rebuilt = to_adk(from_adk(contents))
o2 = Originals()
masked = from_adk(contents, o2)
for m in masked:
    for b in m.blocks:
        if b.type == TOOL_RESULT and b.name == "lookup":
            b.content = "[masked]"
changed = to_adk(masked, o2)
print(json.dumps({
    "identical": len(same) == len(contents) and all(a is b for a, b in zip(same, contents)),
    "rebuilt_equal": [c.model_dump(mode="json", exclude_none=True) for c in rebuilt]
                     == [c.model_dump(mode="json", exclude_none=True) for c in contents],
    "units": [m.role for m in messages],
    "changed": [i for i, (a, b) in enumerate(zip(changed, contents)) if a is not b],
    "changed_parts": [j for j, (p, q) in enumerate(zip(changed[2].parts, contents[2].parts)) if p is not q],
    "masked": changed[2].parts[0].function_response.response,
}))
'''


def test_adk_contents_round_trip_and_a_rewrite_changes_one_part(adk_python):
    done = subprocess.run([adk_python, "-c", ROUND_TRIP], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["identical"], "contents the gate left alone come back as themselves"
    assert got["rebuilt_equal"], "every part kind survives conversion and back without the originals"
    assert got["units"] == ["user", "assistant", "tool", "tool", "assistant", "user"]
    assert got["changed"] == [2] and got["changed_parts"] == [0]
    assert got["masked"] == {"result": "[masked]"}
