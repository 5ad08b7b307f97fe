"""The options and argument types several commands share, each defined once, and what they select.

Every option more than one command takes is written out here, once (``--store``, ``--json``,
``--host``/``--port``, ``--session``, ``--policies``, ``--workers``, ``--gated``, the replay options,
the OTLP options, the price options), and so is every ``type=`` function (:func:`positive`,
:func:`nonnegative`, :func:`fraction`, :func:`positive_seconds`, :func:`nonneg_seconds`,
:func:`port`, :func:`store_dir`); ``tests/tracer/cli/test_help.py`` fails on a second declaration.
The store path is resolved in one place, :func:`tracer.store.resolve_store`; :func:`store_of`,
:func:`existing_store`, :func:`load_sessions` and :func:`run_sweep` turn parsed options into what
a command works on.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracer.cli.checks import store_problem
from tracer.contract.settings import STORE_HELP
from tracer.errors import CommandError
from tracer.store import resolve_store

if TYPE_CHECKING:
    from tracer.store import Store
    from tracer.traffic.recorded import StoredSessions

__all__ = [
    "add_detail", "add_gated", "add_json", "add_listen", "add_otlp_options", "add_policies", "add_prices", "add_replay_options",
    "add_sessions", "add_store", "add_workers", "existing_store", "fraction", "load_sessions", "nonneg_seconds",
    "nonnegative", "port", "positive", "positive_seconds", "run_sweep", "store_dir", "store_of",
]

LOCALHOST = "127.0.0.1"


# ----------------------------------------------------------------------------- shared options
def add_store(parser: argparse.ArgumentParser) -> None:
    """``--store DIR`` (default ``$PRUNEGATE_STORE``, else ``./prunegate-store``)."""
    parser.add_argument("--store", type=store_dir, help=STORE_HELP)


def add_json(parser: argparse.ArgumentParser, help: str = "print JSON instead of text") -> None:
    """``--json``: machine-readable output."""
    parser.add_argument("--json", action="store_true", help=help)


def add_detail(parser: argparse.ArgumentParser, default: str) -> None:
    """``--detail decisions|checks|full``: how much each recorded session keeps (docs/spans.md)."""
    parser.add_argument("--detail", choices=("decisions", "checks", "full"), default=default,
                        help="how much each recorded session keeps: every message event a span (full), message "
                             "events on the check spans (checks), or only the checks that decided something "
                             f"(decisions); docs/spans.md 'Detail levels' (default {default})")


def add_listen(parser: argparse.ArgumentParser, *, port_default: int, what: str, zero_picks: bool = False) -> None:
    """``--host`` (default 127.0.0.1: this machine only) and ``--port`` of a server (``what``)."""
    parser.add_argument("--host", default=LOCALHOST,
                        help=f"address {what} binds (default {LOCALHOST}: this machine only)")
    parser.add_argument("--port", type=port_or_zero if zero_picks else port, default=port_default,
                        help=f"port (default {port_default}" + ("; 0 picks one)" if zero_picks else ")"))


def add_sessions(parser: argparse.ArgumentParser, help: str) -> None:
    """``--session ID...`` (repeatable; id or name)."""
    parser.add_argument("--session", nargs="+", action="extend", metavar="ID", help=help)


def add_policies(parser: argparse.ArgumentParser, help: str, *, required: bool = False,
                 default: str | None = None) -> None:
    """``--policies A,B,...`` (the syntax of :func:`tracer.lab.compare.parse_policies`)."""
    parser.add_argument("--policies", required=required, default=default, metavar="A,B,...", help=help)


def add_workers(parser: argparse.ArgumentParser, *, default: int, help: str) -> None:
    """``--workers N``: processes to replay in."""
    parser.add_argument("--workers", type=positive, default=default, help=help)


def add_gated(parser: argparse.ArgumentParser, choices: Sequence[str], default: str, help: str) -> None:
    """``--gated``: which gating to run or consider."""
    parser.add_argument("--gated", choices=tuple(choices), default=default, help=help)


def add_replay_options(parser: argparse.ArgumentParser, *, budgets: bool = False) -> None:
    """What ``replay``, ``compare`` and ``recommend`` share: budget, sessions, streaming, seed, workers,
    store, tracing, OTLP. ``budgets``: ``--budget`` takes a list (a sweep over every arm)."""
    if budgets:
        parser.add_argument("--budget", type=_budgets, metavar="N[,N...]",
                            help="token budget, or a comma-separated list to sweep every arm over "
                                 "(default: 60%% of each session's full size; 'auto' in a list means that)")
    else:
        parser.add_argument("--budget", type=positive, help="token budget (default: 60%% of each session's full size)")
    parser.add_argument("--hard-ceiling", type=positive, help="hard ceiling: spill, then fail loudly, above it (gated)")
    add_sessions(parser, "replay only these sessions (id or name); default: every non-replay session")
    parser.add_argument("--stream-results", type=nonnegative, default=0, metavar="N",
                        help="deliver every tool result as a stream of N chunks (default: only recorded streams)")
    parser.add_argument("--seed", type=int, help="shuffle each batch's result order with this seed")
    add_workers(parser, default=1, help="processes to replay in (default 1)")
    add_store(parser)
    parser.add_argument("--no-trace", dest="trace", action="store_false",
                        help="do not record the replays (measure only; for benchmarks)")
    parser.add_argument("--capture-content", action="store_true", help="record message content in the replay traces")
    add_json(parser)
    add_otlp_options(parser)


def add_otlp_options(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--otlp-endpoint``, ``--project``, ``--json-encoding``, ``--otlp-header``."""
    parser.add_argument("--otlp-endpoint", required=required, metavar="URL",
                        help="OTLP/HTTP endpoint (base URL such as http://127.0.0.1:6006, or its /v1/traces URL)"
                        + ("" if required else "; the sessions this command records are sent there once stored"))
    parser.add_argument("--project", metavar="NAME",
                        help="project name for the backend (resource attribute openinference.project.name)")
    parser.add_argument("--json-encoding", action="store_true", help="send OTLP JSON instead of protobuf")
    parser.add_argument("--otlp-header", action="append", default=[], metavar="K=V",
                        help="HTTP header for the endpoint (repeatable), e.g. authorization=Bearer ...")


def add_prices(parser: argparse.ArgumentParser) -> None:
    """The pricing options (``compare`` and ``recommend``)."""
    parser.add_argument("--prices", metavar="FILE",
                        help="price table (JSON or TOML; see docs/replay.md) laid over the dated default "
                             "(default: $PRUNEGATE_PRICES when set)")
    parser.add_argument("--price-model", metavar="MODEL",
                        help="price sessions whose recording names no model as this model (e.g. gpt-4o)")


def _budgets(text: str) -> list[int | None]:
    from tracer.lab.sweep import parse_budgets

    try:
        return parse_budgets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--budget: ")) from None


# ----------------------------------------------------------------------------- what they select
def store_of(args: argparse.Namespace) -> Store:
    """The :class:`~tracer.store.Store` that ``--store`` (or its default) names."""
    from tracer.store import Store

    return Store(resolve_store(getattr(args, "store", None)))


def existing_store(args: argparse.Namespace, hint: str = "") -> Store:
    """The store ``--store`` names, which must already hold something: else one line (with ``hint``)."""
    store = store_of(args)
    if not store.path.is_dir():
        raise CommandError(f"no store at {store.path}" + (f" ({hint})" if hint else ""))
    return store


def load_sessions(args: argparse.Namespace) -> tuple[Store, StoredSessions]:
    """(store, sessions) that ``--store`` and ``--session`` select, read from the store a batch at a
    time as they are iterated (memory stays flat however many there are); :class:`CommandError` says
    what is wrong, a :class:`~tracer.store.StoreError` that the store cannot be read."""
    from tracer.traffic.recorded import StoredSessions, select_sessions

    store = existing_store(args, "import sessions first: prunegate import PATH")
    convs = StoredSessions(store, select_sessions(store, args.session))
    if args.session:
        found = convs.names()
        missing = [s for s in args.session if s not in found]
        if missing:
            raise CommandError(f"no session {', '.join(map(repr, missing))} in {store.path}")
    if not len(convs):
        raise CommandError(f"no sessions to replay in {store.path}")
    return store, convs


def run_sweep(args: argparse.Namespace) -> tuple[dict[str, Any], Path | str, list[str]]:
    """The sweep the options of ``compare`` (or ``recommend --policies``) describe, run and stored
    (:func:`tracer.lab.sweep.run_sweep`): (its record, where it is stored, warnings to print). What
    cannot run (a policy, a price file, the engine) is a :class:`CommandError` before any work."""
    import importlib.util

    from policies import get_policy
    from policies.errors import PolicyError
    from tracer.lab import sweep
    from tracer.lab.compare import parse_policies
    from tracer.lab.cost import load_prices

    try:
        policies = parse_policies(args.policies)
        for name, params in policies:
            get_policy(name, **dict(params))
    except (PolicyError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    prices = load_prices(args.prices)  # a PriceError names the file and the entry
    engine, address = getattr(args, "engine", "local"), getattr(args, "address", None)
    if address and engine != "ray":
        raise CommandError("--address is for --engine ray")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise CommandError("--engine ray needs Ray: pip install 'prunegate[ray]'")
    store, convs = load_sessions(args)
    return sweep.run_sweep(
        store, convs, policies, policies_text=args.policies, gated=args.gated, budgets=args.budget or [None],
        hard_ceiling=args.hard_ceiling, stream_results=args.stream_results, seed=args.seed, workers=args.workers,
        traced=args.trace, capture_content=args.capture_content, prices=prices,
        prices_path=str(Path(args.prices).resolve()) if args.prices else None, price_model=args.price_model,
        sessions=list(args.session) if args.session else None, engine=engine, address=address,
        detail=args.detail)


# ----------------------------------------------------------------------------- argument types
def store_dir(text: str) -> str:
    """``--store``: a directory, or a path that does not exist yet (the first write creates it), or
    ``s3://bucket/prefix``."""
    problem = store_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def positive(text: str) -> int:
    """A positive integer (``1_000`` allowed): token budgets, ceilings, worker counts."""
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative(text: str) -> int:
    """A non-negative integer (``1_000`` allowed): counts where 0 means none or never."""
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


def port_or_zero(text: str) -> int:
    """A TCP port, or 0 (the system picks one)."""
    return 0 if text.strip() == "0" else port(text)


def nonempty(text: str) -> str:
    """A string that is not empty (a token, a name)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a non-empty value")
    return text


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be an integer, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 1 and 65535, got {value}")
    return value
