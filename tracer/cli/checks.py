"""Argument checks every subcommand shares, run before any work: one line, exit 2, no traceback.

``argparse`` ``type=`` functions for single values, :func:`check_args` for what depends on
several (the hard ceiling against the budget) or on the environment (``$PRUNEGATE_STORE``), and
:class:`OneLineParser`, whose usage errors are one line.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from policies.limits import limits_problem
from tracer.contract.settings import STORE_ENV
from tracer.store import BucketURL, is_bucket

ENV_STORE = STORE_ENV


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def store_dir(text: str) -> str:
    """``--store``: a directory, or a path that does not exist yet (the first write creates it), or
    ``s3://bucket/prefix``."""
    problem = store_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


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


def positive_int(text: str) -> int:
    """A positive integer (``1_000`` allowed): token budgets, ceilings, worker counts."""
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonneg_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number between 0 and 1 (a share: retention, a quantile)."""
    return _float(text, "a number between 0 and 1", "a number between 0 and 1", lambda v: 0.0 <= v <= 1.0)


def positive_seconds(text: str) -> float:
    """A finite, positive number of seconds."""
    return _seconds(text, "positive", lambda v: v > 0)


def nonneg_seconds(text: str) -> float:
    """A finite, non-negative number of seconds."""
    return _seconds(text, "non-negative", lambda v: v >= 0)


def _seconds(text: str, kind: str, ok: Callable[[float], bool]) -> float:
    return _float(text, "a number of seconds", f"a finite, {kind} number of seconds", ok)


def _float(text: str, expected: str, in_range: str, ok: Callable[[float], bool]) -> float:
    """``text`` as a finite float that ``ok`` accepts; else one line saying what was expected."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not math.isfinite(value) or not ok(value):
        raise argparse.ArgumentTypeError(f"expected {in_range}, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def check_args(args: argparse.Namespace) -> str | None:
    """Checks that span several options or read the environment; the problem, or None."""
    budget, ceiling = getattr(args, "budget", None), getattr(args, "hard_ceiling", None)
    if isinstance(budget, list):  # compare's sweep: the largest budget must fit under the ceiling
        budget = max((b for b in budget if b is not None), default=None)
    problem = limits_problem(budget, ceiling, budget_required=False, names=("--budget", "--hard-ceiling"))
    if problem:
        return problem
    if hasattr(args, "store") and args.store is None and os.environ.get(ENV_STORE):
        problem = store_problem(os.environ[ENV_STORE])
        if problem:
            return f"${ENV_STORE}: {problem}"
    return None


def fail_usage(prog: str, message: str) -> NoReturn:
    """Print a usage problem as one line and exit 2."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)
