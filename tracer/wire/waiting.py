"""GenAI conversations still going, waiting in ``serve`` until they have been quiet (bounded, journaled).

Why: an agent exports each model call as it ends, so one conversation arrives over many requests.
``serve`` keeps each conversation's latest call until no call of it has come for ``idle`` seconds,
then it becomes one import session. Three promises:

- **O(new spans) per round**: a call is decoded once, on arrival, and stitched with
  :class:`tracer.traffic.genai_spans.Stitcher` (dictionary probes, not a rescan of what waits);
  quiet conversations come off the front of an arrival-ordered map, so a round touches only the
  calls that came and the conversations that are due;
- **bounded**: the conversations waiting hold at most ``max_bytes`` of content (each counts the
  size of its latest call). With a journal, the conversations quiet the longest are *spilled* past
  that: their latest call's messages leave memory (they are in the journal) while the conversation
  stays indexed, so its next call still joins it; when it is due its latest call is read back from
  the journal and it becomes a session like any other. A spilled conversation still counts
  :data:`SPILLED_COST` bytes; when even those fill the cap (or there is no journal),
  :meth:`Conversations.full` is true and ``serve`` answers 429 with Retry-After, so senders hold
  their spans until conversations finish;
- **persisted**: every waiting call's span is appended (fsynced) to a journal under the store's
  local root before the request is acknowledged; a ``serve`` started after a ``kill -9`` adopts
  the journals no live process holds (``flock``), so every conversation whose spans were
  acknowledged becomes a session. Committed conversations drop out of the journal when it is
  rewritten (once it is more than twice what still waits). Sessions are claimed in the store, so a
  conversation adopted twice is still committed once.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from tracer.store.rows import SpanRow

log = logging.getLogger(__name__)

JOURNAL_DIR = "serve-waiting"
SPILLED_COST = 256  # bytes a spilled conversation is counted for (its ids and index entries stay in memory)
_FIELDS = ("trace_id", "span_id", "name", "start_time_ns", "attributes", "events")


class Journal:
    """An append-only file of the model-call spans still waiting, locked by its process."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.path = root / f"waiting-{os.getpid()}-{time.time_ns()}.jsonl"
        self._file = self._open_locked(self.path)
        self.lines = 0

    @staticmethod
    def _open_locked(path: Path) -> Any:
        f = open(path, "ab")  # noqa: SIM115 - held open for the process's life
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return f

    def append(self, lines: list[bytes]) -> None:
        """Durable before return (the request is acknowledged after this)."""
        if not lines:
            return
        self._file.write(b"".join(lines))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.lines += len(lines)

    def rewrite(self, live: set[str]) -> None:
        """Keep only the lines of spans in ``live`` (atomic: a new locked file renamed over this one)."""
        tmp = self.path.with_suffix(".tmp")
        new = self._open_locked(tmp)
        kept = 0
        with open(self.path, "rb") as old:
            for line in old:
                if _span_of(line) in live:
                    new.write(line)
                    kept += 1
        new.flush()
        os.fsync(new.fileno())
        os.replace(tmp, self.path)
        self._file.close()
        self._file, self.lines = new, kept

    def close(self) -> None:
        """Remove the journal (nothing in it waits any more)."""
        self._file.close()
        self.path.unlink(missing_ok=True)

    def orphans(self) -> list[Path]:
        """Journals of processes that are gone (their lock is free)."""
        out = []
        for path in sorted(self.root.glob("waiting-*.jsonl")):
            if path == self.path:
                continue
            try:
                with open(path, "rb") as f:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live serve holds it
            except FileNotFoundError:
                continue
            out.append(path)
        return out


def journal_line(row: SpanRow) -> bytes:
    """What the journal keeps of a model-call span: what decoding it needs."""
    return json.dumps({k: row.get(k) for k in _FIELDS}, default=str, separators=(",", ":")).encode() + b"\n"


def _span_of(line: bytes) -> str | None:
    try:
        return str(json.loads(line)["span_id"])
    except (ValueError, KeyError, TypeError):
        return None


class Conversations:
    """Waiting conversations (see the module doc): ``add`` on arrival, ``due`` once quiet."""

    def __init__(self, idle: float, *, max_bytes: int = 256 << 20, journal_root: Path | None = None) -> None:
        from tracer.traffic.genai_spans import Stitcher

        self.idle = idle
        self.max_bytes = max_bytes
        self.stitcher = Stitcher(keep_calls=False)
        self._order: OrderedDict[int, float] = OrderedDict()  # chain id -> last arrival, oldest first
        self._in_memory: OrderedDict[int, None] = OrderedDict()  # chains not spilled, oldest arrival first
        self.spilled = 0  # conversations spilled so far (a counter: some came back, some were committed)
        self.reloaded = 0  # spilled conversations read back from the journal when due
        self._live: set[str] = set()  # span ids waiting (journaled, not yet committed)
        self._bytes = 0
        self._lock = threading.Lock()
        self._journal_lock = threading.Lock()
        self.journal = Journal(journal_root) if journal_root is not None else None
        self.empty: dict[str, int] = {}  # model-call spans without content, by convention (said once a round)

    def __len__(self) -> int:
        return len(self._live)

    @property
    def waiting_bytes(self) -> int:
        return self._bytes

    def full(self) -> bool:
        """At the memory cap: take no more spans until some conversations are done."""
        return self._bytes >= self.max_bytes

    def overdue(self, now: float | None = None) -> float:
        """Seconds the conversation quiet the longest is past its idle deadline (0 when none is):
        how far sessions are behind, for serve's compaction to wait on (tracer.wire.compaction).
        O(1): the front of the arrival order (a chunk being committed is not in it)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if not self._order:
                return 0.0
            oldest = next(iter(self._order.values()))
        return max(0.0, now - oldest - self.idle)

    def add(self, rows: list[SpanRow], now: float | None = None) -> None:
        """Decode, journal and stitch the model-call spans of one acknowledged request.
        Raises OSError when the journal cannot be written (the request must not be acknowledged)."""
        from tracer.traffic.importers import Refusal, call_of_row

        now = time.monotonic() if now is None else now
        calls = []
        for row in rows:
            if str(row.get("span_id")) in self._live:
                continue  # a retried batch: already waiting
            call = call_of_row(row, "otlp")
            if isinstance(call, Refusal):
                log.warning("prunegate serve: GenAI spans not turned into a session: %s", call)
            elif isinstance(call, str):
                self.empty[call] = self.empty.get(call, 0) + 1
            elif call is not None:
                calls.append((call, journal_line(row)))
        with self._lock:  # claim the span ids first: a journal rewrite keeps what is claimed
            calls = list({c[0].span_id: c for c in calls if c[0].span_id not in self._live}.values())
            self._live.update(c.span_id for c, _ in calls)
        if not calls:
            return
        if self.journal is not None:
            try:
                with self._journal_lock:
                    self.journal.append([line for _, line in calls])
            except OSError:
                with self._lock:
                    self._live.difference_update(c.span_id for c, _ in calls)
                raise
        calls.sort(key=lambda c: (c[0].start_ns, c[0].span_id))
        with self._lock:
            for call, line in calls:
                chain = self.stitcher.add(call)
                self._bytes += len(line) - chain.size
                chain.size = len(line)
                self._order[chain.id] = now
                self._order.move_to_end(chain.id)
                self._in_memory[chain.id] = None
                self._in_memory.move_to_end(chain.id)
            if self.journal is not None:
                self._spill_over_cap()

    def _spill_over_cap(self) -> None:
        """Past the cap, spill the conversations that arrived longest ago (under ``_lock``)."""
        chains = self.stitcher.chains
        while self._bytes > self.max_bytes and self._in_memory:
            cid, _ = self._in_memory.popitem(last=False)
            chain = chains.get(cid)
            if chain is None or chain.spilled or chain.size <= SPILLED_COST:
                continue
            self.stitcher.spill(chain)
            self._bytes += SPILLED_COST - chain.size
            chain.size = SPILLED_COST
            self.spilled += 1

    def _reload(self, chains: list[Any]) -> None:
        """Read the latest call of each spilled chain back from the journal (one pass over it)."""
        from tracer.traffic.genai_spans import ModelCall
        from tracer.traffic.importers import call_of_row

        want = {c.span_ids[-1]: c for c in chains if c.spilled}
        if not want or self.journal is None:
            return
        with self._journal_lock, open(self.journal.path, "rb") as f:
            for line in f:
                sid = _span_of(line)
                chain = want.get(sid) if sid is not None else None
                if chain is None:
                    continue
                call = call_of_row(json.loads(line), "otlp")
                if isinstance(call, ModelCall):
                    chain.last = call
                    del want[sid]
                    self.reloaded += 1
        for sid in want:
            log.warning("prunegate serve: the journal lost the latest call %s of a spilled conversation", sid)

    def adopt(self) -> int:
        """Take over the journals of ``serve`` processes that died; returns how many spans."""
        if self.journal is None:
            return 0
        n = 0
        for path in self.journal.orphans():
            rows = []
            with open(path, "rb") as f:
                for line in f:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        continue  # a torn last line: its request was never acknowledged
            self.add(rows)
            n += len(rows)
            path.unlink(missing_ok=True)
            log.info("prunegate serve: adopted %d waiting spans from %s", len(rows), path.name)
        return n

    def due(self, *, force: bool = False, now: float | None = None, limit: int | None = None) -> list[Any]:
        """Take the chains quiet for ``idle`` seconds (all with ``force``), oldest first, at most
        ``limit``. Give each back with :meth:`done` (committed) or :meth:`put_back` (not)."""
        now = time.monotonic() if now is None else now
        out: list[Any] = []
        with self._lock:
            while self._order and (limit is None or len(out) < limit):
                cid, t = next(iter(self._order.items()))
                if not force and now - t < self.idle:
                    break
                del self._order[cid]
                self._in_memory.pop(cid, None)
                chain = self.stitcher.chains[cid]
                self.stitcher.remove(chain)
                out.append(chain)
        self._reload(out)
        return out

    def done(self, chains: list[Any]) -> None:
        """Chains committed (or refused for good): forget them, and shrink the journal when mostly dead."""
        with self._lock:
            for chain in chains:
                self._live.difference_update(chain.span_ids)
                self._bytes -= chain.size
        if self.journal is not None:
            with self._journal_lock:
                with self._lock:
                    live = set(self._live)
                if self.journal.lines > 2 * len(live) + 1000:
                    self.journal.rewrite(live)

    def put_back(self, chains: list[Any], now: float | None = None) -> None:
        """Chains whose commit failed wait again (tried at the next round)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            for chain in chains:
                if chain.spilled:  # read back for the commit that failed: out of memory again
                    self.stitcher.spill(chain)
                else:
                    self._in_memory[chain.id] = None
                self.stitcher.put_back(chain)
                self._order[chain.id] = now

    def close(self) -> None:
        """At shutdown: remove this process's journal when nothing waits (else the next ``serve`` adopts it)."""
        if self.journal is not None and not self._live:
            self.journal.close()

