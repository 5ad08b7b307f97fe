"""A/B comparison of policies on recorded sessions: replay every arm, aggregate, pair.

An *arm* is a policy (with parameters) and a gating (gated or ungated). Every session is replayed
under every arm; sessions run in parallel across processes (``workers``), each worker recording
its replays into the store through its own segments. The functions here are what the
``prunegate compare`` command and the dashboard call; progress is reported through a callback
``progress(done, total)`` counted in replayed sessions.

Metric definitions are in docs/replay.md; the per-session values come from
:class:`tracer.lab.replay.SessionResult`, the pairing and the interval from :mod:`tracer.lab.metrics`
(the same functions the dashboard's Compare views call on the stored replays).
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.util
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from policies.registry import parse_params
from tracer.lab import metrics as _metrics
from tracer.lab.cost import PriceTable, price_results
from tracer.lab.replay import ReplaySpec, SessionResult, events_for, replay_session
from tracer.traffic.importers import Conversation

Progress = Callable[[int, int], None]

ROW_KEYS = (
    "policy", "gated", "budget", "sessions", "model_calls", "invalid_requests", "orphan_results", "dangling_calls",
    "duplicated_side_effects", "tokens_sent", "peak_tokens", "prunes", "deferrals", "spills", "reinjects",
    "failures", "retention", "cost",
)
SUMMED = ("model_calls", "invalid_requests", "orphan_results", "dangling_calls", "duplicated_side_effects",
          "tokens_sent", "prunes", "deferrals", "spills", "reinjects", "failures")
# metrics compared pairwise per session against the baseline arm (defined in tracer.lab.metrics), and
# the cost of each session in US dollars (tracer.lab.cost; undefined for sessions without a price)
PAIRED = (*_metrics.NAMES, "cost")
GATINGS = {"on": (True,), "off": (False,), "both": (True, False)}
ENGINES = ("local", "ray")


# ------------------------------------------------------------------------------------- arms
def parse_policies(text: str) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    """``"salience,recency@target=0.5"`` → [(name, params)]: ``@k=v`` pairs set parameters.

    A value may list alternatives with ``|`` (``recency@target=0.5|0.8``): one entry per
    combination of alternatives, in order (a sweep over the parameter).
    """
    out = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, *pairs = item.split("@")
        choices = []
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise ValueError(f"{item!r}: expected name@key=value, got {pair!r}")
            alternatives = [v.strip() for v in value.split("|")]
            if any(not v for v in alternatives):
                raise ValueError(f"{item!r}: empty alternative in {pair!r}")
            choices.append([f"{key.strip()}={v}" for v in alternatives])
        for combo in itertools.product(*choices):
            out.append((name.strip(), tuple(parse_params(list(combo)).items())))
    if not out:
        raise ValueError("no policy named")
    return out


def arms(policies: Sequence[tuple[str, tuple[tuple[str, Any], ...]]], gated: str = "both",
         budgets: Sequence[int | None] | None = None, **spec: Any) -> list[ReplaySpec]:
    """One :class:`ReplaySpec` per gating × policy × budget; ``spec`` sets hard_ceiling, seed, ...

    ``budgets`` (a sweep) defaults to ``[spec["budget"]]``; with more than one budget each arm's
    label names its budget (``recency budget=4000``).
    """
    if gated not in GATINGS:
        raise ValueError(f"--gated must be on, off or both; got {gated!r}")
    if budgets is None:
        budgets = [spec.pop("budget", None)]
    else:
        spec.pop("budget", None)
    several = len(budgets) > 1
    out = []
    for g in GATINGS[gated]:
        for name, params in policies:
            for b in budgets:
                arm = ReplaySpec(name, params, gated=g, budget=b, **spec)
                out.append(replace(arm, label=f"{arm.name} budget={b or 'auto'}") if several else arm)
    return out


# ------------------------------------------------------------------------------------- running
# Work is split by session, not by arm: a task is a few consecutive sessions replayed under every
# arm, so each session's event stream is built once, by one worker, and dropped when the task is
# done (nothing per session outlives its task: memory stays flat however many sessions stream in).
# Results come back as one Arrow IPC stream per task (tracer.lab.results_arrow), decoded by the parent
# in one call; spans never pass through the parent: each worker writes its own store segments.
# Replays record without auto-compaction: compacting holds the store's key index in memory, which
# grows with the store (a worker compacting a large store went from 80 to 570 MiB); the segments
# stay readable and the next compaction (``prunegate compact``, a long-running writer) absorbs them.
_WORKER: dict[str, Any] = {}


def _replay_arms(conv: Conversation, specs: Sequence[ReplaySpec], provider: Any,
                 capture: bool) -> list[SessionResult]:
    """One session under every arm; arms that arrive the same way share one event stream."""
    streams: dict[tuple[Any, int], Any] = {}
    out = []
    for spec in specs:
        key = (spec.seed, spec.stream_results)
        stream = streams.get(key)
        if stream is None:
            stream = streams[key] = events_for(conv, spec)
        out.append(replay_session(conv, spec, tracer_provider=provider, capture_content=capture, stream=stream))
    return out


def _worker_init(specs: list[ReplaySpec], store_path: str | None, capture: bool) -> None:
    _WORKER.update(specs=specs, capture=capture, provider=None)
    if store_path is not None:
        from tracer.traffic.recorded import store_tracer_provider

        _WORKER["provider"] = store_tracer_provider(store_path, auto_compact=False)
        multiprocessing.util.Finalize(None, _worker_close, exitpriority=10)


def _worker_run(task: tuple[int, list[Conversation]]) -> tuple[int, bytes]:
    """(sessions in the task, their results as Arrow IPC bytes). Spans reach the store through the
    worker's own pipeline (a segment per batch, within a second or two) and at its exit."""
    from tracer.lab.results_arrow import results_to_ipc

    first, convs = task
    specs, provider, capture = _WORKER["specs"], _WORKER["provider"], _WORKER["capture"]
    return len(convs), results_to_ipc(first, [_replay_arms(c, specs, provider, capture) for c in convs])


def _worker_close() -> None:
    provider = _WORKER.get("provider")
    if provider is not None:
        from tracer.traffic.recorded import close_provider

        close_provider(provider)
        _WORKER["provider"] = None


# The last sessions go one a task, this many per worker: with whole chunks to the end, one worker
# waited on another's last chunk (2 workers / 1 at decisions, 120 sessions x 6 arms, n=8 medians, four
# runs side by side: 1.70-1.80x -> 1.78-1.81x; docs/performance.md, round 12).
TAIL_PER_WORKER = 4


def _tasks(conversations: Iterable[Conversation], chunk: int, count: int | None = None,
           tail: int = 0) -> Iterator[tuple[int, list[Conversation]]]:
    """(index of the first, sessions) tasks of ``chunk`` sessions; the last ``tail`` sessions (when
    ``count`` says where the end is) one a task, so that the workers finish together instead of one
    waiting on another's last whole chunk."""
    batch: list[Conversation] = []
    first = 0
    single_from = count - tail if count is not None else None
    for conv in conversations:
        batch.append(conv)
        if len(batch) >= chunk or (single_from is not None and first + len(batch) >= single_from):
            yield first, batch
            first += len(batch)
            batch = []
    if batch:
        yield first, batch


def run_replays(
    conversations: Iterable[Conversation],
    specs: Sequence[ReplaySpec],
    *,
    workers: int = 1,
    store_path: str | os.PathLike[str] | None = None,
    tracer_provider: Any = None,
    capture_content: bool = False,
    progress: Progress | None = None,
    chunk: int = 4,
    count: int | None = None,
    engine: str = "local",
    address: str | None = None,
) -> list[list[SessionResult]]:
    """Replay every conversation under every spec; results[arm][session], in input order.

    ``conversations`` may be any iterable (a generator streams: at most a few tasks' sessions are
    held at once); ``count`` is how many it yields, for ``progress`` (``len()`` when it has one).
    Traces go to ``store_path`` (each worker opens its own writer) or, in-process only, to
    ``tracer_provider``; with neither, nothing is recorded. ``workers`` > 1 uses processes.
    ``engine="ray"`` runs the replays as Ray tasks instead (:mod:`tracer.lab.ray_engine`; ``address``
    is the cluster's, else a local Ray is started); ``workers`` is then Ray's business.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if engine == "ray":
        if tracer_provider is not None and store_path is None:
            raise ValueError("Ray replays record through store_path (each worker writes its own segments)")
        from tracer.lab.ray_engine import run_on_ray

        return run_on_ray(list(conversations), list(specs), store_path=store_path, capture_content=capture_content,
                          progress=progress, chunk=chunk, address=address)
    specs = list(specs)
    if count is None and isinstance(conversations, Sized):
        count = len(conversations)
    total = (count or 0) * len(specs)
    by_index: dict[int, list[SessionResult]] = {}
    done = 0
    if progress:
        progress(0, total)
    if workers <= 1 or (count is not None and count * len(specs) <= 1):
        provider = tracer_provider
        own = provider is None and store_path is not None
        if own:
            from tracer.traffic.recorded import store_tracer_provider

            provider = store_tracer_provider(store_path, auto_compact=False)  # type: ignore[arg-type]  # own: store_path set
        try:
            for i, conv in enumerate(conversations):
                by_index[i] = _replay_arms(conv, specs, provider, capture_content)
                done += len(specs)
                if progress:
                    progress(done, max(total, done))
        finally:
            if own:
                from tracer.traffic.recorded import close_provider

                close_provider(provider)
        return _by_arm(by_index, len(specs))
    if tracer_provider is not None and store_path is None:
        raise ValueError("parallel replays record through store_path (each worker writes its own segments)")
    from tracer.lab.results_arrow import results_from_ipc

    ctx = multiprocessing.get_context(_start_method())
    if count is not None:  # few sessions: smaller tasks so that every worker gets some
        chunk = max(1, min(chunk, -(-count // (2 * workers))))
    procs = workers if count is None else max(1, min(workers, -(-count // chunk)))
    pool = ctx.Pool(procs, initializer=_worker_init,
                    initargs=(specs, str(store_path) if store_path is not None else None, capture_content))
    try:
        for n, data in pool.imap_unordered(_worker_run, _tasks(conversations, chunk, count, TAIL_PER_WORKER * procs)):
            by_index.update(results_from_ipc(data))
            done += n * len(specs)
            if progress:
                progress(done, max(total, done))
        pool.close()  # workers exit normally: their finalizer flushes and closes their writer
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return _by_arm(by_index, len(specs))


def _by_arm(by_index: dict[int, list[SessionResult]], arms_: int) -> list[list[SessionResult]]:
    return [[by_index[i][a] for i in range(len(by_index))] for a in range(arms_)]


def _start_method() -> str:
    """fork when this process is single-threaded (fast start), else spawn (safe)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "spawn"


# ------------------------------------------------------------------------------------- aggregation
def aggregate(specs: Sequence[ReplaySpec], results: Sequence[Sequence[SessionResult]]) -> list[dict[str, Any]]:
    """One row per arm with :data:`ROW_KEYS` (sums over sessions; peak is the max; retention pooled)."""
    rows = []
    for spec, rs in zip(specs, results, strict=True):
        row: dict[str, Any] = {"policy": spec.name, "gated": spec.gated, "sessions": len(rs)}
        for key in SUMMED:  # None where the arm cannot have it (an ungated arm's deferrals)
            row[key] = sum(getattr(r, key) for r in rs) if _metrics.applies(key, spec.gated) else None
        row["peak_tokens"] = max((r.peak_tokens for r in rs), default=0)
        refs = sum(r.references for r in rs)
        row["retention"] = round(sum(r.retained for r in rs) / refs, 4) if refs else None
        row["budget"] = spec.budget
        costs = [r.cost for r in rs if r.cost is not None]
        row["cost"] = round(sum(costs), 6) if costs else None  # US dollars, priced sessions only
        rows.append({k: row[k] for k in ROW_KEYS})
    return rows


def paired_differences(specs: Sequence[ReplaySpec], results: Sequence[Sequence[SessionResult]], *,
                       metrics: Iterable[str] = PAIRED) -> list[dict[str, Any]]:
    """Per-session differences (arm − baseline) with their 95% interval (:mod:`tracer.lab.metrics`,
    the one method); the baseline is the first arm of the same gating. Sessions where a value is
    undefined (retention without references, cost without a price) are left out of that metric's
    pairs (``n`` says); cost is left out when no session has a price."""
    out = []
    by_gating: dict[bool, list[int]] = {}
    for a, spec in enumerate(specs):
        by_gating.setdefault(spec.gated, []).append(a)
    names = list(metrics)
    for gated, arms_ in by_gating.items():
        base = arms_[0]
        for a in arms_[1:]:
            # arms are told apart by position: two arms may share a label (the same policy twice)
            rows = _rows(specs[base], results[base], "baseline") + _rows(specs[a], results[a], "arm")
            for metric in names:
                found = _metrics.difference_summary(rows, metric, "baseline")
                if not found and metric == "cost":
                    continue
                d = found[0] if found else {"n": 0, "mean_diff": None, "ci_low": None, "ci_high": None,
                                            "level": _metrics.LEVEL}
                out.append({"policy": specs[a].name, "baseline": specs[base].name, "gated": gated, "metric": metric,
                            "n": d["n"], "mean_diff": d["mean_diff"], "ci_low": d["ci_low"],
                            "ci_high": d["ci_high"], "level": d["level"]})
    return out


def _rows(spec: ReplaySpec, results: Sequence[SessionResult], arm: str) -> list[dict[str, Any]]:
    rows = _metrics.result_rows([spec], [results])
    return [{**row, "arm": arm, "cost": r.cost} for row, r in zip(rows, results, strict=True)]


@dataclass
class Comparison:
    """The outcome of :func:`compare`: rows per arm, paired differences, and every session's result."""

    specs: list[ReplaySpec]
    rows: list[dict[str, Any]]
    differences: list[dict[str, Any]]
    results: list[list[SessionResult]] = field(repr=False, default_factory=list)
    models: dict[str, int] = field(default_factory=dict)  # sessions per priced model (tracer.lab.cost)

    def to_dict(self, *, sessions: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"rows": self.rows, "differences": self.differences}
        if sessions:
            d["sessions"] = [
                {"policy": s.name, "gated": s.gated, "results": [r.to_dict() for r in rs]}
                for s, rs in zip(self.specs, self.results, strict=True)
            ]
        return d


def compare(
    conversations: Iterable[Conversation],
    policies: Sequence[tuple[str, tuple[tuple[str, Any], ...]]] | str,
    *,
    gated: str = "both",
    budget: int | None | Sequence[int | None] = None,
    hard_ceiling: int | None = None,
    stream_results: int = 0,
    seed: int | None = None,
    workers: int = 1,
    store_path: str | os.PathLike[str] | None = None,
    capture_content: bool = False,
    progress: Progress | None = None,
    count: int | None = None,
    prices: PriceTable | None = None,
    price_model: str | None = None,
    engine: str = "local",
    address: str | None = None,
    detail: str = "decisions",
) -> Comparison:
    """Replay ``conversations`` under every policy × gating × budget and compare them (see module
    docstring). ``budget`` may be a list (a sweep: every arm at every budget).

    ``seed`` shuffles each batch's result order (None: recorded order). ``conversations`` may be a
    generator (``count``: how many, for ``progress``); see :func:`run_replays`. Each session's cost
    is priced with ``prices`` (default: the dated default table; :mod:`tracer.lab.cost`), its model
    being the recorded one, else ``price_model``. ``engine="ray"`` (and
    ``address``) run the replays on Ray (see :func:`run_replays`). ``detail`` is how much each
    recorded replay keeps (docs/spans.md "Detail levels"; default ``decisions``: the decisions that
    were made and the messages they saw, as span events).
    """
    if isinstance(policies, str):
        policies = parse_policies(policies)
    budgets = list(budget) if isinstance(budget, Sequence) else [budget]
    specs = arms(policies, gated, budgets, hard_ceiling=hard_ceiling, stream_results=stream_results, seed=seed,
                 detail=detail)
    seen: list[_Seen] = []  # what pricing needs of each session, kept as the sessions stream past
    results = run_replays(_noting(conversations, seen), specs, workers=workers, store_path=store_path,
                          capture_content=capture_content, progress=progress, engine=engine, address=address,
                          count=len(conversations) if count is None and isinstance(conversations, Sized) else count)
    models = price_results(seen, results, prices or PriceTable(), price_model)
    return Comparison(specs, aggregate(specs, results), paired_differences(specs, results), results, models)


@dataclass(frozen=True)
class _Seen:
    session_id: str | None
    name: str
    model: str | None


def _noting(conversations: Iterable[Conversation], seen: list[_Seen]) -> Iterator[Conversation]:
    for conv in conversations:
        seen.append(_Seen(conv.session_id, conv.name, conv.model))
        yield conv


# ------------------------------------------------------------------------------------- progress bar
def progress_bar(stream: TextIO | None = None, label: str = "replaying") -> Progress | None:
    """A one-line progress bar on ``stream`` (stderr) when it is a terminal; None otherwise."""
    stream = stream or sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        return None
    width = 30

    def show(done: int, total: int) -> None:
        filled = width * done // total if total else width
        stream.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} sessions")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


__all__ = [
    "PAIRED", "Comparison", "ReplaySpec", "aggregate", "arms", "compare", "paired_differences",
    "parse_policies", "progress_bar", "run_replays",
]
