"""OTLP/HTTP in: ``POST /v1/traces`` (protobuf or JSON, optionally gzip) into the trace store.

Why a receiver: agents on many hosts export with whatever OpenTelemetry SDK or Collector they
already run; ``prunegate serve`` is the one place their spans become a store. What it promises:

- **nothing acknowledged that is not durable**: the 200 is sent only after the request's spans are
  in a committed segment (fsynced, renamed into ``segments/``); any failure is a 503 with
  ``Retry-After`` and the client (SDK or Collector) sends the batch again. A retried batch is
  harmless: readers and compaction show each ``(trace_id, span_id)`` once, and converted GenAI
  sessions are claimed (``claims/``) so they are committed once;
- **bounded memory**: a body over ``max_body`` bytes (before or after gzip) is refused with 413,
  without being read; at most ``max_inflight`` requests are decoded and written at once, the next
  ones get 429 with ``Retry-After`` instead of queueing in memory;
- **a deadline per request** (``request_deadline``, headers and body together): a client that
  trickles its request loses its connection and its slot when it passes, so a few slow clients
  cannot hold every slot; every malformed request gets a status and a reason (400, 411, 413, 415,
  431), a 413 or 429 is answered before the body is read and the connection closed only after the
  client has had time to read it; a client that disconnects is one log line, never a traceback;
- spans are stored **as they are** (prunegate's own spans are sessions already); the GenAI chat
  spans of other instrumentations also become import sessions through the same importer as
  ``prunegate import`` (:func:`tracer.traffic.importers.conversations_from_genai_rows`).

Conversations over many requests: an agent exports each turn's model call as it ends, so one
conversation arrives in many requests. The receiver keeps conversations still going
(:class:`tracer.wire.waiting.Conversations`: stitched call by call by the importer's rules,
bounded, journaled so a restart after ``kill -9`` finishes them); a conversation becomes one session
once no call of it has arrived for ``conversation_idle`` seconds (and at shutdown). Its raw spans were durable on arrival; the session
is derived from them, and its id is the one ``prunegate import`` gives the same spans read from a
Collector file, so importing that file later adds nothing. With ``conversation_idle=0`` every request
commits the conversations it carries at once (one session per request, holding the conversation up
to that turn).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import socket
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tracer.contract import names
from tracer.store import Store
from tracer.store.rows import SpanRow, rows_to_table
from tracer.traffic import jsonparse
from tracer.traffic.otlp_json import _Bad, rows_from_protobuf, rows_from_request
from tracer.wire.waiting import JOURNAL_DIR, Conversations

log = logging.getLogger(__name__)
COMMIT_CHUNK = 256  # conversations recorded and committed at a time (about one segment of spans)

PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class _Refused(Exception):
    """A request answered with an error status (and a one-line reason)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass
class ReceiverStats:
    """Counters of what the receiver did (spans counted once they are committed)."""

    requests: int = 0
    spans: int = 0
    sessions: int = 0  # GenAI conversations committed as import sessions
    refused: dict[int, int] = field(default_factory=dict)  # status -> count
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, **kw: int) -> None:
        with self.lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def refuse(self, status: int) -> None:
        with self.lock:
            self.refused[status] = self.refused.get(status, 0) + 1


def decode_body(body: bytes, content_type: str, encoding: str, max_body: int) -> Any:
    """An ExportTraceServiceRequest from a request body: the parsed protobuf message, or the OTLP
    JSON object (:meth:`Receiver.ingest` reads either)."""
    if encoding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(wbits=31)
        try:
            body = inflater.decompress(body, max_body + 1)
        except zlib.error as exc:
            raise _Refused(400, f"gzip body cannot be decompressed: {exc}") from None
        if len(body) > max_body:
            raise _Refused(413, f"body is over {max_body} bytes once decompressed")
    elif encoding not in ("", "identity"):
        raise _Refused(415, f"unsupported Content-Encoding {encoding!r} (gzip or none)")
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == PROTOBUF:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        msg = ExportTraceServiceRequest()
        try:
            msg.ParseFromString(body)
        except DecodeError as exc:
            raise _Refused(400, f"protobuf body cannot be parsed: {exc}") from None
        return msg  # read field by field (rows_from_protobuf), not through its JSON form
    if kind == JSON:
        try:
            value = jsonparse.loads(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise _Refused(400, f"JSON body is not UTF-8: {exc.reason} at byte {exc.start}") from None
        except jsonparse.Unparseable as exc:  # nested too deeply, NaN
            raise _Refused(400, f"JSON body cannot be parsed: {exc}") from None
        except ValueError as exc:
            raise _Refused(400, f"JSON body cannot be parsed: {exc}") from None
        if not isinstance(value, dict):
            raise _Refused(400, f"JSON body must be an object, got {type(value).__name__}")
        return value
    raise _Refused(415, f"unsupported Content-Type {content_type!r} ({PROTOBUF} or {JSON})")


def foreign_genai(rows: list[SpanRow]) -> list[SpanRow]:
    """Spans of other instrumentations (not prunegate's own scope or attributes)."""
    return [r for r in rows if r.get("scope_name") != names.SCOPE
            and not any(k.startswith(names.PREFIX) for k in (r.get("attributes") or {}))]


class Receiver:
    """Turns one decoded request into committed segments (and import sessions)."""

    def __init__(self, store: Store, *, max_body: int = 16 << 20, max_inflight: int = 4,
                 token: str | None = None, wait_busy: float = 5.0, conversation_idle: float = 0.0,
                 conversation_memory: int = 256 << 20, detail: str = "full",
                 request_deadline: float = 30.0, session_processes: int = 0) -> None:
        self.store = store
        self.request_deadline = request_deadline  # seconds for a request's headers and body together
        self.detail = detail  # of the GenAI conversations recorded as sessions (docs/spans.md)
        self.max_body = max_body
        self.token = token
        self.wait_busy = wait_busy
        self.slots = threading.BoundedSemaphore(max_inflight)
        self.stats = ReceiverStats()
        self.conversations = Conversations(conversation_idle, max_bytes=conversation_memory,
                                           journal_root=store.layout.root / JOURNAL_DIR)
        self._flushing = threading.Lock()
        # sessions recorded and committed in processes of their own (WorkerProcess; serve's default), a
        # chunk each at a time; none: in this process
        self.sessions_workers = [WorkerProcess("prunegate-serve-sessions", _commit_in_worker, store, detail, wait_busy)
                                 for _ in range(session_processes)]
        self._sending = ThreadPoolExecutor(session_processes, "prunegate-serve-send") if session_processes > 1 else None

    def authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        return hmac.compare_digest((header or "").encode(), f"Bearer {self.token}".encode())

    def ingest(self, request: Any) -> int:
        """Commit the request's spans (an OTLP JSON object or a parsed protobuf message); returns how
        many. Raises ``_Refused`` (400 or 503)."""
        try:
            rows = list(rows_from_request(request) if isinstance(request, dict) else rows_from_protobuf(request))
        except _Bad as bad:
            raise _Refused(400, f"{bad.where or 'request'}: {bad.message}") from None
        if not rows:
            return 0
        if self.conversations.idle > 0 and self.conversations.full():
            raise _Refused(429, f"GenAI conversations waiting hold {self.conversations.waiting_bytes} bytes, at the "
                                f"cap of {self.conversations.max_bytes}: try again once some are done", retry_after=2)
        try:
            self.store.write_table(rows_to_table(rows))  # fsync + rename: the commit
        except OSError as exc:
            raise _Refused(503, f"the store refused the spans: {exc.strerror or exc}", retry_after=5) from None
        foreign = foreign_genai(rows)
        if self.conversations.idle <= 0:
            self._sessions(foreign)
        else:
            try:
                self.conversations.add(foreign)
            except OSError as exc:  # the spans are stored; the retry finds them waiting or adds them
                raise _Refused(503, f"the waiting-conversation journal refused the spans: {exc.strerror or exc}",
                               retry_after=5) from None
        self.stats.count(requests=1, spans=len(rows))
        return len(rows)

    def recover(self) -> int:
        """Adopt the conversations a ``serve`` killed before it finished them left waiting; returns
        how many model-call spans (with ``conversation_idle=0`` they are committed now)."""
        n = self.conversations.adopt()
        if n and self.conversations.idle <= 0:
            self.flush_conversations(force=True)
        return n

    def flush_conversations(self, *, force: bool = False) -> int:
        """Commit the conversations quiet for ``conversation_idle`` seconds (every one with ``force``,
        at shutdown), :data:`COMMIT_CHUNK` at a time (so a backlog never sits in memory as
        conversations all at once), a chunk in each session process at once; returns how many
        sessions were committed. A store that refuses them keeps them waiting for the next call
        (logged)."""
        from tracer.traffic.importers import no_content_refusal

        with self._flushing:
            waiting = self.conversations
            if waiting.empty:
                empty, waiting.empty = waiting.empty, {}
                log.warning("prunegate serve: GenAI spans not turned into a session: %s", no_content_refusal("otlp", empty))
            total = 0
            workers: list[WorkerProcess | None] = [*self.sessions_workers] or [None]
            while True:
                chunks = []
                for worker in workers:
                    chains = waiting.due(force=force, limit=COMMIT_CHUNK)
                    if not chains:
                        break
                    chunks.append((worker, chains))
                if not chunks:
                    return total
                if self._sending is None or len(chunks) == 1:
                    done = [self._commit_chains(*chunks[0])]
                else:
                    done = list(self._sending.map(lambda chunk: self._commit_chains(*chunk), chunks))
                total += sum(n for n in done if n is not None)
                if None in done:
                    return total

    def _commit_chains(self, worker: WorkerProcess | None, chains: list[Any]) -> int | None:
        """One chunk of due chains as sessions (in ``worker``, a session process, when there is one);
        None when the store refused them or the process stopped (they wait again)."""
        waiting = self.conversations
        items = [(chain.last, chain.first_trace, list(chain.span_ids)) for chain in chains]
        try:
            if worker is not None:
                stored, warnings, refused = worker.call(items)
            else:
                stored, warnings, refused = commit_due(self.store, items, self.detail, self.wait_busy)
        except (OSError, EOFError) as exc:  # the session process died: a new one takes the next round
            waiting.put_back(chains)
            log.warning("prunegate serve: the session process stopped (%s: %s); trying again later",
                        type(exc).__name__, exc)
            return None
        for warning in warnings:
            log.warning("prunegate serve: %s", warning)
        if refused is not None:
            waiting.put_back(chains)
            log.warning("prunegate serve: %s; trying again later", refused)
            return None
        waiting.done(chains)
        self.stats.count(sessions=stored)
        return stored

    def _sessions(self, rows: list[SpanRow]) -> None:
        """GenAI chat spans -> import sessions, committed whole (or a 503: the retry redoes it)."""
        from tracer.traffic.importers import Refusal, conversations_from_genai_rows

        convs = []
        for conv in conversations_from_genai_rows(rows, "otlp") if rows else []:
            if isinstance(conv, Refusal):  # the spans are stored as they are; only the session is left out
                log.warning("prunegate serve: GenAI spans not turned into a session: %s", conv)
            else:
                convs.append(conv)
        if convs:
            stored, warnings, refused = commit_conversations(self.store, convs, self.detail, self.wait_busy)
            for warning in warnings:
                log.warning("prunegate serve: %s", warning)
            if refused is not None:
                raise _Refused(503, refused, retry_after=5)
            self.stats.count(sessions=stored)

    def close(self) -> None:
        """Stop the session processes (after the last :meth:`flush_conversations`)."""
        for worker in self.sessions_workers:
            worker.close()
        if self._sending is not None:
            self._sending.shutdown()


Committed = tuple[int, list[str], str | None]  # sessions stored, warnings to log, why none were (or None)


def commit_due(store: Store, items: list[tuple[Any, str, list[str]]], detail: str, wait_busy: float) -> Committed:
    """Due conversations, each ``(latest call, first trace id, span ids)`` of a stitched chain, as
    import sessions (what the session process runs; see :class:`WorkerProcess`)."""
    from tracer.traffic.importers import Refusal, conversation_of_chain

    convs, warnings = [], []
    for last, first_trace, span_ids in items:  # recording checks each context (a refusal: a warning, nothing stored)
        conv = conversation_of_chain(last, first_trace, span_ids, "otlp", check=False)
        if isinstance(conv, Refusal):
            warnings.append(f"GenAI spans not turned into a session: {conv}")
        else:
            convs.append(conv)
    if not convs:
        return 0, warnings, None
    stored, more, refused = commit_conversations(store, convs, detail, wait_busy)
    return stored, warnings + more, refused


def commit_conversations(store: Store, convs: list[Any], detail: str, wait_busy: float) -> Committed:
    """Record and commit conversations as import sessions (claimed: each once); ``refused`` says why
    when not all were committed (the caller keeps them for a retry)."""
    from tracer.traffic.committer import SessionCommitter
    from tracer.traffic.recorded import record_conversation, session_id_for

    committer = SessionCommitter(store, wait_busy=wait_busy)
    for conv in convs:
        sid = session_id_for(conv)
        committer.add(sid, _recorder(record_conversation, conv, sid, detail))
    report = committer.finish()
    warnings = [f"GenAI conversation {sid} could not be recorded: {reason}" for sid, reason in report.failed.items()]
    if report.spooled or report.lost or report.busy:
        return 0, warnings, f"GenAI sessions not committed ({report.store_error or 'held by another process'})"
    return len(report.stored), warnings, None


class WorkerProcess:
    """A process of its own running ``fn(*args, item)`` for each item sent (:meth:`call`).

    Why: ``serve`` decodes and journals every request in one process, whose GIL allows it one core.
    Recording and committing a conversation costs about a millisecond of CPU, and at fleet rates
    (hundreds of conversations a second) that on top was more than the core: sessions fell behind
    the conversations. Compacting the store in process held DuckDB's memory in serve's (most of its
    peak RSS; docs/scale.md). So serve runs both in processes of their own: the receiver keeps
    stitching and sends each chunk of due chains (their latest call, pickled) to a session process
    (serve runs two where there are two cores: a chunk each at once), which records and commits
    them on another core and answers what it stored; the
    receiver then forgets them, or keeps them waiting when it did not. A process that dies (killed,
    crashed) loses nothing: its chunk waits again and a new process is started at the next call; a
    session it committed before dying is claimed, so it is not committed twice. Started on first use
    ("spawn": no fork of a threaded server), named after ``name`` without its ``prunegate-`` (what
    ``ps``/``top`` show), at ``nice`` more than serve (the compaction process: work that can wait)."""

    def __init__(self, name: str, fn: Callable[..., Any], *args: Any, nice: int = 0) -> None:
        self.name = name
        self.nice = nice
        self._fn, self._args = fn, args
        self._proc: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The running process's id (None before the first call and after it died)."""
        return self._proc.pid if self._proc is not None else None

    def call(self, item: Any) -> Any:
        """``fn(*args, item)`` in the process; raises OSError or EOFError when it died (a new one is
        started at the next call)."""
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                self._start()
            try:
                self._conn.send(item)
                return self._conn.recv()
            except (OSError, EOFError):
                self._stop()
                raise

    def _start(self) -> None:
        import multiprocessing

        self._stop()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_loop, args=(child, self._fn, self._args, self.nice,
                                                            self.name.removeprefix("prunegate-")),
                                 name=self.name, daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def _stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join(timeout=30)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
            self._proc = None

    def close(self) -> None:
        """Let the process finish what it is doing and exit (it does when its pipe closes)."""
        with self._lock:
            self._stop()

    def kill(self) -> None:
        """Kill the process now, mid-call or not (a :meth:`call` under way raises EOFError): for work
        that is safe to lose, such as a compaction."""
        proc = self._proc
        if proc is not None and proc.is_alive():
            proc.kill()


def _worker_loop(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...], nice: int = 0, comm: str = "") -> None:
    """A worker process's loop: an item in, ``fn``'s answer out, until the receiver goes away. Ctrl-C
    (SIGINT to the terminal's process group) is serve's to handle: serve ends its workers itself."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        os.nice(nice)
    if comm:
        try:
            Path("/proc/self/comm").write_text(comm[:15])  # the name ps and top show (Linux)
        except OSError as exc:
            log.debug("prunegate serve: process not renamed %s: %s", comm, exc)
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return  # the receiver closed the pipe, or died (kill -9): nothing is half done here
        try:
            conn.send(fn(*args, item))
        except (OSError, EOFError):
            return


def _commit_in_worker(store: Store, detail: str, wait_busy: float, items: list[tuple[Any, str, list[str]]]) -> Committed:
    """:func:`commit_due` in the session process; a failure is answered (the chunk waits again)."""
    try:
        return commit_due(store, items, detail, wait_busy)
    except Exception as exc:  # noqa: BLE001 - said to the receiver, which keeps the chunk waiting
        return 0, [], f"the session process failed: {type(exc).__name__}: {exc}"


def _recorder(record: Callable[..., Any], conv: Any, sid: str, detail: str = "full") -> Callable[[Any], None]:
    def run(provider: Any) -> None:
        record(conv, provider, session_id=sid, capture_content=True, detail=detail)
    return run


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = 30  # between requests on a kept-alive connection; a request itself has request_deadline

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("prunegate serve: " + format, *args)

    def handle_one_request(self) -> None:
        """One request under its deadline: when it passes, the socket is shut down, so a read of the
        headers or the body returns and the request's slot is released."""
        self._expired = False
        timer = threading.Timer(self.server.receiver.request_deadline, self._expire)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError, OSError) as exc:
            self.close_connection = True
            self._gone(exc)
        finally:
            timer.cancel()

    def _expire(self) -> None:
        self._expired = True
        log.info("prunegate serve: %s: request not received within %.0f s: connection closed",
                 self.client_address[0], self.server.receiver.request_deadline)
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _gone(self, exc: BaseException) -> None:
        """A client that went away (or ran out its deadline): one line, no traceback."""
        if not self._expired:
            log.info("prunegate serve: %s: client disconnected (%s)", self.client_address[0],
                     type(exc).__name__)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        receiver = self.server.receiver
        try:
            self._post(receiver)
        except _Refused as exc:
            receiver.stats.refuse(exc.status)
            self._reply(exc.status, json.dumps({"error": str(exc)}).encode(), JSON, exc.retry_after)
        except (ConnectionError, TimeoutError) as exc:
            self.close_connection = True
            self._gone(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, answered, not the connection
            log.warning("prunegate serve: request failed: %s: %s", type(exc).__name__, exc)
            receiver.stats.refuse(500)
            self.close_connection = True
            self._reply(500, json.dumps({"error": f"internal error: {type(exc).__name__}"}).encode(), JSON)

    def _post(self, receiver: Receiver) -> None:
        if self.path.split("?", 1)[0] != PATH:
            self._drain_or_close()
            raise _Refused(404, f"only {PATH} is served")
        if not receiver.authorized(self.headers.get("Authorization")):
            self._drain_or_close()
            raise _Refused(401, "missing or wrong bearer token")
        length = self.headers.get("Content-Length")
        if length is None or not (length.isascii() and length.isdigit()):
            self.close_connection = True
            raise _Refused(411, "Content-Length required (a decimal number of bytes)"
                           if length is None else f"Content-Length {length!r} is not a decimal number of bytes")
        if int(length) > receiver.max_body:
            self.close_connection = True  # not read: the connection is dropped after the reply
            raise _Refused(413, f"body of {length} bytes is over the limit of {receiver.max_body}")
        if not receiver.slots.acquire(timeout=0.5):
            self.close_connection = True  # answered before the body is read
            raise _Refused(429, "too many requests in flight", retry_after=1)
        try:
            body = self.rfile.read(int(length))
            if len(body) < int(length):
                self.close_connection = True
                raise ConnectionResetError(f"body ended after {len(body)} of {length} bytes")
            request = decode_body(body, self.headers.get("Content-Type", ""),
                                  self.headers.get("Content-Encoding", "").lower(), receiver.max_body)
            del body
            receiver.ingest(request)
        finally:
            receiver.slots.release()
        kind = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        self._reply(200, b"" if kind == PROTOBUF else b"{}", kind)

    def _drain_or_close(self) -> None:
        length = self.headers.get("Content-Length", "")
        if length.isascii() and length.isdigit() and int(length) <= self.server.receiver.max_body:
            self.rfile.read(int(length))
        else:
            self.close_connection = True

    def _reply(self, status: int, body: bytes, content_type: str, retry_after: int | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type or JSON)
            self.send_header("Content-Length", str(len(body)))
            if retry_after is not None:
                self.send_header("Retry-After", str(retry_after))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            if self.close_connection and status in (411, 413, 429):
                self._linger()
        except (ConnectionError, TimeoutError) as exc:
            self.close_connection = True
            self._gone(exc)

    def _linger(self, seconds: float = 2.0, most: int = 64 << 20) -> None:
        """After answering a request whose body was not read: stop sending, then read and drop what
        the client still sends (bounded), so closing does not reset the connection before the client
        has read the answer (a reset can arrive first and lose the 413/429)."""
        self.connection.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        dropped = 0
        while dropped < most and (left := deadline - time.monotonic()) > 0:
            self.connection.settimeout(left)
            try:
                chunk = self.connection.recv(1 << 16)
            except OSError:
                return
            if not chunk:
                return
            dropped += len(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line for a request that failed outside the handler's own handling (never a traceback)."""
        import sys

        exc = sys.exc_info()[1]
        log.info("prunegate serve: %s: connection ended: %s: %s", client_address[0], type(exc).__name__, exc)


def make_server(receiver: Receiver, host: str = "127.0.0.1", port: int = 4318) -> ThreadingHTTPServer:
    """An HTTP server (not started) that feeds ``receiver``; ``port=0`` picks a free port."""
    server = _Server((host, port), _Handler)
    server.receiver = receiver
    return server
