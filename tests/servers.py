"""Real processes the tests start: ``prunegate`` commands, and servers on 127.0.0.1 (a free port,
waiting until one answers).

One copy of what the command and server tests (``serve``, ``dashboard``, moto's S3, a Collector,
Phoenix, the browser tests) each used to write for themselves.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.paths import REPO


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen, what: str, seconds: float = 30.0) -> None:
    """Return once ``port`` on 127.0.0.1 accepts connections; fail if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, f"{what} did not start"
            time.sleep(0.2)


def wait_for_http(url: str, proc: subprocess.Popen, what: str, *, seconds: float = 60.0,
                  expect: bytes | None = None, output: Callable[[], str] = lambda: "",
                  pause: float = 0.3) -> None:
    """Return once ``url`` answers (with body ``expect`` when given); fail with the end of ``output()``
    if ``proc`` exits or time runs out first."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback
                if expect is None or resp.read().strip() == expect:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not start: {output()[-2000:]}")
        time.sleep(pause)


def prunegate_command() -> list[str]:
    """How to run ``prunegate``: the console script of this virtualenv, else on PATH, else the module."""
    script = Path(sys.executable).parent / "prunegate"
    if script.exists():
        return [str(script)]
    found = shutil.which("prunegate")
    return [found] if found else [sys.executable, "-m", "tracer.cli"]


def run_prunegate(*args: str, env: Mapping[str, str] | None = None, timeout: float = 600,
                  **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``python -m tracer.cli ARGS`` run from the repository as a user runs it, output captured as
    text; ``env`` is added to this process's environment."""
    return subprocess.run([sys.executable, "-m", "tracer.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, **kwargs)
