"""Fixtures shared by several test modules, and the markers of the quick loop.

Markers (registered in pyproject.toml): ``browser`` for the Playwright tests against a real
dashboard server, ``slow`` for tests that take 15 s or more on a loaded 2-CPU machine. The quick
loop leaves both out: ``.venv/bin/pytest -m "not browser and not slow"``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.otel_memory import Recorder
from tests.traffic import TAU
from tracer.traffic.importers import Conversation, read_file


@pytest.fixture
def rec() -> Recorder:
    """A real OpenTelemetry SDK pipeline into memory, one per test."""
    return Recorder()


@pytest.fixture(scope="session")
def tau_sessions() -> list[Conversation]:
    """Every τ-bench dialogue of the traffic (full or sample) as the importer reads it, read once."""
    return [c for c in read_file(TAU) if isinstance(c, Conversation)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A local S3 stand-in: moto's server (``moto[server]``, test extra) as a process on 127.0.0.1."""
    pytest.importorskip("boto3", reason="boto3 and moto[server] are in the test extra")
    port = free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.time() < deadline and proc.poll() is None, "moto_server did not start"
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def s3(s3_endpoint: str) -> Any:
    """A boto3 S3 client of the stand-in (any key pair: moto accepts every one)."""
    import boto3

    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")
