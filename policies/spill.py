"""Spill stores: where closed units wait, durably, while the context is over its hard ceiling."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from .errors import StructureError
from .messages import Block, Message


class SpillStore(Protocol):
    def put(self, key: str, messages: list[Message]) -> None:
        """Write durably; return only once the unit can be read back."""

    def get(self, key: str) -> list[Message]: ...

    def delete(self, key: str) -> None: ...


def message_to_dict(msg: Message) -> dict[str, Any]:
    return asdict(msg)


def message_from_dict(data: dict[str, Any]) -> Message:
    data = dict(data)
    blocks = [Block(**b) for b in data.pop("blocks", [])]
    return Message(blocks=blocks, **data)


class MemorySpillStore:
    """Keeps spilled units in this process (tests, short-lived agents)."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}

    def put(self, key: str, messages: list[Message]) -> None:
        self._data[key] = json.dumps([message_to_dict(m) for m in messages])

    def get(self, key: str) -> list[Message]:
        return [message_from_dict(d) for d in json.loads(self._data[key])]

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)


class DirectorySpillStore:
    """One JSON file per spilled unit, written to a temporary name, fsynced, then renamed.

    A crash leaves either the whole unit or nothing under its key, never half a unit.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path:
        if not key or "/" in key or key.startswith("."):
            raise StructureError(f"spill key {key!r} is not a plain file name")
        return self.path / f"{key}.json"

    def put(self, key: str, messages: list[Message]) -> None:
        target = self._file(key)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".spill-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump([message_to_dict(m) for m in messages], fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> list[Message]:
        target = self._file(key)
        try:
            return [message_from_dict(d) for d in json.loads(target.read_text(encoding="utf-8"))]
        except json.JSONDecodeError as exc:
            raise StructureError(f"{target}: spilled unit is not valid JSON ({exc})") from exc

    def delete(self, key: str) -> None:
        self._file(key).unlink(missing_ok=True)

    def __len__(self) -> int:
        return sum(1 for _ in self.path.glob("*.json"))
