"""The options several commands share, each defined once, and what they select.

``--store`` and ``--json`` are added by every command that takes them through :func:`add_store`
and :func:`add_json`; ``replay``, ``compare`` and ``recommend`` share :func:`add_replay_options` and
read their sessions through :func:`load_sessions`. The store path
is resolved in one place, :func:`tracer.store.resolve_store`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tracer.cli.checks import nonneg_int as nonnegative
from tracer.cli.checks import positive_int as positive
from tracer.cli.checks import positive_seconds, store_dir
from tracer.contract.settings import STORE_HELP
from tracer.errors import CommandError
from tracer.store import resolve_store

if TYPE_CHECKING:
    from tracer.store import Store
    from tracer.traffic.recorded import StoredSessions

__all__ = [
    "add_detail", "add_json", "add_replay_options", "add_store", "existing_store", "load_sessions", "nonnegative", "port", "positive",
    "positive_seconds", "recorded_outcome", "store_of",
]


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
    parser.add_argument("--session", nargs="+", action="extend", metavar="ID",
                        help="replay only these sessions (id or name); default: every non-replay session")
    parser.add_argument("--stream-results", type=nonnegative, default=0, metavar="N",
                        help="deliver every tool result as a stream of N chunks (default: only recorded streams)")
    parser.add_argument("--seed", type=int, help="shuffle each batch's result order with this seed")
    parser.add_argument("--workers", type=positive, default=1, help="processes to replay in (default 1)")
    add_store(parser)
    parser.add_argument("--no-trace", dest="trace", action="store_false",
                        help="do not record the replays (measure only; for benchmarks)")
    parser.add_argument("--capture-content", action="store_true", help="record message content in the replay traces")
    add_json(parser)
    from tracer.cli.export import add_otlp_options

    add_otlp_options(parser)


def _budgets(text: str) -> list[int | None]:
    from tracer.lab.sweep import parse_budgets

    try:
        return parse_budgets(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--budget: ")) from None


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


# ----------------------------------------------------------------------------- argument types
# positive, nonnegative, positive_seconds and store_dir are tracer.cli.checks' (one definition each).
def port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be an integer, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 1 and 65535, got {value}")
    return value


def recorded_outcome(args: argparse.Namespace, store: Store, replay_ids: list[str | None]) -> int:
    """SUCCESS when the recorded replays are in the store (read back), else say what is not (exit 3)."""
    if not args.trace:
        return 0
    from tracer.cli.outcome import check_recorded

    return check_recorded(args.command, store, replay_ids)
