"""Replay results as Arrow: what a replay worker sends back to its parent.

A worker replays a task's sessions under every arm and returns one Arrow IPC stream (bytes): one
row per (session, arm) with :class:`~tracer.lab.replay.SessionResult`'s fields as columns (the lost
references and the per-call token triples as JSON text). Pickling those bytes is a copy; the parent
decodes a task's rows in one C call (:func:`results_from_ipc`) instead of unpickling thousands of
small Python objects per task. The columns are built from buffers (:mod:`tracer.store.arrow`), not
with ``pa.array``, whose first call imports pandas: a third of a second in every new worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import orjson
import pyarrow as pa

from tracer.lab.attribution import LostReference
from tracer.lab.replay import SessionResult
from tracer.store.arrow import column

_TYPES: dict[str, pa.DataType] = {
    "source_id": pa.string(), "name": pa.string(), "policy": pa.string(), "gated": pa.bool_(),
    "budget": pa.int64(), "replay_id": pa.string(), "error": pa.string(), "seconds": pa.float64(),
    "lost_references": pa.string(), "calls": pa.string(), "cost": pa.float64(),
}
_FIELDS = tuple(f.name for f in fields(SessionResult))
SCHEMA = pa.schema([("session", pa.int64()), ("arm", pa.int64())]
                   + [(name, _TYPES.get(name, pa.int64())) for name in _FIELDS])
_LOST_FIELDS = tuple(f.name for f in fields(LostReference))


def results_to_ipc(first: int, per_session: Sequence[Sequence[SessionResult]]) -> bytes:
    """Results of sessions ``first, first + 1, ...`` (each: one per arm) as one Arrow IPC stream."""
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for k, per_arm in enumerate(per_session):
        for a, r in enumerate(per_arm):
            cols["session"].append(first + k)
            cols["arm"].append(a)
            for name in _FIELDS:
                value = getattr(r, name)
                if name == "lost_references":
                    value = orjson.dumps([[getattr(x, f) for f in _LOST_FIELDS] for x in value]).decode()
                elif name == "calls":
                    value = orjson.dumps(value).decode()
                cols[name].append(value)
    batch = pa.RecordBatch.from_arrays([column(cols[f.name], f.type) for f in SCHEMA], schema=SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def results_from_ipc(data: bytes) -> dict[int, list[SessionResult]]:
    """:func:`results_to_ipc`'s bytes -> session index -> its results, in arm order."""
    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    cols = table.to_pydict()
    out: dict[int, list[SessionResult]] = {}
    sessions = cols["session"]
    for i in range(table.num_rows):
        kwargs = {name: cols[name][i] for name in _FIELDS}
        kwargs["lost_references"] = [_lost(x) for x in orjson.loads(kwargs["lost_references"])]
        kwargs["calls"] = [tuple(c) for c in orjson.loads(kwargs["calls"])]
        out.setdefault(sessions[i], []).append(SessionResult(**kwargs))  # rows are in arm order
    return out


def _lost(values: list[Any]) -> LostReference:
    d = dict(zip(_LOST_FIELDS, values, strict=True))
    d["tokens"] = tuple(d["tokens"])
    return LostReference(**d)
