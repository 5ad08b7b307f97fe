"""The dashboard's one door to the store: where it is, a short-lived snapshot to query, its
version (for cache keys), and the few writes a person makes from a page (an annotation, a saved
comparison) plus what a compare run from a page reads (the recorded conversations).

Why here: the dashboard reads and writes only through :mod:`tracer.queries` (CONTRIBUTING), so the
store, the lab and the traffic wings can move without a page changing. Writes go through the
store's normal path (the same functions ``prunegate annotate`` and ``compare`` use); the imports of
the traffic wing is deferred to the call (it imports this package).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tracer.store import Store, StoreLocation, StoreReader, resolve_store

if TYPE_CHECKING:
    from tracer.queries.writes import AnnotationTarget

PathLike = str | os.PathLike[str]


def store_location(arg: PathLike | None = None) -> StoreLocation:
    """The store: ``arg``, else ``$PRUNEGATE_STORE``, else ``./prunegate-store`` (a directory or a bucket URL)."""
    return resolve_store(arg)


@contextmanager
def snapshot(path: PathLike | StoreLocation, *, sessions: list[str] | None = None) -> Iterator[StoreReader]:
    """A snapshot of the store to run queries on, closed on exit (an open one makes compaction
    wait). ``sessions``: on a bucket, read only those sessions' row groups."""
    with Store(path).reader(sessions=sessions) as reader:
        yield reader


def version(path: PathLike | StoreLocation) -> str:
    """Changes whenever the store does (a segment written or compacted away, the database
    rewritten): a listing, no data read. Cache keys carry it, so a cached answer is never stale."""
    return Store(path).fingerprint()


def activity_version(path: PathLike | StoreLocation) -> str:
    """Like :func:`version`, but unchanged by annotations and saved comparisons (spans added
    afterwards): the key of caches of what sessions did, which those never change."""
    return Store(path).fingerprint(activity=True)


def annotate(path: PathLike | StoreLocation, session_id: str, *, label: str, note: str = "",
             span_id: str | None = None, target: AnnotationTarget | None = None) -> dict[str, Any]:
    """Store an annotation (:func:`tracer.queries.writes.annotate`; ``target``: the span as the page
    read it, so nothing is looked up); AnnotationError says why not."""
    from tracer.queries.writes import annotate as store_annotation

    return store_annotation(Store(path), session_id, label=label, note=note, span_id=span_id, target=target)


def save_comparison(path: PathLike | StoreLocation, title: str, params: dict[str, Any],
                    results: dict[str, Any]) -> str:
    """Store a comparison (:func:`tracer.queries.writes.save_comparison`); returns its id."""
    from tracer.queries.writes import save_comparison as store_comparison

    return store_comparison(Store(path), title, params, results)


def sweeps(path: PathLike | StoreLocation) -> list[Path]:
    """The store's sweeps (``prunegate compare`` runs and the run form's), oldest first, as local files
    (:func:`tracer.lab.sweep.list_sweeps`; a bucket's are fetched once)."""
    from tracer.lab.sweep import list_sweeps

    return list_sweeps(path)


def sweep(record: PathLike) -> dict[str, Any]:
    """One sweep listed by :func:`sweeps` (:func:`tracer.lab.sweep.load`; ValueError naming the file)."""
    from tracer.lab.sweep import load

    return load(record)


def lost_references(src: StoreReader, session_id: str) -> pd.DataFrame:
    """References a replay's model calls needed and no longer had (:func:`tracer.queries.lost.lost_references`)."""
    from tracer.queries.lost import lost_references as lost

    return lost(src, session_id)


def lost_at(lost: pd.DataFrame, step: int) -> list[dict[str, Any]]:
    """The lost references of the model call at ``step`` (:func:`tracer.queries.lost.at_step`)."""
    from tracer.queries.lost import at_step

    return at_step(lost, step)


def conversations(path: PathLike | StoreLocation, session_ids: Iterable[str]) -> list[Any]:
    """The recorded sessions as conversations to replay (:func:`tracer.traffic.recorded.load_conversations`)."""
    from tracer.traffic.recorded import load_conversations

    return load_conversations(str(path), list(session_ids))


__all__ = ["StoreLocation", "activity_version", "annotate", "conversations", "lost_at", "lost_references", "save_comparison",
           "snapshot", "store_location", "sweep", "sweeps", "version"]
