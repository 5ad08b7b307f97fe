"""Argument checks every subcommand shares, run before any work: one line, exit 2, no traceback.

:func:`check_args` for what depends on several options (the hard ceiling against the budget) or on
the environment (``$PRUNEGATE_STORE``), :func:`store_problem` for a store path, and
:class:`OneLineParser`, whose usage errors are one line. The ``type=`` functions of single values
are in :mod:`tracer.cli.options`, with the options.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NoReturn

from policies.limits import limits_problem
from tracer.cli.status import ERROR
from tracer.contract.settings import STORE_ENV
from tracer.store import BucketURL, is_bucket

ENV_STORE = STORE_ENV


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def store_problem(text: str) -> str | None:
    """Why ``text`` cannot be a store directory, or None."""
    if not text.strip():
        return "the store path is empty"
    if is_bucket(text):
        try:
            BucketURL.parse(text)
        except ValueError as exc:
            return str(exc)
        return None
    path = Path(text)
    if path.exists() and not path.is_dir():
        return f"{text} is not a directory (a store is a directory)"
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if not path.exists() and parent is not None and not parent.is_dir():
        return f"{text}: {parent} is not a directory"
    return None


def check_args(args: argparse.Namespace) -> str | None:
    """Checks that span several options or read the environment; the problem, or None."""
    budget, ceiling = getattr(args, "budget", None), getattr(args, "hard_ceiling", None)
    if isinstance(budget, list):  # compare's sweep: the largest budget must fit under the ceiling
        budget = max((b for b in budget if b is not None), default=None)
    problem = limits_problem(budget, ceiling, budget_required=False, names=("--budget", "--hard-ceiling"))
    if problem:
        return problem
    endpoint = getattr(args, "otlp_endpoint", None)
    if endpoint is not None:
        from urllib.parse import urlsplit

        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return f"--otlp-endpoint: expected an http(s) URL such as http://127.0.0.1:4318, got {endpoint!r}"
    for pair in getattr(args, "otlp_header", None) or []:
        if "=" not in pair or not pair.split("=", 1)[0].strip():
            return f"--otlp-header: expected K=V, got {pair!r}"
    host = getattr(args, "host", None)
    if host:
        import socket

        try:
            socket.getaddrinfo(host, None)
        except (socket.gaierror, UnicodeError) as exc:
            return f"--host {host!r}: not an address of this machine or a name that resolves ({exc})"
    if getattr(args, "otlp_endpoint", None) and getattr(args, "trace", True) is False:
        return "--otlp-endpoint sends the recorded replays; it cannot go with --no-trace"
    if getattr(args, "address", None) and getattr(args, "engine", None) != "ray":
        return "--address is for --engine ray"
    if hasattr(args, "store") and args.store is None and os.environ.get(ENV_STORE):
        problem = store_problem(os.environ[ENV_STORE])
        if problem:
            return f"${ENV_STORE}: {problem}"
    return None
