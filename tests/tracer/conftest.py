"""Fixtures shared by the tests of several tracer wings (spans, guard, store, traffic)."""

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


@pytest.fixture
def rec() -> Recorder:
    """A real OpenTelemetry SDK pipeline into memory, one per test."""
    return Recorder()


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
