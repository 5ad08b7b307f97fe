"""Fixtures shared by the tests of several tracer wings (spans, guard, store, traffic)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.otel_memory import Recorder
from tests.servers import free_port, wait_for_port


@pytest.fixture
def rec() -> Recorder:
    """A real OpenTelemetry SDK pipeline into memory, one per test."""
    return Recorder()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A local S3 stand-in: moto's server (``moto[server]``, test extra) as a process on 127.0.0.1."""
    pytest.importorskip("boto3", reason="boto3 and moto[server] are in the test extra")
    port = free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, proc, "moto_server")
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def s3(s3_endpoint: str) -> Any:
    """A boto3 S3 client of the stand-in (any key pair: moto accepts every one)."""
    import boto3

    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")
