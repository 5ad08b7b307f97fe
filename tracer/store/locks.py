"""Small OS-level helpers for the store: advisory file locks with a bounded wait, fsync, pids.

Locks are ``flock`` locks: the kernel releases them when the holder dies (even by ``kill -9``),
so a crashed compactor or reader can never wedge the store.
"""

from __future__ import annotations

import fcntl
import os
import random
import time
from pathlib import Path


class FileLock:
    """An advisory ``flock`` on ``path``, shared or exclusive, acquired with a bounded wait."""

    def __init__(self, path: Path, *, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self._fd: int | None = None

    def acquire(self, timeout: float) -> bool:
        """Try for up to ``timeout`` seconds; True when held. Never blocks longer than that.

        A lock file that cannot be created (read-only store) counts as "not held" for an exclusive
        lock; a shared lock is then treated as held, since nobody can delete anything there either.
        """
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return self.shared
        mode = (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        deadline = time.monotonic() + timeout
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, mode)
                self._fd = fd
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 0.05) * (0.5 + random.random())
            except OSError:
                os.close(fd)
                return self.shared

    def release(self) -> None:
        """Release the lock (a no-op when not held)."""
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by path (directory fsync makes a rename durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
