"""``serve`` against hostile clients, with real sockets (issue #26): slow clients lose their slot at
the request deadline, every malformed request gets a status and a reason, a 429 or 413 reaches a
client still sending its body, a client that disconnects is one log line, and what is accepted is
read back from the store."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tracer.store import Store
from tracer.wire.serve import PATH, Receiver, make_server


class Server:
    def __init__(self, store, **kw) -> None:
        self.store = Store(store)
        self.receiver = Receiver(self.store, **kw)
        self.httpd = make_server(self.receiver, "127.0.0.1", 0)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def request(self, body: bytes, content_type: str = "application/json", headers: str = "") -> tuple[int, str]:
        """One request on a fresh socket: (status, response body)."""
        with self.connect() as s:
            s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
                      f"Content-Length: {len(body)}\r\n{headers}\r\n".encode() + body)
            return read_response(s)


def read_response(s: socket.socket) -> tuple[int, str]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed without an answer after {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next((h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")),
                      b"0"))
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return int(head.split()[1]), rest.decode()


@pytest.fixture()
def server(tmp_path) -> Iterator[Server]:
    srv = Server(tmp_path / "store", max_inflight=2, request_deadline=1.5, max_body=1_000_000)
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def otlp(span_id: str = "1122334455667788", start: int | str = "1700000000000000000") -> bytes:
    span = {"traceId": "ab" * 16, "spanId": span_id, "name": "work", "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": "1700000001000000000"}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def stored(srv: Server) -> set[str]:
    return {r["span_id"] for r in srv.store.query("SELECT span_id FROM spans")} if srv.store.path.exists() else set()


def test_clients_trickling_their_body_lose_their_slots_at_the_deadline(server):
    slow = []
    for _ in range(2):  # every slot: headers, then one byte of a 100-byte body every 0.3 s
        s = server.connect()
        s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: 100\r\n\r\n{".encode())
        slow.append(s)
    time.sleep(0.3)
    assert server.request(otlp("aa" * 8))[0] == 429  # the slots are held...
    start = time.monotonic()
    status = 0
    while status != 200 and time.monotonic() - start < 10:
        for s in slow:
            try:
                s.sendall(b" ")
            except OSError:
                pass
        time.sleep(0.3)
        status = server.request(otlp("bb" * 8))[0]
    assert status == 200 and time.monotonic() - start < 4  # ...until the deadline frees them
    for s in slow:  # the slow clients' connections were closed
        s.settimeout(5)
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
        s.close()
    assert stored(server) == {"bb" * 8}


def test_a_client_trickling_its_headers_is_closed_at_the_deadline(server):
    s = server.connect()
    start = time.monotonic()
    s.sendall(f"POST {PATH} HTTP/1.1\r\n".encode())
    got = b"x"
    while got and time.monotonic() - start < 8:
        try:
            s.sendall(b"X-Slow: 1\r\n")
            s.settimeout(0.3)
            got = s.recv(100)
        except TimeoutError:
            continue
        except OSError:
            got = b""
    assert not got and time.monotonic() - start < 4
    s.close()


@pytest.mark.parametrize(("name", "raw", "status", "reason"), [
    ("huge time", otlp(start=2**64 - 1), 400, "out of range"),
    ("deep JSON", b"[" * 10_000 + b"]" * 10_000, 400, "nested too deeply"),
    ("not UTF-8", b'{"resourceSpans": "\xff"}', 400, "not UTF-8"),
    ("not JSON", b"{nope", 400, "cannot be parsed"),
    ("wrong type", b"{}", 415, "Content-Type"),
])
def test_malformed_bodies_get_a_status_and_a_reason(server, name, raw, status, reason):
    got, body = server.request(raw, "text/plain" if name == "wrong type" else "application/json")
    assert got == status and reason in json.loads(body)["error"], (name, body)
    assert stored(server) == set()


def test_malformed_headers_get_a_status_and_a_reason(server):
    with server.connect() as s:  # a Content-Length that is not ASCII digits
        s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
                  + "Content-Length: \u0663\u0660\r\n\r\n".encode())
        status, body = read_response(s)
        assert status == 411 and "not a decimal number" in body
    with server.connect() as s:  # one header line longer than the server reads
        s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 70_000}\r\n\r\n".encode())
        assert read_response(s)[0] == 431
    with server.connect() as s:  # no Content-Length
        s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n".encode())
        assert read_response(s)[0] == 411


def test_an_empty_protobuf_request_is_a_valid_export(server):
    assert server.request(b"", "application/x-protobuf")[0] == 200


def test_429_and_413_reach_a_client_still_sending_a_large_body(server):
    held = [server.connect() for _ in range(2)]
    for s in held:
        s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: 100\r\n\r\n".encode())
    time.sleep(0.2)
    for length, want in ((900_000, 429), (50_000_000, 413)):
        with server.connect() as s:
            s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {length}\r\n\r\n".encode())
            try:
                s.sendall(b" " * min(length, 900_000))  # keeps sending after the answer was written
            except OSError:
                pass
            assert read_response(s)[0] == want
    for s in held:
        s.close()


def test_a_client_disconnecting_is_one_log_line(server, caplog, capfd):
    caplog.set_level(logging.INFO, logger="tracer.wire.serve")
    with server.connect() as s:
        s.sendall(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: 1000\r\n\r\n{".encode())
    time.sleep(0.5)
    lines = [r.getMessage() for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(lines) == 1 and "ConnectionResetError" in lines[0]
    assert "Traceback" not in capfd.readouterr().err
    assert server.request(otlp())[0] == 200 and stored(server) == {"1122334455667788"}
