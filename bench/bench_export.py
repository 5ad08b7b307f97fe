"""`prunegate export` rate: a store of many sessions sent over OTLP/HTTP (protobuf) to a counting sink.

    .venv/bin/python bench/bench_export.py                        # 150000 spans
    .venv/bin/python bench/bench_export.py --spans 20000
    .venv/bin/python bench/bench_export.py --code /tmp/pg-old     # the same with another checkout's code

The store: ``--spans`` synthetic spans in sessions of 30 (a session root, 10 chat spans with their
messages, 19 gate spans), each session from one of 40 agent hosts (its own ``service.instance.id``)
and two instrumentation scopes, so runs of one resource and scope are short, as in a store fed by a
fleet. The sink is a separate process that parses each protobuf request and counts its spans (what
a backend receives, not what the exporter says). Prints requests, seconds, spans/s, and spans
received. ``--code`` runs the export of another checkout (e.g. ``git archive COMMIT | tar -x -C DIR``)
on the same store, for a before/after in one sitting.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sink(port_file: str) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    totals = {"requests": 0, "spans": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps(totals).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            msg = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
            totals["requests"] += 1
            totals["spans"] += sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


def _rows(spans: int) -> list[dict]:
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "where is my order? " * 20}]}])
    out: list[dict] = []
    s = 0
    while len(out) < spans:
        sid = f"imp-{s:016x}"
        res = {"service.name": "agent", "service.instance.id": f"host-{s % 40}"}
        trace = f"{s:032x}"
        t0 = 1_700_000_000_000_000_000 + s * 10_000_000
        for i in range(30):
            chat = 1 <= i <= 10
            out.append({
                "trace_id": trace, "span_id": f"{s:010x}{i:06x}", "parent_span_id": None if i == 0 else f"{s:010x}{0:06x}",
                "name": "prunegate.session" if i == 0 else ("chat gpt-4o" if chat else "prunegate.budget_check"),
                "kind": "CLIENT" if chat else "INTERNAL", "start_time_ns": t0 + i * 1000, "end_time_ns": t0 + i * 1000 + 500,
                "status_code": "UNSET", "resource": res, "scope_name": "some.genai.lib" if chat else "prunegate",
                "attributes": {"prunegate.session.id": sid, "prunegate.seq": i,
                               **({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                                   "gen_ai.input.messages": msgs} if chat else {"prunegate.tokens": 1000 + i})},
            })
        s += 1
    return out[:spans]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=150_000)
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose tracer runs the export (default: this one)")
    ap.add_argument("--sink", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sink:
        _sink(args.sink)
        return 0
    sys.path.insert(0, str(args.code.resolve()))
    from tracer.store import Store
    from tracer.wire.export import export_store

    with tempfile.TemporaryDirectory(prefix="pg-bench-export-") as tmp:
        store = Store(Path(tmp) / "store")
        store.write_rows(_rows(args.spans))
        port_file = Path(tmp) / "port"
        sink = subprocess.Popen([sys.executable, __file__, "--sink", str(port_file)])
        try:
            while not port_file.exists() or not port_file.read_text():
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port_file.read_text()}"
            t0 = time.perf_counter()
            result = export_store(store, url)
            seconds = time.perf_counter() - t0
            import urllib.request

            with urllib.request.urlopen(url) as resp:  # noqa: S310 - loopback
                got = json.loads(resp.read())
        finally:
            sink.terminate()
            sink.wait()
    print(f"code {args.code}: {args.spans} spans: sent {result.sent}, failed {result.failed}; sink got "
          f"{got['spans']} spans in {got['requests']} requests ({args.spans / max(got['requests'], 1):.1f} spans "
          f"each); {seconds:.1f} s with the store read, {args.spans / seconds:,.0f} spans/s")
    return 0 if got["spans"] == args.spans else 1


if __name__ == "__main__":
    sys.exit(main())
