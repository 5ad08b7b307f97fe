"""``serve``'s background compaction: when it runs, and the process that runs it.

Why a schedule: serve runs on machines whose cores it shares (its own request handling, the session
process, the senders, other jobs). Each compaction copies ``spans.duckdb`` whole (seconds to tens
of seconds as the store grows), and run back to back after every ``--compact-every`` requests it
took the core the session process needed: on a loaded machine conversations became sessions
20-35 s after they were due (docs/scale.md). Compaction only keeps reads fast; sessions falling
behind is what users see. So :class:`CompactionSchedule` runs one only when

- ``every`` requests have been acknowledged since the last one started;
- it has rested for :data:`REST` times the last one's duration since it ended (a compaction that
  took 10 s leaves the next 20 s to the rest of serve);
- sessions are not overdue: while the conversation quiet the longest is more than :data:`GRACE`
  seconds past its idle deadline (:meth:`tracer.wire.waiting.Conversations.overdue`), it waits,
  for at most :data:`MAX_DEFER` seconds (a store never compacted is slow to read, so the wait ends).

And :class:`Compactor` runs it in a process of its own (DuckDB's memory is not serve's) at
:data:`NICE` more than serve, so when the cores are short the kernel gives them to session
building first.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tracer.store import Store
from tracer.wire.serve import WorkerProcess

log = logging.getLogger(__name__)

__all__ = ["GRACE", "MAX_DEFER", "NICE", "REST", "CompactionSchedule", "Compactor", "Decision", "compact_in_worker"]

NICE = 10  # the compaction process's niceness above serve's
REST = 2.0  # times the last compaction's duration to wait, from its end, before the next
GRACE = 2.0  # seconds past their idle deadline conversations may be before compaction waits for them
MAX_DEFER = 30.0  # seconds compaction waits for overdue conversations at most


class Decision(enum.Enum):
    """What :meth:`CompactionSchedule.decide` says (the value: why, for a log line)."""

    RUN = "run"
    FEW_REQUESTS = "fewer requests than --compact-every since the last compaction"
    RESTING = "resting after the last compaction"
    DEFERRED = "deferred: conversations are overdue as sessions"


class CompactionSchedule:
    """When serve compacts (see the module doc); times are ``time.monotonic()`` seconds, passed in."""

    def __init__(self, every: int, *, rest: float = REST, grace: float = GRACE, max_defer: float = MAX_DEFER) -> None:
        self.every = every
        self.rest = rest
        self.grace = grace
        self.max_defer = max_defer
        self._requests_at = 0  # requests acknowledged when the last compaction started
        self._started: float | None = None
        self._ended: float | None = None
        self.last_took = 0.0  # seconds the last compaction took
        self._ready_since: float | None = None  # when it would have run but for overdue conversations

    def decide(self, requests: int, overdue: float, now: float) -> Decision:
        """Whether to compact now, given the requests acknowledged so far and how many seconds the
        longest-waiting conversation is past its idle deadline."""
        if requests - self._requests_at < self.every:
            return Decision.FEW_REQUESTS
        if self._ended is not None and now - self._ended < self.rest * self.last_took:
            return Decision.RESTING
        if self._ready_since is None:
            self._ready_since = now
        if overdue > self.grace and now - self._ready_since < self.max_defer:
            return Decision.DEFERRED
        return Decision.RUN

    def started(self, requests: int, now: float) -> None:
        """A compaction started (after :attr:`Decision.RUN`)."""
        self._requests_at = requests
        self._started = now
        self._ready_since = None

    def ended(self, now: float) -> None:
        """The compaction started last ended (done, failed or skipped: its time counts the same)."""
        if self._started is not None:
            self.last_took = now - self._started
        self._ended = now


class Compactor:
    """A daemon thread compacting ``store`` on :class:`CompactionSchedule`'s decisions, in a
    :class:`WorkerProcess` at :data:`NICE`. ``requests()`` is how many requests were acknowledged,
    ``overdue(now)`` how late sessions are; ``say`` gets each line worth telling the operator (a
    failed or skipped compaction). :meth:`stop` at serve's exit ends a compaction under way: it is
    cut short, not failed (the store is as it was; the next compaction does its work)."""

    def __init__(self, store: Store, every: int, requests: Callable[[], int], overdue: Callable[[float], float],
                 say: Callable[[str], None], *, tick: float = 1.0, lock_timeout: float = 10.0) -> None:
        self.schedule = CompactionSchedule(every)
        self.worker = WorkerProcess("prunegate-serve-compact", compact_in_worker, store, nice=NICE)
        self._requests, self._overdue, self._say = requests, overdue, say
        self.tick = tick
        self.lock_timeout = lock_timeout
        self.compactions = 0  # started so far
        self._running = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prunegate-serve-compact", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopping.wait(self.tick):
            now = time.monotonic()
            requests = self._requests()
            decision = self.schedule.decide(requests, self._overdue(now), now)
            if decision is not Decision.RUN:
                if decision is Decision.DEFERRED:
                    log.debug("prunegate serve: compaction %s", decision.value)
                continue
            self.schedule.started(requests, now)
            self.compactions += 1
            self._running = True
            try:
                result = self.worker.call(self.lock_timeout)
            except (OSError, EOFError) as exc:  # the process died: a new one at the next round
                if self._stopping.is_set():
                    return  # serve is exiting and ended it (stop): cut short, not failed
                self._say(f"compaction failed: the compaction process stopped ({exc})")
                continue
            finally:
                self._running = False
                self.schedule.ended(time.monotonic())
            if isinstance(result, str):  # damaged or unwritable: said, and tried again later
                self._say(f"compaction failed: {result}")
            elif result.busy:
                self._say(f"compaction skipped: {result.busy}")

    def stop(self) -> bool:
        """At serve's exit: no more compactions, and the one under way (if any) is ended now rather
        than waited for; True when one was."""
        self._stopping.set()
        running = self._running
        self.worker.kill()
        return running


def compact_in_worker(store: Store, timeout: float) -> Any:
    """``store.compact`` in the compaction process: the result, or the StoreError's message."""
    from tracer.store import StoreError
    from tracer.traffic.committer import fault_point

    fault_point("compaction-started")  # the crash tests stop it here (PRUNEGATE_FAULT_STOP)
    try:
        return store.compact(timeout=timeout)
    except StoreError as exc:
        return str(exc)
