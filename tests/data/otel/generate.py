"""Regenerate the OTLP JSON span files in this folder with the real instrumentations from PyPI.

Each scenario runs in its own process: the official ``openai``/``anthropic`` SDKs talk to a
scripted stand-in server on 127.0.0.1 (below), the instrumentation under test records the calls,
and its spans (and GenAI log events, when it emits them) are written as OTLP JSON lines, the
Collector file exporter's format: ``<scenario>.jsonl``. The request bodies the server received are
written beside them (``<scenario>.requests.json``): the tests compare what ``prunegate import``
recovers with what was really sent.

Run with ``bash tests/data/otel/generate.sh`` (builds a throw-away venv with the pinned packages
of VERSIONS.md); ``python generate.py SCENARIO --out DIR`` runs one scenario in the current venv.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# scenario -> (instrumentation, provider, environment)
SCENARIOS: dict[str, tuple[str, str, dict[str, str]]] = {
    "otel-genai-openai-v2-parent": ("openai-v2", "openai", {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"}),
    "otel-genai-openai-v2-noparent": ("openai-v2", "openai", {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"}),
    "otel-genai-openai-v2-events": ("openai-v2", "openai", {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only"}),
    "otel-genai-openai-v2-nocontent": ("openai-v2", "openai", {}),
    "openinference-openai": ("openinference-openai", "openai", {}),
    "openinference-anthropic": ("openinference-anthropic", "anthropic", {}),
    "openinference-openai-nocontent": ("openinference-openai", "openai", {
        "OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"}),
    "openllmetry-openai": ("openllmetry-openai", "openai", {"TRACELOOP_TRACE_CONTENT": "true"}),
    "openllmetry-anthropic": ("openllmetry-anthropic", "anthropic", {"TRACELOOP_TRACE_CONTENT": "true"}),
    "anthropic-sdk": ("anthropic-sdk", "anthropic", {}),
    "anthropic-sdk-nocontent": ("anthropic-sdk", "anthropic", {}),
    # older releases, in venvs of their own (generate.sh): the attribute shapes they wrote
    "openllmetry-legacy-openai": ("openllmetry-openai", "openai", {"TRACELOOP_TRACE_CONTENT": "true"}),
    "openllmetry-legacy-anthropic": ("openllmetry-anthropic", "anthropic", {"TRACELOOP_TRACE_CONTENT": "true"}),
    "otel-genai-openai-v2-legacy-events": ("openai-v2", "openai", {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}),
}
# which venv of generate.sh runs a scenario (default: "current")
GROUPS = {"openllmetry-legacy-openai": "openllmetry-legacy", "openllmetry-legacy-anthropic": "openllmetry-legacy",
          "otel-genai-openai-v2-legacy-events": "otel-legacy"}
PARENT = {"otel-genai-openai-v2-parent"}
SESSION_ID = {"openinference-openai", "anthropic-sdk"}  # conversation A carries a session/conversation id
NO_CONTENT = {"otel-genai-openai-v2-nocontent", "anthropic-sdk-nocontent", "openinference-openai-nocontent"}

WEATHER = "What is the weather in Paris and in Rome?"
MATH = ["What is 2+2?", "And times 3?"]
OPENAI_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Current weather of a city",
                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
WEATHER_OF = {"Paris": "sunny, 18C", "Rome": "cloudy, 21C"}


# ------------------------------------------------------------------------------ stand-in server
def _tag(messages: list[dict[str, Any]]) -> str:
    first = next(m for m in messages if m["role"] == "user")
    text = first["content"] if isinstance(first["content"], str) else first["content"][0]["text"]
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _last_is_tool(provider: str, messages: list[dict[str, Any]]) -> bool:
    last = messages[-1]
    if provider == "openai":
        return last["role"] == "tool"
    return isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"])


def _user_turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "user" and (isinstance(m["content"], str) or any(
        b.get("type") == "text" for b in m["content"])))


def answer(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """The scripted reply: the weather question gets two parallel tool calls, then a summary;
    the arithmetic questions get a direct answer. Anthropic replies open with a thinking block."""
    messages = body["messages"]
    tag = _tag(messages)
    n = len(messages)
    weather = WEATHER in json.dumps(messages)
    if weather and not _last_is_tool(provider, messages):
        calls = [(f"call_{tag}_{i}", city) for i, city in enumerate(("Paris", "Rome"))]
        text, thinking = None, "The user asks about two cities; I will call get_weather for both at once."
    elif weather:
        calls, text = [], "Paris is sunny at 18C and Rome is cloudy at 21C."
        thinking = "Both results are in; summarise them."
    else:
        calls = []
        text = "2+2 is 4." if _user_turns(messages) == 1 else "4 times 3 is 12."
        thinking = "Simple arithmetic."
    if provider == "openai":
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            msg["tool_calls"] = [{"id": cid, "type": "function", "function": {
                "name": "get_weather", "arguments": json.dumps({"city": city})}} for cid, city in calls]
        return {"id": f"chatcmpl-{tag}-{n}", "object": "chat.completion", "created": 1764000000, "model": body["model"],
                "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 20 * n, "completion_tokens": 12, "total_tokens": 20 * n + 12}}
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking, "signature": f"sig-{tag}-{n}"}]
    if text:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": f"toolu_{cid}", "name": "get_weather", "input": {"city": city}}
                for cid, city in calls]
    return {"id": f"msg_{tag}_{n}", "type": "message", "role": "assistant", "model": body["model"], "content": content,
            "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 20 * n, "output_tokens": 12}}


class StandIn:
    """A scripted Anthropic Messages / OpenAI Chat Completions server on 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider = "anthropic" if self.path.endswith("/messages") else "openai"
                reply = answer(provider, body)
                outer.requests.append({"provider": provider, "body": body, "response": reply})
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


# ------------------------------------------------------------------------------ conversations
def run_openai(url: str, session: Any) -> None:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a weather assistant."},
                                      {"role": "user", "content": WEATHER}]
    with session("A"):
        while True:
            r = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=OPENAI_TOOLS)
            msg = r.choices[0].message
            messages.append(msg.model_dump(exclude_none=True, exclude={"refusal", "annotations", "audio"}))
            if not msg.tool_calls:
                break
            for call in msg.tool_calls:
                city = json.loads(call.function.arguments)["city"]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": WEATHER_OF[city]})
    history: list[dict[str, Any]] = []
    with session("B"):
        for q in MATH:
            history.append({"role": "user", "content": q})
            r = client.chat.completions.create(model="gpt-4o-mini", messages=history)
            history.append({"role": "assistant", "content": r.choices[0].message.content})


def run_anthropic(url: str, session: Any, client_options: dict[str, Any] | None = None, conversation: Any = None) -> None:
    import anthropic

    def client_for(label: str) -> Any:
        opts = dict(client_options or {})
        if opts and conversation is not None and conversation(label):
            opts = {"open_telemetry": {**opts["open_telemetry"], "conversation_id": conversation(label)}}
        return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0, **opts)

    think = {"type": "enabled", "budget_tokens": 1024}
    client = client_for("A")
    messages: list[dict[str, Any]] = [{"role": "user", "content": WEATHER}]
    with session("A"):
        while True:
            r = client.messages.create(model="claude-sonnet-4-5", max_tokens=2048, system="You are a weather assistant.",
                                       messages=messages, tools=ANTHROPIC_TOOLS, thinking=think)
            content = [b.model_dump(exclude_none=True, exclude={"citations"}) for b in r.content]
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in r.content if b.type == "tool_use"]
            if not uses:
                break
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": WEATHER_OF[b.input["city"]]} for b in uses]})
    client = client_for("B")
    history: list[dict[str, Any]] = []
    with session("B"):
        for q in MATH:
            history.append({"role": "user", "content": q})
            r = client.messages.create(model="claude-sonnet-4-5", max_tokens=2048, messages=history, thinking=think)
            history.append({"role": "assistant",
                            "content": [b.model_dump(exclude_none=True, exclude={"citations"}) for b in r.content]})


# ------------------------------------------------------------------------------ one scenario
def run_scenario(name: str, out: Path) -> None:
    import contextlib

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    kind, provider, _ = SCENARIOS[name]
    resource = Resource.create({"service.name": f"fixture-{name}"})
    spans = InMemorySpanExporter()
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tp)
    logs = None
    if kind == "openai-v2":
        from opentelemetry import _logs
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

        try:
            from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
        except ImportError:  # SDK < 1.39
            from opentelemetry.sdk._logs.export import InMemoryLogExporter as InMemoryLogRecordExporter

        logs = InMemoryLogRecordExporter()
        lp = LoggerProvider(resource=resource)
        lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
        _logs.set_logger_provider(lp)
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        extra: dict[str, Any] = {}
        try:  # 2.1b0 takes an event logger provider (the older Events API); later releases a logger provider
            from opentelemetry.sdk._events import EventLoggerProvider

            extra["event_logger_provider"] = EventLoggerProvider(lp)
        except ImportError:
            pass
        OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp, **extra)
    elif kind == "openinference-openai":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIOpenAI

        OIOpenAI().instrument(tracer_provider=tp)
    elif kind == "openinference-anthropic":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor as OIAnthropic

        OIAnthropic().instrument(tracer_provider=tp)
    elif kind == "openllmetry-openai":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as LLOpenAI

        LLOpenAI().instrument(tracer_provider=tp)
    elif kind == "openllmetry-anthropic":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as LLAnthropic

        LLAnthropic().instrument(tracer_provider=tp)

    tracer = tp.get_tracer("fixture-agent")

    @contextlib.contextmanager
    def session(label: str) -> Any:
        if name in PARENT:
            with tracer.start_as_current_span(f"agent conversation {label}"):
                yield
        elif name in SESSION_ID and kind.startswith("openinference") and label == "A":
            from openinference.instrumentation import using_session

            with using_session(f"session-{label}"):
                yield
        else:
            yield

    server = StandIn()
    if provider == "openai":
        run_openai(server.url, session)
    elif kind == "anthropic-sdk":
        mode = "metadata_only" if name in NO_CONTENT else "content"
        options = {"open_telemetry": {"tracer_provider": tp, "traces": {"content_mode": mode}}}
        run_anthropic(server.url, session, options,
                      conversation=(lambda label: f"conversation-{label}" if label == "A" and name in SESSION_ID else None))
    else:
        run_anthropic(server.url, session)
    server.httpd.shutdown()
    tp.force_flush()
    write_otlp(out / f"{name}.jsonl", spans.get_finished_spans(), logs.get_finished_logs() if logs else [])
    (out / f"{name}.requests.json").write_text(json.dumps(server.requests, indent=1, sort_keys=True) + "\n")


def _hex_ids(obj: Any) -> Any:
    """protobuf JSON writes ids in base64; the Collector's file exporter (and OTLP/JSON) in hex."""
    if isinstance(obj, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_hex_ids(v) for v in obj]
    return obj


def write_otlp(path: Path, spans: Any, logs: Any) -> None:
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = sorted(spans, key=lambda s: s.start_time)
    lines = [json_format.MessageToDict(encode_spans(spans))]
    if logs:
        lines.append(json_format.MessageToDict(encode_logs(logs)))
    path.write_text("".join(json.dumps(_hex_ids(line), sort_keys=True) + "\n" for line in lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario", nargs="*", help="scenarios (default: all, each in its own process)")
    parser.add_argument("--out", default=str(HERE))
    parser.add_argument("--group", help="run the scenarios of this venv group (current, openllmetry-legacy, otel-legacy)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if len(args.scenario) == 1:
        run_scenario(args.scenario[0], out)
        return 0
    chosen = args.scenario or [n for n in SCENARIOS if args.group in (None, GROUPS.get(n, "current"))]
    for name in chosen:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELOOP_"))},
               **SCENARIOS[name][2]}
        subprocess.run([sys.executable, __file__, name, "--out", str(out)], env=env, check=True)
        print(f"wrote {out / (name + '.jsonl')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
