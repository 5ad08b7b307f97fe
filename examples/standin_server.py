"""A local stand-in for the Anthropic and OpenAI APIs, answering from recorded responses.

``POST /v1/messages`` (Anthropic Messages), ``POST /v1/chat/completions`` (OpenAI Chat
Completions) and ``POST /v1/responses`` (OpenAI Responses) and ``POST /v1beta/models/{model}:generateContent``
(Gemini; these two answered by a scripted recording such as ``scripted.ScriptedConversation``)
answer with the real response recorded for the request's current user prompt and
round (see :mod:`cassettes`). A request whose message structure the real provider would refuse
gets the provider's real 400 body, with the error text of :mod:`policies.validate`:

- Anthropic: ``{"type": "error", "error": {"type": "invalid_request_error", "message": ...}}``
- OpenAI: ``{"error": {"message": ..., "type": "invalid_request_error", "param": "messages", "code": null}}``

``"stream": true`` is answered with each API's own server-sent events. ``GET /stats`` returns the request counters. Binds 127.0.0.1 on an ephemeral port by default.

Run it alone: ``python examples/standin_server.py [--port 0]`` (prints its base URL), or in a
thread: ``with StandIn() as server: ... server.url``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cassettes import ANTHROPIC, OPENAI, Script, ids_after, last_prompt, load_scripts  # noqa: E402

from policies.validate import validate  # noqa: E402

RESPONSES = "responses"
GEMINI = "gemini"  # POST /v1beta/models/{model}:generateContent (and :streamGenerateContent?alt=sse)
ROUTES = {"/v1/messages": ANTHROPIC, "/v1/chat/completions": OPENAI, "/chat/completions": OPENAI,
          "/v1/responses": RESPONSES, "/responses": RESPONSES}


def error_body(provider: str, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """The provider's own error envelope."""
    if provider == ANTHROPIC:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": "messages" if kind == "invalid_request_error"
                      else None, "code": None}}


class Recording:
    """Picks the recorded response for a request: by its last user prompt and the round reached."""

    def __init__(self, scripts: dict[str, list[Script]] | None = None) -> None:
        scripts = scripts if scripts is not None else load_scripts()
        self.by_prompt = {p: {s.prompt: s for s in group} for p, group in scripts.items()}

    def answer(self, provider: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if provider not in (ANTHROPIC, OPENAI):
            return 404, error_body(provider, f"no recordings of the {provider} API (play a scripted conversation)",
                                   "not_found_error")
        violations = validate(body, provider)
        if violations:
            return 400, error_body(provider, violations[0].message)
        messages = body["messages"]
        at, prompt = last_prompt(messages)
        script = self.by_prompt.get(provider, {}).get(prompt or "")
        if script is None:
            return 404, error_body(provider, f"no recorded response for the prompt {prompt!r}", "not_found_error")
        k = script.round_for(ids_after(messages, at + 1))
        if k >= len(script.responses):
            return 404, error_body(provider, f"the recording of {prompt!r} has no round {k}", "not_found_error")
        return 200, script.responses[k]


def chat_chunks(response: dict[str, Any], *, usage: bool = False) -> list[dict[str, Any]]:
    """A Chat Completions response as the stream of chunks the API sends for ``stream: true``."""
    base = {k: response.get(k) for k in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    choice = response["choices"][0]
    msg = choice["message"]
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    if msg.get("content"):
        out.append({**base, "choices": [{"index": 0, "delta": {"content": msg["content"]}, "finish_reason": None}]})
    for i, call in enumerate(msg.get("tool_calls") or []):
        delta = {"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                 "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}}]}
        out.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}]})
    if usage and response.get("usage"):
        out.append({**base, "choices": [], "usage": response["usage"]})
    return out


def anthropic_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """An Anthropic Messages response as the events the API streams for ``stream: true``."""
    start = {**response, "content": [], "stop_reason": None,
             "usage": {**response.get("usage", {}), "output_tokens": 1}}
    out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(response["content"]):
        if block["type"] == "tool_use":
            out.append({"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}})
            out.append({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        else:
            out.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            out.append({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": block.get("text", "")}})
        out.append({"type": "content_block_stop", "index": i})
    out.append({"type": "message_delta", "delta": {"stop_reason": response.get("stop_reason"), "stop_sequence": None},
                "usage": {"output_tokens": response.get("usage", {}).get("output_tokens", 0)}})
    out.append({"type": "message_stop"})
    return out


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API response as the events the API streams for ``stream: true``."""
    out: list[dict[str, Any]] = [{"type": "response.created",
                                  "response": {**response, "status": "in_progress", "output": []}}]
    for i, item in enumerate(response["output"]):
        out.append({"type": "response.output_item.added", "output_index": i, "item": {**item, "status": "in_progress"}})
        out.append({"type": "response.output_item.done", "output_index": i, "item": item})
    out.append({"type": "response.completed", "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(out)]


class StandIn:
    """The HTTP server, in a background thread; a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, recording: Any = None) -> None:
        self.recording = recording or Recording()
        self.stats = {"requests": 0, "ok": 0, "rejected": 0, "not_found": 0, "bad_json": 0}
        self.rejections: list[str] = []
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def _count(self, key: str, rejection: str | None = None) -> None:
        with self._lock:
            self.stats["requests"] += 1
            self.stats[key] += 1
            if rejection is not None:
                self.rejections.append(rejection)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - stdlib naming
                if self.path.split("?")[0] == "/stats":
                    with server._lock:
                        self._send(200, {**server.stats, "rejections": list(server.rejections)})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found_error"}})

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?")[0].rstrip("/")
                provider = ROUTES.get(path)
                if path.startswith("/v1beta/models/") and path.endswith((":generateContent", ":streamGenerateContent")):
                    provider = GEMINI
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if provider is None:
                    self._send(404, {"error": {"message": f"no route {path}", "type": "not_found_error"}})
                    return
                try:
                    body = json.loads(raw or b"null")
                except json.JSONDecodeError as exc:
                    server._count("bad_json")
                    self._send(400, error_body(provider, f"There was an error parsing the body: {exc}"))
                    return
                status, payload = server.recording.answer(provider, body)
                if status == 400:
                    server._count("rejected", payload.get("error", {}).get("message"))
                else:
                    server._count("ok" if status == 200 else "not_found")
                streamed = status == 200 and isinstance(body, dict) and body.get("stream")
                if streamed and provider == OPENAI:
                    self._stream(chat_chunks(payload, usage=bool((body.get("stream_options") or {}).get("include_usage"))))
                elif streamed and provider == ANTHROPIC:
                    self._stream(anthropic_events(payload), named=True)
                elif status == 200 and provider == GEMINI and path.endswith(":streamGenerateContent"):
                    self._stream([payload], done=False)
                elif streamed and provider == RESPONSES:
                    self._stream(responses_events(payload), named=True)
                else:
                    self._send(status, payload)

            def _stream(self, chunks: list[dict[str, Any]], named: bool = False, done: bool = True) -> None:
                if named or not done:  # Anthropic and Responses: "event: <type>" lines, no [DONE]
                    data = b"".join((f"event: {c['type']}\n" if named else "").encode()
                                    + f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
                else:
                    data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def start(self) -> StandIn:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def loop_main(run: Any, argv: list[str] | None = None, *, doc: str, budget: int) -> int:
    """The command line of the SDK loop examples (``anthropic_agent.py``, ``openai_agent.py``): run
    the loop against ``--base-url``, else against a stand-in started in a thread; print a JSON summary."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--base-url", help="the provider (default: start the local stand-in)")
    parser.add_argument("--store", help="trace store directory (default: the global tracer provider)")
    parser.add_argument("--budget", type=int, default=budget,
                        help="token budget of the whole request (messages, tool definitions, framing)")
    parser.add_argument("--policy", default="recency")
    parser.add_argument("--ungated", action="store_true", help="naive trimming instead of the gate")
    parser.add_argument("--capture-content", action="store_true")
    args = parser.parse_args(argv)
    kwargs = dict(budget=args.budget, store=args.store, gated=not args.ungated, policy=args.policy,
                  capture=args.capture_content)
    if args.base_url:
        summary = run(args.base_url, **kwargs)
    else:
        with StandIn() as server:
            summary = run(server.url, **kwargs)
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    parser.add_argument("--scripted", type=int, metavar="ROUNDS",
                        help="play the scripted tool conversation of examples/scripted.py instead of the recordings")
    args = parser.parse_args(argv)
    recording = None
    if args.scripted:
        from scripted import ScriptedConversation  # noqa: PLC0415

        recording = ScriptedConversation(args.scripted)
    server = StandIn(args.host, args.port, recording)
    print(server.url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
