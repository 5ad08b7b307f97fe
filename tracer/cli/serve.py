"""``prunegate serve``: an OTLP/HTTP receiver (``/v1/traces``) writing into the trace store (docs/scale.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from tracer.cli import add_command, options, status
from tracer.errors import CommandError

METRICS_PORT = 9464  # the OpenTelemetry Prometheus exporter's usual port
SESSION_PROCESSES = min(2, os.cpu_count() or 1)  # processes recording and committing GenAI sessions


def register(sub: argparse._SubParsersAction) -> None:
    parser = add_command(
        sub, "serve",
        description="Serve OTLP/HTTP on /v1/traces (protobuf or JSON bodies, optionally gzip). Every span is "
        "stored as it is; GenAI chat spans of other instrumentations also become sessions, as with prunegate "
        "import. A request is answered 200 only once its spans are in a committed segment; 413 when the body "
        "is too large, 429 (Retry-After) when too many requests are in flight, 503 (Retry-After) when the store "
        "refuses a write. Binds 127.0.0.1 unless --host says otherwise.",
    )
    options.add_store(parser)
    options.add_listen(parser, port_default=4318, what="the OTLP/HTTP receiver", zero_picks=True)
    parser.add_argument("--token", type=options.nonempty, help="require 'Authorization: Bearer TOKEN' on every request (401 otherwise)")
    parser.add_argument("--max-body", type=options.positive, default=16 << 20, metavar="BYTES",
                        help="largest request body, before and after gzip (default 16 MiB; 413 above)")
    parser.add_argument("--max-inflight", type=options.positive, default=4, metavar="N",
                        help="requests decoded and written at once; more get 429 with Retry-After (default 4)")
    parser.add_argument("--compact-every", type=options.nonnegative, default=64, metavar="N",
                        help="compact the store in the background after every N requests, in a process at lower "
                        "priority, resting twice the last compaction's time after it and waiting (up to 30 s) "
                        "while GenAI conversations are overdue as sessions (0: never; default 64)")
    parser.add_argument("--conversation-idle", type=options.nonneg_seconds, default=30.0, metavar="S",
                        help="a GenAI conversation arriving over several requests becomes one session once no "
                        "turn of it has come for S seconds, or at shutdown (default 30; 0: one session per "
                        "request, holding the conversation up to that turn)")
    options.add_detail(parser, "full")
    parser.add_argument("--metrics", nargs="?", type=options.nonnegative, const=METRICS_PORT, default=None, metavar="PORT",
                        help=f"serve Prometheus metrics (serve's health: spans/s, requests in flight, 429s, pending "
                        f"conversations, memory; docs/metrics.md) on http://HOST:PORT/metrics (default port "
                        f"{METRICS_PORT}; 0 picks one)")
    parser.add_argument("--conversation-memory", type=options.positive, default=256, metavar="MIB",
                        help="conversations waiting for --conversation-idle hold at most this much content "
                        "(default 256 MiB); past it the conversations quiet the longest are spilled to the "
                        "journal (read back when due), and when even those fill it requests get 429 with Retry-After")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.wire.serve import PATH, Receiver, make_server

    store = options.store_of(args)
    try:
        store.ensure()
    except OSError as exc:
        raise CommandError(f"cannot create the store {store.path}: {exc.strerror or exc}") from None
    try:
        receiver = Receiver(store, max_body=args.max_body, max_inflight=args.max_inflight, token=args.token,
                            conversation_idle=args.conversation_idle,
                            conversation_memory=args.conversation_memory << 20, detail=args.detail,
                            session_processes=SESSION_PROCESSES if args.conversation_idle > 0 else 0)
        adopted = receiver.recover()
    except OSError as exc:
        raise CommandError(f"cannot keep the waiting-conversation journal under {store.layout.root}: "
                           f"{exc.strerror or exc}") from None
    try:
        server = make_server(receiver, args.host, args.port)
    except OSError as exc:
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    host, port = str(server.server_address[0]), int(server.server_address[1])
    if args.metrics is not None:
        from tracer.spans.metrics import observe_receiver, prometheus_port, prometheus_provider

        try:
            provider = prometheus_provider(args.metrics, args.host)
        except OSError as exc:
            server.server_close()
            raise CommandError(f"cannot serve metrics on {args.host}:{args.metrics}: {exc.strerror or exc}") from None
        observe_receiver(provider, receiver, args.max_inflight)
        print(f"prunegate serve: metrics on http://{host}:{prometheus_port(provider, args.host)}/metrics", flush=True)
    compactor = None
    if args.compact_every:
        from tracer.wire.compaction import Compactor

        compactor = Compactor(store, args.compact_every, lambda: receiver.stats.requests,
                              receiver.conversations.overdue,
                              lambda line: print(f"prunegate serve: {line}", file=sys.stderr, flush=True))
        compactor.start()
    if args.conversation_idle > 0:
        _sessions_in_background(receiver, args.conversation_idle)

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"prunegate serve: listening on http://{host}:{port}{PATH} -> {store.path}", flush=True)
    if adopted:
        print(f"prunegate serve: {adopted} model-call spans of conversations a stopped serve left waiting "
              "were taken over", flush=True)
    server.serve_forever()
    server.server_close()
    if compactor is not None and compactor.stop():
        print("prunegate serve: the compaction under way was stopped with serve (nothing lost: the store is as "
              "it was before it; the next compaction does its work)", flush=True)
    receiver.flush_conversations(force=True)  # the conversations still going become sessions now
    receiver.close()
    receiver.conversations.close()
    if len(receiver.conversations):
        print(f"prunegate serve: {len(receiver.conversations)} model-call spans could not be made into sessions "
              "(the store refused them; their raw spans are stored)", file=sys.stderr, flush=True)
    s = receiver.stats
    refused = ", ".join(f"{n} x {code}" for code, n in sorted(s.refused.items())) or "none"
    print(f"prunegate serve: stopped; committed {s.spans} spans from {s.requests} requests "
          f"({s.sessions} GenAI sessions); refused: {refused}; conversations spilled past the memory cap: "
          f"{receiver.conversations.spilled} (read back: {receiver.conversations.reloaded})", flush=True)
    return status.SUCCESS


def _sessions_in_background(receiver: Any, idle: float) -> None:
    """One daemon thread turning quiet conversations into sessions (see tracer.wire.serve)."""

    def loop() -> None:
        while True:
            threading.Event().wait(min(1.0, idle / 4))
            receiver.flush_conversations()

    threading.Thread(target=loop, name="prunegate-serve-sessions", daemon=True).start()
