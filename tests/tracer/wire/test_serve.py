"""``prunegate serve``: OTLP/HTTP in from the OTel SDK's exporter and a real Collector (rotel), limits, refusals."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.servers import free_port, wait_for_port
from tracer.lab import ReplaySpec, replay_session
from tracer.store import Store
from tracer.traffic import conversation_from_body

VENV_BIN = Path(sys.executable).parent


def chat_body(turns: int) -> dict:
    msgs: list[dict] = [{"role": "system", "content": "You book flights."}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"find flight {i} " + "from A to B " * 20})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"n": i})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "result " * 80})
        msgs.append({"role": "assistant", "content": f"flight {i} found"})
    return {"model": "gpt-4o", "messages": msgs}


class Served:
    def __init__(self, store: Path, *extra: str) -> None:
        self.store = store
        self.proc = subprocess.Popen([str(VENV_BIN / "prunegate"), "serve", "--store", str(store), "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert "listening on http://127.0.0.1:" in line, (line, self.proc.stderr.read() if self.proc.stderr else "")
        self.url = line.split(" on ", 1)[1].split(" ", 1)[0]
        self.port = int(self.url.split(":")[2].split("/")[0])

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        out, self.err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, self.err
        return out


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path / "store", "--max-body", "200000", "--compact-every", "0", "--conversation-idle", "0")
    yield s
    if s.proc.poll() is None:
        s.stop()


def post(url: str, body: bytes, content_type: str = "application/json", **headers: str) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def span_counts(store: Path) -> dict[str, int]:
    rows = Store(store).query("SELECT span_id, count(*) AS n FROM spans GROUP BY span_id")
    return {r["span_id"]: int(r["n"]) for r in rows}


def replay_through(endpoint: str, sessions: int = 3) -> tuple[set[str], set[str]]:
    """Replay sessions traced by the SDK's OTLP exporter (gzip) to ``endpoint``; the span and session ids sent."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, compression=Compression.Gzip),
                                                   max_export_batch_size=64, schedule_delay_millis=50))
    sids = set()
    for i in range(sessions):
        conv = conversation_from_body(chat_body(3 + i), "openai", name=f"conv-{i}", file="test")
        result = replay_session(conv, ReplaySpec("recency", budget=900), tracer_provider=provider, capture_content=True)
        sids.add(result.replay_id)
    assert provider.force_flush(30_000)
    provider.shutdown()
    return {format(s.context.span_id, "016x") for s in memory.get_finished_spans()}, sids


def test_sdk_exporter_to_serve_every_span_once_and_sessions_render(served):
    sent, sids = replay_through(served.url)
    assert len(sent) > 30
    counts = span_counts(served.store)
    assert set(counts) == sent and set(counts.values()) == {1}
    sessions = {r["session_id"]: r for r in Store(served.store).sessions()}
    assert sids <= set(sessions)
    from tracer.queries import list_sessions  # what the dashboard's session list reads

    listed = {r["id"] for r in list_sessions(Store(served.store))}  # complete sessions only
    assert sids <= listed
    assert "committed" in served.stop()


def test_retried_batch_is_kept_once(served):
    line = _genai_request(conversation="conv-r", trace="ab" * 16)
    for _ in range(2):  # a client retrying after a lost 200
        assert post(served.url, line)[0] == 200
    assert set(span_counts(served.store).values()) == {1}


def _genai_request(conversation: str, trace: str) -> bytes:
    inp = [{"role": "user", "parts": [{"type": "text", "content": "What is the weather in Paris?"}]}]
    out = [{"role": "assistant", "parts": [{"type": "text", "content": "Sunny, 21 C."}], "finish_reason": "stop"}]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
             "gen_ai.conversation.id": conversation, "gen_ai.input.messages": json.dumps(inp),
             "gen_ai.output.messages": json.dumps(out)}
    span = {"traceId": trace, "spanId": "1122334455667788", "name": "chat gpt-4o", "kind": 3,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000001000000000",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                          "scopeSpans": [{"scope": {"name": "some.genai.lib"}, "spans": [span]}]}]}).encode()


def test_json_genai_spans_become_an_import_session(served):
    status, headers, body = post(served.url, gzip.compress(_genai_request("conv-g", "cd" * 16)), **{"Content-Encoding": "gzip"})
    assert (status, json.loads(body)) == (200, {})
    store = Store(served.store)
    roots = store.query("SELECT session_id, attributes FROM spans WHERE name = 'prunegate.session'")
    assert len(roots) == 1 and json.loads(roots[0]["attributes"])["prunegate.session.source"] == "import"
    assert store.query("SELECT count(*) AS n FROM spans WHERE span_id = '1122334455667788'")[0]["n"] == 1


def test_a_lone_surrogate_from_a_client_is_replaced_and_counted_not_a_bricked_store(served):
    """Issue #26: one escaped lone surrogate in an attribute used to make every reader fail."""
    body = _genai_request("conv-u", "ef" * 16).replace(b"What is the weather", b"\\ud800 weather")
    assert b"\\ud800" in body
    assert post(served.url, body)[0] == 200
    store = Store(served.store)
    (row,) = store.query("SELECT attributes FROM spans WHERE span_id = '1122334455667788'")
    attrs = json.loads(row["attributes"])
    assert "\ufffd weather" in attrs["gen_ai.input.messages"] and attrs["prunegate.text.replaced"] == 1
    before = store.sessions()
    assert "import" in {s["source"] for s in before}  # the stitched import session reads too
    assert post(served.url, _genai_request("conv-v", "12" * 16))[0] == 200  # and the store takes more
    assert len(store.sessions()) == 2 * len(before)


def test_refusals_are_one_clear_status_each(served):
    url = served.url
    assert post(url, b"x" * 200_001)[0] == 413  # over --max-body
    bomb = gzip.compress(b" " * 2_000_000)  # small on the wire, over the limit once inflated
    assert post(url, bomb, **{"Content-Encoding": "gzip"})[0] == 413
    assert post(url, b"{not json")[0] == 400
    status, _, body = post(url, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "zz"}]}]}]}')
    assert status == 400 and b"resourceSpans[0].scopeSpans[0].spans[0]" in body
    assert post(url, b"{}", "text/plain")[0] == 415
    assert post(url, b"\x0a\xff\xff", "application/x-protobuf")[0] == 400
    assert post(url.replace("/v1/traces", "/v1/logs"), b"{}")[0] == 404
    assert span_counts(served.store) == {}
    out = served.stop()
    assert "413" in out and "400" in out


def test_bearer_token(tmp_path):
    s = Served(tmp_path / "store", "--token", "s3cret")
    try:
        ok = _genai_request("conv-t", "ef" * 16)
        assert post(s.url, ok)[0] == 401
        assert post(s.url, ok, Authorization="Bearer wrong")[0] == 401
        assert span_counts(s.store) == {}
        assert post(s.url, ok, Authorization="Bearer s3cret")[0] == 200
        assert span_counts(s.store)["1122334455667788"] == 1
    finally:
        s.stop()


def test_store_refusing_writes_is_503_with_retry_after_then_the_retry_lands(served):
    segments = served.store / "segments"
    shutil.rmtree(segments)
    segments.write_text("not a directory")  # every segment write now fails (root ignores permissions)
    req = _genai_request("conv-f", "aa" * 16)
    status, headers, _ = post(served.url, req)
    assert status == 503 and int(headers["Retry-After"]) > 0
    segments.unlink()
    segments.mkdir()
    assert span_counts(served.store) == {}  # nothing was acknowledged, nothing is there
    assert post(served.url, req)[0] == 200
    assert span_counts(served.store)["1122334455667788"] == 1


def test_too_many_in_flight_is_429_not_a_queue(tmp_path):
    s = Served(tmp_path / "store", "--max-inflight", "1")
    try:
        slow = socket.create_connection(("127.0.0.1", s.port))
        slow.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{")  # holds the only slot while its body trickles
        # the server takes the slot once it reads the slow request's headers: wait for that (a loaded
        # machine may take a while), then the next request is refused, not queued
        deadline = time.monotonic() + 20
        while True:
            status, headers, _ = post(s.url, _genai_request("conv-b", "bb" * 16))
            if status == 429 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert status == 429 and headers["Retry-After"] == "1"
        slow.close()
        deadline = time.monotonic() + 20  # the slot comes back when the server sees the close
        while (status := post(s.url, _genai_request("conv-b", "bb" * 16))[0]) == 429 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status == 200
    finally:
        s.stop()


def test_binds_loopback_by_default(served):
    with pytest.raises(OSError):
        socket.create_connection((_non_loopback_address(), served.port), timeout=2).close()


def _non_loopback_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: picks the outward interface
            addr = s.getsockname()[0]
        except OSError:
            pytest.skip("no non-loopback interface on this machine")
    if addr.startswith("127."):
        pytest.skip("no non-loopback interface on this machine")
    return addr


def test_sdk_through_rotel_collector_into_serve(served, tmp_path):
    rotel = pytest.importorskip("rotel", reason="rotel (the test extra) installs a Collector binary")
    binary = Path(rotel.__file__).parent / "rotel-agent"
    http_port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen(
        [str(binary), "start", "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
         "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}", "--exporter", "otlp",
         "--otlp-exporter-endpoint", f"http://127.0.0.1:{served.port}", "--otlp-exporter-protocol", "http",
         "--pid-file", str(tmp_path / "rotel.pid"), "--log-file", str(tmp_path / "rotel.log")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "NO_COLOR": "1"})
    try:
        wait_for_port(http_port, proc, "rotel", seconds=20)
        sent, sids = replay_through(f"http://127.0.0.1:{http_port}/v1/traces")
        deadline = time.time() + 30
        while len(span_counts(served.store)) < len(sent) and time.time() < deadline:
            time.sleep(0.5)  # the collector batches and forwards on its own schedule
        counts = span_counts(served.store)
        assert set(counts) == sent and set(counts.values()) == {1}
        assert sids <= {r["session_id"] for r in Store(served.store).sessions()}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def _turns(turns: int) -> list[list[dict]]:
    """A growing GenAI conversation: each call's input is the previous input, its reply and a new user turn."""
    history: list[dict] = [{"role": "system", "parts": [{"type": "text", "content": "You plan trips."}]}]
    calls = []
    for i in range(turns):
        history = [*history, {"role": "user", "parts": [{"type": "text", "content": f"day {i}: where next?"}]}]
        reply = {"role": "assistant", "parts": [{"type": "text", "content": f"city {i}"}], "finish_reason": "stop"}
        calls.append([*history])
        history = [*history, {k: v for k, v in reply.items() if k != "finish_reason"}]
    return calls


def _export_turns(url: str, conversation: str | None, turns: int = 4) -> None:
    """Each turn a model-call span in its own trace, exported as its own request by the SDK's OTLP exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url)))
    tracer = provider.get_tracer("some.genai.lib")
    for i, inp in enumerate(_turns(turns)):
        out = [{"role": "assistant", "parts": [{"type": "text", "content": f"city {i}"}], "finish_reason": "stop"}]
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
                 "gen_ai.input.messages": json.dumps(inp), "gen_ai.output.messages": json.dumps(out)}
        if conversation:
            attrs["gen_ai.conversation.id"] = conversation
        with tracer.start_as_current_span("chat gpt-4o", attributes=attrs):
            time.sleep(0.01)
    provider.shutdown()


def _imports(store: Path) -> list[dict]:
    return Store(store).query("SELECT session_id, span_count FROM sessions WHERE source = 'import' ORDER BY 1")


@pytest.mark.parametrize("conversation", ["trip-42", None], ids=["conversation-id", "prefix-stitched"])
def test_a_conversation_over_many_requests_is_one_session_as_import_makes_it(tmp_path, conversation):
    s = Served(tmp_path / "store", "--compact-every", "0", "--conversation-idle", "1.5")
    try:
        _export_turns(s.url, conversation)
        deadline = time.time() + 30
        while not _imports(s.store) and time.time() < deadline:  # quiet for 1.5 s: the session is committed
            time.sleep(0.3)
    finally:
        out = s.stop()
    served = _imports(s.store)
    assert len(served) == 1, served
    assert "(1 GenAI sessions)" in out
    chats = Store(s.store).query("SELECT * FROM spans WHERE scope_name = 'some.genai.lib'")
    assert len(chats) == 4 and len({c["trace_id"] for c in chats}) == 4  # four requests, four traces
    messages = Store(s.store).query(
        "SELECT count(*) AS n FROM spans WHERE session_id = ? AND name = 'prunegate.message'", [served[0]["session_id"]])
    assert messages[0]["n"] >= 8  # the whole conversation (system, 4 user turns, 3 replies and the last reply)

    # the same spans as a Collector file, imported: the same session, once
    from tracer.store.rows import decode_row
    from tracer.traffic import write_otlp_json

    collector = tmp_path / "collector.jsonl"
    write_otlp_json([decode_row(c) for c in chats], collector)
    other = tmp_path / "imported"
    done = subprocess.run([str(VENV_BIN / "prunegate"), "import", str(collector), "--store", str(other), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _imports(other) == served
    again = subprocess.run([str(VENV_BIN / "prunegate"), "import", str(collector), "--store", str(s.store), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["sessions"] == 0 and _imports(s.store) == served


def test_conversation_idle_zero_commits_each_request(tmp_path):
    s = Served(tmp_path / "store", "--compact-every", "0", "--conversation-idle", "0")
    try:
        _export_turns(s.url, "trip-7", turns=3)
    finally:
        s.stop()
    assert len(_imports(s.store)) == 3  # one per request, each the conversation up to its turn
