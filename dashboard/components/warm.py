"""Fill the caches of what the pages show first, in the background, once per state of the store.

The first visit of a page after the dashboard starts, or after a recording changed the store, would
otherwise pay for the store-wide queries behind it (at 10,000 sessions: the Violations page's list,
its first violation and the repeated calls, 1.2 s; the Replay page's session picker; the sessions
index of the Start and Sessions pages; Compare's metrics and the paired differences it opens on). One daemon thread per store activity
(:func:`dashboard.components.data.activity`) makes the same cached calls the pages make, so they find
the answers kept; a page asking for one still being computed waits for that computation (Streamlit's
cache computes a key once) instead of starting its own. ``python -m dashboard`` starts it before the
server, so it runs while the browser connects.

A session picked (a Sessions row, the Replay page's picker) gets the same (:func:`session`): its
spans and lost references, and its annotations, read in two threads as soon as it is picked.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable

from dashboard.components import data, lost
from tracer import queries

log = logging.getLogger(__name__)

_lock = threading.Lock()
_warmed: set[tuple[str, ...]] = set()  # what this process warmed or is warming, per state of the store
_threads: list[threading.Thread] = []  # the warm-ups started and maybe still running
_stopping = threading.Event()  # set by finish(): no warm-up starts or goes on to its next query
THREAD = "prunegate-warm-caches"  # the name of the store's warm-up thread
_FORGET = 4096  # entries kept (a long-lived dashboard visits many sessions)


def _once(state: tuple[str, ...]) -> bool:
    """Whether ``state`` is new (and mark it seen)."""
    with _lock:
        if state in _warmed:
            return False
        if len(_warmed) >= _FORGET:
            _warmed.clear()
        _warmed.add(state)
        return True


def _spawn(target: Callable[..., None], name: str, *args: str) -> None:
    with _lock:
        if _stopping.is_set():
            return
        _threads[:] = [thread for thread in _threads if thread.is_alive()]
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        _threads.append(thread)
        thread.start()


def finish(timeout: float) -> bool:
    """Stop starting warm-ups and wait up to ``timeout`` seconds for those running; whether none is left.

    A daemon thread still inside DuckDB when the interpreter shuts down is unwound through C++ code,
    which aborts the process (exit status -6 instead of the server's own): the server calls this
    after it stopped, and ends without the interpreter's shutdown when a warm-up is still running.
    """
    _stopping.set()
    deadline = time.monotonic() + timeout
    with _lock:
        running = list(_threads)
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in running)


EXIT_GRACE = 30.0
"""Seconds any process waits at exit for its warm-ups to end their current query."""


def _at_exit() -> None:
    """Any process that imported this (the server, a test's AppTest run) ends its warm-ups before
    the interpreter shuts down: atexit runs before daemon threads are stopped mid-query."""
    if not finish(timeout=EXIT_GRACE):
        log.error("prunegate dashboard: a cache warm-up was still running %s s after exit began", EXIT_GRACE)


atexit.register(_at_exit)


def start() -> None:
    """Warm the caches for the store's current activity in a daemon thread, unless done already."""
    try:
        path = data.key()
        state = ("store", path, data.activity(path))
    except Exception:  # noqa: BLE001 - no store (yet), or unreadable: the pages say so
        log.exception("prunegate dashboard: cannot warm the caches")
        return
    if _once(state):
        _spawn(_warm, THREAD)


def session(session_id: str) -> None:
    """Read ``session_id`` for the Replay page in two daemon threads (once per store state): its spans
    with its lost references (computed from them), and its annotations (a read of their own). A
    Sessions row calls this before it switches pages, so both reads start while the page changes;
    the page asking for them waits for these reads instead of starting its own."""
    path = data.key()
    if _once(("session", path, data.fingerprint(path), session_id)):
        _spawn(_warm_spans, "prunegate-warm-session", path, session_id)
        _spawn(_warm_annotations, "prunegate-warm-annotations", session_id)


def _warm_spans(path: str, session_id: str) -> None:
    try:
        lost.references(path, session_id)  # the session's bundle first (data.replay_session)
    except Exception:  # noqa: BLE001 - a background nicety: the page that needs the query reports the error
        log.exception("prunegate dashboard: reading session %s ahead failed", session_id)


def _warm_annotations(session_id: str) -> None:
    try:
        data.session_annotations(session_id)
    except Exception:  # noqa: BLE001 - a background nicety: the page that needs the query reports the error
        log.exception("prunegate dashboard: reading the annotations of session %s ahead failed", session_id)


def _first_violation() -> None:
    shown = data.violation_page(None, (), 1)
    if not shown.empty:
        data.violation_detail(data.key(), data.first_violation(shown))


_STEPS: tuple[Callable[[], object], ...] = (
    data.session_policies,  # the sessions index (Start, Sessions)
    data.session_list,  # the Replay page's picker
    lambda: data.run_activity(queries.violation_codes, session_id=None),
    _first_violation,
    lambda: data.repeated_calls(None),
    data.compare_default,  # Compare, as it opens
)
"""The pages' first queries, most visited first."""


def _warm() -> None:
    """Run :data:`_STEPS` until done or :func:`finish`; a failure is logged and shown by the page itself."""
    try:
        for step in _STEPS:
            if _stopping.is_set():
                return
            step()
    except Exception:  # noqa: BLE001 - a background nicety: the page that needs the query reports the error
        log.exception("prunegate dashboard: warming the caches failed")
