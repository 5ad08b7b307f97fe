"""Per-session claims: one process at a time commits a given session, and only once.

A claim is the file ``claims/<key>`` in the store. A writer holds an exclusive ``flock`` on it
while it writes the session (the kernel drops the lock when the writer dies, even by ``kill -9``)
and writes ``committed`` into it once the segment holding the session has been renamed into
``segments/``. So, for a session key:

- the file says ``committed``: the session is in the store; importing it again stores nothing;
- the lock is held: a live process is committing it right now; this one stores nothing (or waits);
- otherwise (no file, or a file left by a writer that died before committing): this process
  takes the claim and writes the session. A killed writer's half never exists in ``segments/``
  (a segment appears whole or not at all), so the new copy replaces nothing but a temp file.

Keys are session ids, made file-name safe by :func:`claim_name`. A committed claim also names the
segment that holds the session (``committed\n<segment>\n``): when compaction quarantines a damaged
segment, :func:`release_segment` releases the claims of the sessions it held, so importing their
input again restores them.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import sys
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from tracer.store.segments import StoreLayout

COMMITTED = b"committed\n"
_SAFE = re.compile(r"[A-Za-z0-9._-]{1,100}")


class ClaimState(Enum):
    MINE = "mine"  # this process holds the claim: write the session, then commit()
    COMMITTED = "committed"  # already in the store
    BUSY = "busy"  # a live process holds the claim
    UNAVAILABLE = "unavailable"  # the claim file cannot be created (read-only store, full disk)


@dataclass
class Claim:
    """The outcome of :func:`take`; holds the lock (``fd``) when ``state`` is MINE."""

    key: str
    path: Path
    state: ClaimState
    fd: int | None = None
    error: OSError | None = None

    def commit(self, segment: str | None = None) -> None:
        """Mark the session committed (call after its segment, named ``segment``, is in ``segments/``),
        then release.

        Raises OSError when the mark cannot be written; the session's spans are in the store
        regardless, and span ids make a later re-import of it invisible to readers."""
        if self.fd is None:
            raise RuntimeError(f"claim {self.key!r} is not held")
        try:
            self._mark(segment)
            os.fsync(self.fd)
            self.state = ClaimState.COMMITTED
        finally:
            self.release()

    def _mark(self, segment: str | None) -> None:
        assert self.fd is not None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, COMMITTED + (f"{segment}\n".encode() if segment else b""), 0)

    def release(self) -> None:
        """Give the claim up without committing (the session may be taken again)."""
        if self.fd is not None:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None


def commit_many(claims: list[Claim], segment: str | None = None) -> dict[str, OSError]:
    """Mark every claim in ``claims`` committed (their sessions are all in ``segment``) with one
    flush of the file system (``syncfs``) instead of one ``fsync`` each, then release them all.

    Why: ``serve`` commits hundreds of sessions a second, a segment at a time; an fsync per claim
    was most of a session's commit time (0.2-3 ms each on a shared disk, against 10-30 ms for one
    ``syncfs`` of 256 marks). Where ``syncfs`` is missing (not Linux) each mark is fsynced as
    :meth:`Claim.commit` does. Returns the claims whose mark could not be written, by key (their
    sessions' spans are in the store regardless; see :meth:`Claim.commit`)."""
    failed: dict[str, OSError] = {}
    marked: list[Claim] = []
    sync = _syncfs()
    try:
        for claim in claims:
            if claim.fd is None:
                raise RuntimeError(f"claim {claim.key!r} is not held")
            try:
                claim._mark(segment)
                if sync is None:
                    os.fsync(claim.fd)
            except OSError as exc:
                failed[claim.key] = exc
                continue
            marked.append(claim)
        if sync is not None and marked and sync(marked[0].fd) != 0:
            for claim in marked:  # the file system did not say it flushed them: fsync each
                try:
                    os.fsync(claim.fd)  # type: ignore[arg-type]  # held: checked above
                except OSError as exc:
                    failed[claim.key] = exc
        for claim in marked:
            if claim.key not in failed:
                claim.state = ClaimState.COMMITTED
    finally:
        for claim in claims:
            claim.release()
    return failed


_SYNCFS: list[Any] = []


def _syncfs() -> Any:
    """libc's ``syncfs(fd)`` (Linux), or None."""
    if not _SYNCFS:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).syncfs
                fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
        _SYNCFS.append(fn)
    return _SYNCFS[0]


def claims_dir(layout: StoreLayout) -> Path:
    return layout.root / "claims"


def claim_name(key: str) -> str:
    """A file name for ``key``: itself when short and safe, else a digest."""
    if _SAFE.fullmatch(key) and not key.startswith("."):
        return key
    return "h-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def is_committed(layout: StoreLayout, key: str) -> bool:
    """Whether the claim file of ``key`` says committed (no lock taken)."""
    try:
        with open(claims_dir(layout) / claim_name(key), "rb") as f:
            return f.read(len(COMMITTED)) == COMMITTED
    except FileNotFoundError:
        return False


def take(layout: StoreLayout, key: str, *, timeout: float = 0.0) -> Claim:
    """Try to claim session ``key``, waiting up to ``timeout`` seconds for a live holder."""
    directory = claims_dir(layout)
    path = directory / claim_name(key)
    try:
        directory.mkdir(exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if is_committed(layout, key):
            return Claim(key, path, ClaimState.COMMITTED)
        return Claim(key, path, ClaimState.UNAVAILABLE, error=exc)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                return Claim(key, path, ClaimState.UNAVAILABLE, error=exc)
            if time.monotonic() >= deadline:
                os.close(fd)
                return Claim(key, path, ClaimState.COMMITTED if is_committed(layout, key) else ClaimState.BUSY)
            time.sleep(0.02)
    if os.pread(fd, len(COMMITTED), 0) == COMMITTED:  # committed by the holder we waited for
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return Claim(key, path, ClaimState.COMMITTED)
    return Claim(key, path, ClaimState.MINE, fd=fd)


def release_segment(layout: StoreLayout, segment: str) -> list[str]:
    """Release the committed claims that name ``segment`` (a segment being quarantined): its sessions
    may be imported again. Returns their claim names. A claim another process holds is left alone."""
    released = []
    mark = COMMITTED + f"{segment}\n".encode()
    try:
        entries = list(os.scandir(claims_dir(layout)))
    except FileNotFoundError:
        return []
    for entry in entries:
        try:
            with open(entry.path, "rb") as f:
                if f.read(len(mark) + 1) != mark:
                    continue
            fd = os.open(entry.path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            if os.pread(fd, len(mark) + 1, 0) == mark:
                os.ftruncate(fd, 0)
                os.fsync(fd)
                released.append(entry.name)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    return released
