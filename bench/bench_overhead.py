"""What tracing and parallel replay cost, as ratios measured side by side in one run.

    .venv/bin/python bench/bench_overhead.py              # ../shared/traffic, else data/sessions
    .venv/bin/python bench/bench_overhead.py --quick      # smaller, for a loaded machine (a few minutes)
    .venv/bin/python bench/bench_overhead.py --profile check    # cProfile top of a traced budget check
    .venv/bin/python bench/bench_overhead.py --profile replay   # ... of a traced one-worker replay
    .venv/bin/python bench/bench_overhead.py --profile split    # py-spy: where a traced replay's extra time goes

Every pair is measured in interleaved rounds (a, b, a, b, ...) and the median of the same-round
ratios is printed, with the load average next to it. The parts that take a few seconds a round
(checks, replay, reach) run three times ``--rounds``: their ratios swing with the machine's load
from one minute to the next, and more rounds steady the median.

0. per detail level (docs/spans.md), side by side in the same rounds: a budget check traced at
   decisions, checks and full / untraced (target at checks: <= 2x); compare traced at each level /
   untraced, one worker (targets: compare's default, decisions, >= 0.9x; full >= 0.7x); two workers /
   one at decisions beside a CPU-burn control (target >= 1.8x, or within 5% of the control); spans
   per replay event at each level (spans in the store / events replayed).
1. a budget check, traced (SpanObserver -> setup_tracing's store pipeline) / untraced, on the
   agent's thread (τ-bench airline conversations driven as a live agent drives the gate: append one
   message, run one budget check with the recency policy at 60% of the conversation's size). Floor:
   <= 3x. Next to it the agent thread's CPU time per append+check, traced / untraced.
2. replay rate (events/s), traced into a fresh store / untraced, one process. Floor: >= 0.8x.
   Then (diagnostic) what that floor leaves a span: spans per event, µs per event untraced, a bare
   OpenTelemetry SDK span beside it, and the replay with recording reduced to reading each span's
   values (the most any recorder called from Python could reach); and µs per span to convert those
   replays' span records to Arrow, by the C accelerator (tracer/store/_columns.c) and by the Python path.
3. ``compare`` (3 policies x gated/ungated), traced / untraced with one worker (floor >= 0.8x),
   and two workers / one worker, traced and untraced (floor >= 1.8x: needs two idle CPUs).
4. the store's write rate / a discarding exporter behind the same processor (bench/bench_tracer.py's
   span workload). Floor: >= 0.8x.
5. a 100k-span burst into the store: spans counted in the store afterwards (floor: none lost).
6. peak RSS of a traced 2-worker compare streaming the traffic 10 times / once, the parent and
   its largest worker (floor: within 2x).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_tracer  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.trace import INVALID_SPAN  # noqa: E402

from bench.sources import SESSIONS, TAU_DIR, TAU_FILE, TRAFFIC  # noqa: E402
from policies import Context, Gate, convert, get_policy  # noqa: E402
from policies.messages import Message  # noqa: E402
from policies.validate import validate  # noqa: E402
from tracer.lab.compare import arms, parse_policies, run_replays  # noqa: E402
from tracer.lab.replay import ReplaySpec  # noqa: E402
from tracer.spans.observer import SpanObserver  # noqa: E402
from tracer.spans.pipeline import ExporterSink, ReliableSpanProcessor  # noqa: E402
from tracer.spans.session import SessionConfig, TracedSession  # noqa: E402
from tracer.spans.setup import setup_tracing  # noqa: E402
from tracer.store import Store  # noqa: E402
from tracer.store import rows as store_rows  # noqa: E402
from tracer.traffic.importers import Conversation, read_paths  # noqa: E402

SOURCE = TRAFFIC if TRAFFIC.is_dir() else SESSIONS
POLICIES = "recency,salience,head_tail"


def load() -> Iterator[Conversation]:
    """The traffic, read from disk file by file (a fresh pass each call)."""
    return (c for c in read_paths([SOURCE]) if isinstance(c, Conversation))


def load_avg() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def interleave(cells: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each cell returns a duration (or a rate); rounds run a, b, c, a, b, c, ... after a warm-up."""
    for run in cells.values():
        run()
    out: dict[str, list[float]] = {k: [] for k in cells}
    for _ in range(rounds):
        for name, run in cells.items():
            out[name].append(run())
    return out


def in_python(run: Callable[[], float]) -> Callable[[], float]:
    """``run`` with span records converted by the Python path (the C accelerator set aside)."""

    def cell() -> float:
        saved, store_rows.ACCELERATOR = store_rows.ACCELERATOR, None
        try:
            return run()
        finally:
            store_rows.ACCELERATOR = saved

    return cell


def accelerator_note() -> str:
    return ("the C accelerator converts span records" if store_rows.ACCELERATOR is not None
            else "no C accelerator (tracer/store/_columns.c not built): span records converted in Python")


def ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def verdict(ok: bool) -> str:
    return "OK" if ok else "BELOW FLOOR"


# ------------------------------------------------------------------------------ 1. budget checks
def check_conversations(n: int) -> list[list[Message]]:
    """The first ``n`` τ-bench airline conversations as messages."""
    data = json.loads(TAU_FILE.read_text())
    return [convert.from_openai({"messages": conv["traj"]})[0] for conv in data[:n]]


Observer = Callable[[int], SpanObserver | None]


def drive(messages: list[Message], make_observer: Observer, *, fresh: bool = True) -> tuple[int, int]:
    """(ns spent in budget checks, checks) for one conversation: append one message, check, repeat.
    ``fresh`` False: ``messages`` are already fresh copies (made outside a measured region)."""
    total = sum(len(m.plain_text()) for m in messages) // 4 + 4 * len(messages)
    budget = max(50, int(total * 0.6))
    observer = make_observer(budget)
    ctx = Context(observer=observer, strict=False, provider="openai")
    gate = Gate(get_policy("recency"), budget)
    check_ns = 0
    clock = time.perf_counter_ns
    for m in [m.copy() for m in messages] if fresh else messages:  # copied outside the timed region
        ctx.append(m)
        t0 = clock()
        gate.check(ctx)
        check_ns += clock() - t0
    if observer is not None:
        observer.session.end()
    return check_ns, gate.checks


def discard_records(tracing: Any) -> None:
    """Make ``tracing``'s store processor drop span records as they end, before any conversion: what
    tracing costs the agent's thread without the conversion to Arrow and the store (a diagnostic
    cell; set before the first session, whose record writer binds the processor's method)."""
    held: list[tuple] = []

    def drop(record: tuple) -> None:
        held.append(record)
        if len(held) >= 256:  # keep records alive about as long as a chunk does
            held.clear()

    tracing.store_processor.on_end_record = drop


def traced_observers(root: Path, *, convert: bool = True, detail: str = "full") -> tuple[Observer, Callable[[], None]]:
    """Observers writing into a fresh store through setup_tracing's pipeline, and what flushes it;
    ``convert`` False: records are dropped before conversion (:func:`discard_records`); ``detail``:
    the sessions' detail level (docs/spans.md)."""
    tracing = setup_tracing(Path(tempfile.mkdtemp(dir=root)), otlp_endpoint=False)
    if not convert:
        discard_records(tracing)

    def observer(budget: int) -> SpanObserver:
        return SpanObserver(TracedSession(tracing.provider, SessionConfig(source="synthetic", budget=budget,
                                                                          capture_content=False, detail=detail)))

    def finish() -> None:
        tracing.force_flush(600_000)
        tracing.shutdown()

    return observer, finish


def untraced_observers(root: Path) -> tuple[Observer, Callable[[], None]]:
    return (lambda budget: None), (lambda: None)


def checks(n_convs: int, rounds: int) -> tuple[float, list[str]]:
    if not TAU_FILE.is_file():
        return float("nan"), ["budget check: no τ-bench traffic at ../shared/traffic: skipped"]
    convs = check_conversations(n_convs)
    root = Path(tempfile.mkdtemp(prefix="pg-ovh-"))
    cpus: dict[str, list[float]] = {"untraced": [], "traced": [], "no conversion": [], "python": []}

    def cell(name: str, make: Callable[[Path], tuple[Observer, Callable[[], None]]]) -> Callable[[], float]:
        def run() -> float:
            obs, finish = make(root)
            c_ns = n = 0
            copies = [[m.copy() for m in conv] for conv in convs]  # outside the CPU-time region too
            cpu = time.thread_time()
            for conv in copies:
                c, k = drive(conv, obs, fresh=False)
                c_ns, n = c_ns + c, n + k
            cpus[name].append((time.thread_time() - cpu) / n)
            finish()
            return c_ns / n / 1000

        return run

    try:
        got = interleave({"untraced": cell("untraced", untraced_observers),
                          "traced": cell("traced", traced_observers),
                          "no conversion": cell("no conversion", lambda root: traced_observers(root, convert=False)),
                          **({"python": in_python(cell("python", traced_observers))}
                             if store_rows.ACCELERATOR is not None else {})},
                         rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    r = ratio(got["traced"], got["untraced"])
    c = ratio(cpus["traced"][1:], cpus["untraced"][1:])  # without the warm-up
    nc = ratio(got["no conversion"], got["untraced"])
    out = [f"budget check traced/untraced     {r:5.2f}x  (untraced {statistics.median(got['untraced']):.1f} µs, "
           f"traced {statistics.median(got['traced']):.1f} µs per check; floor <= 3x) {verdict(r <= 3)}; "
           f"agent-thread CPU per append+check {c:.2f}x",
           f"        (diagnostic) records dropped before conversion: {nc:.2f}x the untraced check "
           "(what recording the spans costs without the conversion to Arrow and the store)"]
    if got.get("python"):
        py = ratio(got["python"], got["untraced"])
        out.append(f"        (diagnostic) records converted in Python, the C accelerator set aside: {py:.2f}x "
                   f"the untraced check; agent-thread CPU {ratio(cpus['python'][1:], cpus['untraced'][1:]):.2f}x")
    return r, out


# ------------------------------------------------------------------------------ 2. replay rate
REPLAY_SPEC = ReplaySpec("recency", gated=True, budget=3000)  # the one arm every replay workload here uses


def traced_replay_rate(convs: list[Conversation], prepare: Callable[[Any], None] | None = None) -> float:
    """Events/s of one in-process replay traced through a fresh ``setup_tracing`` pipeline into a
    temporary store; ``prepare(tracing)`` runs before the first session (a diagnostic hook on its
    processor). Setup and shutdown stay outside the timed region."""
    with tempfile.TemporaryDirectory(prefix="pg-ovh-") as tmp:
        tracing = setup_tracing(Path(tmp) / "s", otlp_endpoint=False, auto_compact=False)
        if prepare is not None:
            prepare(tracing)
        t0 = time.perf_counter()
        [res] = run_replays(convs, [REPLAY_SPEC], tracer_provider=tracing.provider)
        rate = sum(r.events for r in res) / (time.perf_counter() - t0)
        tracing.shutdown()
        return rate


def replays(convs: list[Conversation], rounds: int) -> tuple[float, list[str]]:
    spec = REPLAY_SPEC

    cpus: dict[str, list[float]] = {"untraced": [], "traced": [], "python": []}

    def cell(traced: bool, name: str) -> Callable[[], float]:
        def run() -> float:
            with tempfile.TemporaryDirectory(prefix="pg-ovh-") as tmp:
                t0, c0 = time.perf_counter(), time.process_time()
                [res] = run_replays(convs, [spec], store_path=Path(tmp) / "s" if traced else None)
                events = sum(r.events for r in res)
                cpus[name].append(events / (time.process_time() - c0))
                return events / (time.perf_counter() - t0)

        return run

    def dropped() -> float:  # records dropped before conversion (discard_records), one process
        return traced_replay_rate(convs, discard_records)

    got = interleave({"untraced": cell(False, "untraced"), "traced": cell(True, "traced"), "no conversion": dropped,
                      **({"python": in_python(cell(True, "python"))} if store_rows.ACCELERATOR is not None else {})}, rounds)
    r = ratio(got["traced"], got["untraced"])
    c = ratio(cpus["traced"][1:], cpus["untraced"][1:])
    nc = ratio(got["no conversion"], got["untraced"])
    py = [f"        (diagnostic) records converted in Python, the C accelerator set aside: "
          f"{ratio(got['python'], got['untraced']):.2f}x the untraced rate"] if got.get("python") else []
    return r, [f"replay rate traced/untraced      {r:5.2f}x  (untraced {statistics.median(got['untraced']):,.0f}, "
               f"traced {statistics.median(got['traced']):,.0f} events/s; floor >= 0.8x) {verdict(r >= 0.8)}; "
               f"per CPU second (all threads) {c:.2f}x",
               f"        (diagnostic) records dropped before conversion: {nc:.2f}x the untraced rate "
               "(recording the spans alone, no conversion to Arrow, no store)", *py]


# ------------------------------------------------------------------------------ 3. compare
def _burn(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def burn_rate(workers: int) -> float:
    """Pure-Python work per second with ``workers`` processes: what this machine gives a second
    process right now (the ceiling for any 2-worker speed-up, measured in the same rounds)."""
    import multiprocessing

    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_burn, [2_000_000] * 4)
    return 4 / (time.perf_counter() - t0)


def compares(convs: list[Conversation], rounds: int) -> tuple[dict[str, float], list[str]]:
    specs = arms(parse_policies(POLICIES), "both")

    def cell(traced: bool, workers: int) -> Callable[[], float]:
        def run() -> float:
            with tempfile.TemporaryDirectory(prefix="pg-ovh-") as tmp:
                t0 = time.perf_counter()
                run_replays(convs, specs, workers=workers, store_path=Path(tmp) / "s" if traced else None)
                return len(convs) * len(specs) / (time.perf_counter() - t0)

        return run

    got = interleave({"u1": cell(False, 1), "t1": cell(True, 1), "u2": cell(False, 2), "t2": cell(True, 2),
                      "burn1": lambda: burn_rate(1), "burn2": lambda: burn_rate(2)}, rounds)
    r = {"traced/untraced (1 worker)": ratio(got["t1"], got["u1"]),
         "traced/untraced (2 workers)": ratio(got["t2"], got["u2"]),
         "2 workers/1 (untraced)": ratio(got["u2"], got["u1"]),
         "2 workers/1 (traced)": ratio(got["t2"], got["t1"]),
         "2 workers/1 (CPU burn)": ratio(got["burn2"], got["burn1"])}
    rates = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in got.items())
    lines = []
    for name, v in r.items():
        if "burn" in name:
            lines.append(f"control {name:25s}{v:5.2f}x  (no floor: the most 2 processes got from this machine)")
            continue
        floor = 0.8 if name.startswith("traced") else 1.8
        lines.append(f"compare {name:25s}{v:5.2f}x  (floor >= {floor}x) {verdict(v >= floor)}")
    lines.append(f"        rates by cell (replays/s; burn: tasks/s; u/t = untraced/traced, 1/2 workers): {rates}")
    return r, lines


# ------------------------------------------------------------------------------ 0. per detail level
LEVELS = ("decisions", "checks", "full")  # docs/spans.md; compare's default first, the guards' second


def stored_spans(path: Path) -> int:
    """Spans in a store, the pipeline's own stats rows left out."""
    return int(Store(path).query("SELECT count(*) AS n FROM spans WHERE name <> 'prunegate.tracer.stats'")[0]["n"])


def level_checks(n_convs: int, rounds: int) -> list[str]:
    """A budget check traced at each detail level / untraced, interleaved in the same rounds."""
    if not TAU_FILE.is_file():
        return ["budget check per level: no τ-bench traffic at ../shared/traffic: skipped"]
    convs = check_conversations(n_convs)
    root = Path(tempfile.mkdtemp(prefix="pg-ovh-"))

    def cell(make: Callable[[Path], tuple[Observer, Callable[[], None]]]) -> Callable[[], float]:
        def run() -> float:
            obs, finish = make(root)
            c_ns = n = 0
            copies = [[m.copy() for m in conv] for conv in convs]
            for conv in copies:
                c, k = drive(conv, obs, fresh=False)
                c_ns, n = c_ns + c, n + k
            finish()
            return c_ns / n / 1000

        return run

    cells = {"untraced": cell(untraced_observers)}
    for level in LEVELS:
        cells[level] = cell(lambda root, level=level: traced_observers(root, detail=level))
    try:
        got = interleave(cells, rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    r = {level: ratio(got[level], got["untraced"]) for level in LEVELS}
    us = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in got.items())
    return [f"budget check traced/untraced by level   decisions {r['decisions']:5.2f}x   checks {r['checks']:5.2f}x   "
            f"full {r['full']:5.2f}x  (target at checks <= 2x) {verdict(r['checks'] <= 2)}",
            f"        µs per check (median, n={rounds} rounds of {len(convs)} conversations): {us}"]


def level_compares(convs: list[Conversation], rounds: int) -> list[str]:
    """``compare`` (3 policies x gated/ungated) traced at each level / untraced, one worker; two
    workers / one at compare's default level beside a CPU-burn control; spans per event per level."""
    specs = {level: arms(parse_policies(POLICIES), "both", detail=level) for level in LEVELS}
    per_event: dict[str, tuple[int, int]] = {}

    def cell(level: str | None, workers: int, key: str | None = None) -> Callable[[], float]:
        key = key or level  # where its spans per event go (the reduced cells have their own)

        def run() -> float:
            with tempfile.TemporaryDirectory(prefix="pg-ovh-") as tmp:
                path = Path(tmp) / "s" if level else None
                t0 = time.perf_counter()
                res = run_replays(convs, specs[level or "full"], workers=workers, store_path=path)
                rate = len(convs) * len(specs["full"]) / (time.perf_counter() - t0)
                if key is not None and path is not None and key not in per_event:
                    per_event[key] = (stored_spans(path), sum(r.events for arm in res for r in arm))
                return rate

        return run

    def reduced(key: str, methods: tuple[tuple[type, str, Any], ...]) -> Callable[[], float]:
        def run() -> float:
            with recording_replaced(methods):
                return cell("decisions", 1, key)()

        return run

    cells: dict[str, Callable[[], float]] = {"u1": cell(None, 1)}
    cells.update({level: cell(level, 1) for level in LEVELS})
    cells.update({"decisions_only": reduced("decisions_only", _DECISIONS_ONLY), "roots_only": reduced("roots_only", _NOTHING)})
    cells.update({"u2": cell(None, 2), "decisions2": cell("decisions", 2),
                  "burn1": lambda: burn_rate(1), "burn2": lambda: burn_rate(2)})
    got = interleave(cells, rounds)
    r = {level: ratio(got[level], got["u1"]) for level in LEVELS}
    two, two_u, burn = ratio(got["decisions2"], got["decisions"]), ratio(got["u2"], got["u1"]), \
        ratio(got["burn2"], got["burn1"])
    spans = "   ".join(f"{level} {per_event[level][0] / per_event[level][1]:.2f} "
                       f"({per_event[level][0]:,} for {per_event[level][1]:,})" for level in LEVELS)
    reduced_spans = {k: f"{per_event[k][0] / per_event[k][1]:.2f}" for k in ("decisions_only", "roots_only")}
    rates = ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in got.items())
    return [f"compare traced/untraced by level        decisions {r['decisions']:5.2f}x   checks {r['checks']:5.2f}x   "
            f"full {r['full']:5.2f}x  (targets: default decisions >= 0.9x {verdict(r['decisions'] >= 0.9)}, "
            f"full >= 0.7x {verdict(r['full'] >= 0.7)})",
            f"compare 2 workers/1 at decisions        {two:5.2f}x  (untraced {two_u:.2f}x; CPU-burn control {burn:.2f}x; "
            f"target >= 1.8x or within 5% of the control) {verdict(two >= 1.8 or two >= 0.95 * burn)}",
            f"compare at decisions, recording reduced (diagnostic)   decision and violation spans only "
            f"{ratio(got['decisions_only'], got['u1']):5.2f}x ({reduced_spans['decisions_only']} spans per event)   "
            f"each replay's root span only {ratio(got['roots_only'], got['u1']):5.2f}x "
            f"({reduced_spans['roots_only']})  (the most a contract keeping decisions, or nothing, reaches)",
            f"spans per event by level                {spans}",
            f"        rates by cell (replays/s; burn: tasks/s; n={rounds} rounds of {len(convs)} sessions x "
            f"{len(specs['full'])} arms): {rates}"]


# ------------------------------------------------------------------------------ 2c. what the floor leaves a span
def _gather_message(self: SpanObserver, ctx: Any, message: Message, event: str, **info: Any) -> None:
    mid = message.id  # the same reads as SpanObserver.on_message (its unit: the context's, else the last known)
    uid = self._unit_of[mid] = ctx.unit_id_of(mid) or self._unit_of.get(mid)
    _GATHERED.append((time.time_ns(), event, mid, message.role, uid, message.tokens, ctx.tokens, message.closed,
                      message.call_ids, message.answered_ids,
                      [b.name or "" for b in message.blocks if b.call_id is not None], info, ctx.seq))


def _gather_unit(self: SpanObserver, ctx: Any, unit: Any) -> None:
    for mid in unit.message_ids:
        self._unit_of[mid] = unit.id
    _GATHERED.append((time.time_ns(), unit.id, unit.kind, unit.tokens, list(unit.message_ids), sorted(unit.call_ids),
                      ctx.seq))


def _gather_decision(self: SpanObserver, ctx: Any, d: Any, **kw: Any) -> None:
    _GATHERED.append((time.time_ns(), d.check, d.kind, d.reason, d.policy, d.tokens_before, d.tokens_after, d.budget,
                      d.hard_ceiling, d.overhead_tokens, len(ctx.pending), len(ctx.open_ids), self.gated, d.seq))


class _GatheredCall:
    span = INVALID_SPAN  # a replay parents its checks on it

    def __enter__(self) -> _GatheredCall:
        return self

    def __exit__(self, *exc: object) -> None:
        _GATHERED.append((time.time_ns(),))

    def set_input(self, messages: Any) -> None:
        _GATHERED.append((time.time_ns(), messages))

    def set_attributes(self, attributes: Any) -> None:
        _GATHERED.append((time.time_ns(), attributes))

    def set_invalid(self, found: Any) -> None:
        _GATHERED.append((time.time_ns(), found))

    def end(self) -> None:
        _GATHERED.append((time.time_ns(),))


def _gather_chat(self: TracedSession, model: Any, *, provider: Any = None, seq: Any = None,
                 attributes: Any = None, start_time: Any = None) -> _GatheredCall:
    _GATHERED.append((time.time_ns(), model, provider, seq, attributes))
    return _GatheredCall()


def _gather_tool(self: TracedSession, name: str, call_id: str, *, arguments: Any = None, side_effect: bool = False,
                 seq: Any = None) -> _GatheredCall:
    _GATHERED.append((time.time_ns(), name, call_id, arguments, side_effect, seq))
    return _GatheredCall()


def _gather_request(self: TracedSession, body: Any, provider: str, *, seq: Any = None,
                    message_ids_of: Any = None, unrecorded: frozenset[str] = frozenset(),
                    parent: Any = None) -> list[Any]:
    found = [v for v in validate(body, provider) if v.code not in unrecorded]  # as the untraced replay
    _GATHERED.append((time.time_ns(), seq, [message_ids_of(v.ids) for v in found]))
    return found


class _NoCall:
    span = INVALID_SPAN

    def __enter__(self) -> _NoCall:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_input(self, messages: Any) -> None:
        return None

    def set_attributes(self, attributes: Any) -> None:
        return None

    def set_invalid(self, found: Any) -> None:
        return None

    def end(self) -> None:
        return None


_NO_CALL = _NoCall()


def _nothing(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


def _no_call(self: Any, *args: Any, **kwargs: Any) -> _NoCall:
    return _NO_CALL


def _validate_only(self: TracedSession, body: Any, provider: str, *, unrecorded: frozenset[str] = frozenset(),
                   **kwargs: Any) -> list[Any]:
    return [v for v in validate(body, provider) if v.code not in unrecorded]  # as the untraced replay


_GATHERED: list[tuple] = []
_GATHERING = ((SpanObserver, "on_message", _gather_message), (SpanObserver, "on_unit_closed", _gather_unit),
              (SpanObserver, "record_decision", _gather_decision), (TracedSession, "chat", _gather_chat),
              (TracedSession, "tool", _gather_tool), (TracedSession, "check_request", _gather_request))
_NOTHING = ((SpanObserver, "on_message", _nothing), (SpanObserver, "on_unit_closed", _nothing),
            (SpanObserver, "record_decision", _nothing), (TracedSession, "chat", _no_call),
            (TracedSession, "tool", _no_call), (TracedSession, "check_request", _validate_only))


_CHECK_REQUEST = TracedSession.check_request


def _request_at_root(self: TracedSession, body: Any, provider: str, **kwargs: Any) -> list[Any]:
    kwargs["parent"] = None  # no chat span to hang its violations on
    return _CHECK_REQUEST(self, body, provider, **kwargs)


_DECISIONS_ONLY = ((SpanObserver, "on_message", _nothing), (SpanObserver, "on_unit_closed", _nothing),
                   (TracedSession, "chat", _no_call), (TracedSession, "tool", _no_call),
                   (TracedSession, "check_request", _request_at_root),
                   (SpanObserver, "parent", property(lambda self: None, lambda self, value: None)))  # checks on the root
_ABSENT = object()


@contextlib.contextmanager
def recording_replaced(methods: tuple[tuple[type, str, Any], ...]) -> Iterator[None]:
    """The observer's and the session's recording methods replaced: by ones that only read each
    span's values into one tuple (:data:`_GATHERING`: no span, no record, no conversion, no store),
    what any recorder called from the replay's Python would pay at least; or by ones that do nothing
    (:data:`_NOTHING`), what calling a recorder from there costs. Diagnostic bounds, never product paths.

    A method's other names in its class go too (``SpanObserver.on_decision`` is ``record_decision``:
    the gate calls it by that name); a name the class does not define (an instance attribute) is
    defined for the while and removed after."""
    saved: list[tuple[type, str, Any]] = []
    for cls, name, fn in methods:
        original = cls.__dict__.get(name, _ABSENT)
        names = [name] if original is _ABSENT else [k for k, v in cls.__dict__.items() if v is original]
        for k in names:
            saved.append((cls, k, cls.__dict__.get(k, _ABSENT)))
            setattr(cls, k, fn)
    try:
        yield
    finally:
        for cls, k, fn in reversed(saved):
            if fn is _ABSENT:
                delattr(cls, k)
            else:
                setattr(cls, k, fn)
        _GATHERED.clear()


def bare_sdk_span_us(n: int = 20_000) -> float:
    """µs per span of the OpenTelemetry SDK on its own: no attributes, a simple processor, a discarding exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(bench_tracer.Discard()))
    tracer = provider.get_tracer("bench")
    t0 = time.perf_counter()
    for _ in range(n):
        tracer.start_span("prunegate.message").end()
    return (time.perf_counter() - t0) / n * 1e6


def reach(convs: list[Conversation], rounds: int) -> list[str]:
    """What the replay floor (traced >= 0.8x untraced) leaves each span, beside what a span costs: the
    spans the contract requires per event, µs per event untraced, a bare SDK span, and the replay with
    recording reduced to reading each span's values, and to nothing (:func:`recording_replaced`)."""
    spec = REPLAY_SPEC
    events = [0]

    def untraced() -> float:
        t0 = time.perf_counter()
        [res] = run_replays(convs, [spec])
        events[0] = sum(r.events for r in res)
        return events[0] / (time.perf_counter() - t0)

    def replaced(methods: tuple[tuple[type, str, Callable[..., Any]], ...]) -> Callable[[], float]:
        def run() -> float:
            with recording_replaced(methods):
                return traced_replay_rate(convs)

        return run

    got = interleave({"untraced": untraced, "gathered": replaced(_GATHERING), "nothing": replaced(_NOTHING),
                      "sdk": lambda: 1 / bare_sdk_span_us()}, rounds)
    spans = [0]

    def count(record: tuple) -> None:
        spans[0] += 1

    traced_replay_rate(convs, lambda tracing: setattr(tracing.store_processor, "on_end_record", count))
    per_event = spans[0] / events[0]
    us_event = 1e6 / statistics.median(got["untraced"])
    allowed = us_event * 0.25  # traced time <= untraced / 0.8
    sdk = 1 / statistics.median(got["sdk"])
    g = ratio(got["gathered"], got["untraced"])
    return [f"replay floor's reach (diagnostic) {per_event:.2f} spans per event ({spans[0]:,} for {events[0]:,}); "
            f"untraced {us_event:.1f} µs per event, so 0.8x leaves tracing {allowed:.1f} µs per event, "
            f"{allowed / per_event:.1f} µs per span; a bare OpenTelemetry SDK span here costs {sdk:.1f} µs "
            f"(no attributes, simple processor, discarding exporter): at that cost alone a traced replay runs at most "
            f"at {1 / (1 + per_event * sdk / us_event):.2f}x",
            f"        (diagnostic) recording reduced to reading each span's values into one tuple (no span, no record, "
            f"no store): {g:.2f}x the untraced rate, the most any recorder called from the replay's Python could reach",
            f"        (diagnostic) recording replaced by calls that do nothing (the session's root and dispatch left): "
            f"{ratio(got['nothing'], got['untraced']):.2f}x the untraced rate"]


# ------------------------------------------------------------------------------ 2b. conversion alone
def conversion(convs: list[Conversation], rounds: int) -> list[str]:
    """µs per span to convert the span records of traced replays to Arrow, by the C accelerator and
    by the Python path, interleaved over the same records (a diagnostic: no floor of its own)."""
    if store_rows.ACCELERATOR is None:
        return ["conversion per span: no C accelerator here (tracer/store/_columns.c not built)"]
    held: list[tuple] = []
    traced_replay_rate(convs, lambda tracing: setattr(tracing.store_processor, "on_end_record", held.append))
    chunks = [held[i:i + 256] for i in range(0, len(held), 256)]

    def convert_all() -> float:
        t0 = time.perf_counter()
        for chunk in chunks:
            store_rows.records_to_table(chunk)
        return (time.perf_counter() - t0) / len(held) * 1e6

    got = interleave({"c": convert_all, "python": in_python(convert_all)}, rounds)
    c, py = statistics.median(got["c"]), statistics.median(got["python"])
    return [f"conversion per span (diagnostic)  C accelerator {c:.2f} µs, Python path {py:.2f} µs "
            f"({py / c:.1f}x; {len(held):,} span records of {len(convs)} sessions replayed traced, chunks of 256)"]


# ------------------------------------------------------------------------------ 4. store vs discard
def store_rate(spans: int, rounds: int, root: Path) -> tuple[float, str]:
    def discard() -> tuple:
        proc = ReliableSpanProcessor(ExporterSink(bench_tracer.Discard()))
        return bench_tracer.provider_with(proc), proc.stats

    cells = {"discard": lambda: bench_tracer.timed(discard, spans)[0],
             "store": lambda: bench_tracer.timed(bench_tracer.ours_store(root), spans)[0]}
    got = interleave(cells, rounds)
    r = ratio(got["discard"], got["store"])  # times: discard time / store time = store rate / discard rate
    return r, (f"store write rate / discarding   {r:5.2f}x  ({spans / statistics.median(got['store']):,.0f} vs "
               f"{spans / statistics.median(got['discard']):,.0f} spans/s; floor >= 0.8x) {verdict(r >= 0.8)}")


# ------------------------------------------------------------------------------ 5. burst
def burst(n: int, root: Path) -> tuple[int, str]:
    store_dir = root / "burst-store"
    proc = ReliableSpanProcessor(bench_tracer.StoreSink(Store(store_dir), spool_dir=root / "burst-spool"))
    provider = bench_tracer.provider_with(proc)
    t0 = time.perf_counter()
    bench_tracer.workload(provider, n)
    provider.force_flush(600_000)
    took = time.perf_counter() - t0
    provider.shutdown()
    s = proc.stats()
    in_store = Store(store_dir).query("SELECT count(*) AS n FROM spans WHERE name <> 'prunegate.tracer.stats'")[0]["n"]
    lost = n - in_store
    return lost, (f"burst of {n}: {in_store} spans in the store, lost {lost} (stored {s['stored']}, spooled "
                  f"{s['spooled']}, dropped {s['dropped']}; {n / took:,.0f} spans/s) {verdict(lost == 0)}")


# ------------------------------------------------------------------------------ 6. peak RSS
def rss_child(copies: int, limit: int, workers: int) -> None:
    """(In a subprocess.) A traced compare over the traffic streamed ``copies`` times; prints RSS."""
    def stream() -> Iterator[Conversation]:
        for _ in range(copies):
            for i, c in enumerate(load()):
                if i >= limit:
                    break
                yield c

    specs = arms(parse_policies(POLICIES), "both")
    with tempfile.TemporaryDirectory(prefix="pg-ovh-rss-") as tmp:
        t0 = time.perf_counter()
        results = run_replays(stream(), specs, workers=workers, store_path=Path(tmp) / "s")
        took = time.perf_counter() - t0
        rows = Store(Path(tmp) / "s").query("SELECT count(*) AS n FROM spans WHERE name = 'prunegate.session'")[0]["n"]
    print(json.dumps({"sessions": len(results[0]), "replays_in_store": rows, "seconds": took,
                      "parent_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "worker_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))


def rss(limit: int, workers: int) -> tuple[float, list[str]]:
    out = {}
    for copies in (1, 10):
        proc = subprocess.run([sys.executable, __file__, "--rss-child", str(copies), "--limit", str(limit),
                               "--workers", str(workers)], capture_output=True, text=True, check=True)
        out[copies] = json.loads(proc.stdout.strip().splitlines()[-1])
    one, ten = out[1], out[10]
    worst = max(ten["parent_kb"] / one["parent_kb"], ten["worker_kb"] / one["worker_kb"])
    lines = [f"peak RSS 10x/1x traffic          {worst:5.2f}x  (floor <= 2x) {verdict(worst <= 2)}"]
    for copies, d in out.items():
        lines.append(f"        {copies:2d}x: {d['sessions']} sessions x 6 arms, {d['replays_in_store']} replays in the "
                     f"store, {d['seconds']:.0f} s; peak RSS parent {d['parent_kb'] / 1024:.0f} MiB, largest worker "
                     f"{d['worker_kb'] / 1024:.0f} MiB")
    return worst, lines


# ------------------------------------------------------------------------------ profiles
def profile(what: str, n: int, top: int, detail: str = "full") -> None:
    """cProfile of a traced path, top functions by own time (docs/performance.md)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    root = Path(tempfile.mkdtemp(prefix="pg-prof-"))
    try:
        if what == "check":
            convs = check_conversations(n)
            obs, finish = traced_observers(root, detail=detail)
            for c in convs[:3]:  # warm-up
                drive(c, obs)
            prof.enable()
            for c in convs:
                drive(c, obs)
            prof.disable()
            finish()
        else:
            source = [TAU_DIR] if TAU_DIR.is_dir() else [SOURCE]
            convs_r = [c for c in read_paths(source) if isinstance(c, Conversation)][:n]
            spec = replace(REPLAY_SPEC, detail=detail)
            run_replays(convs_r[:5], [spec], store_path=root / "warm")
            prof.enable()
            run_replays(convs_r, [spec], store_path=root / "s")
            prof.disable()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


# ------------------------------------------------------------------------------ py-spy split
# Frames whose samples (inclusive) say where a traced replay's time goes. Conversion runs inside the
# other frames (the span that fills a chunk converts it), so they are counted without it.
_CONVERSION = "records_to_table"
_SPLIT_FRAMES = (
    ("observer: message spans", "SpanObserver.on_message"),
    ("observer: budget checks and decisions", "SpanObserver.on_decision"),
    ("observer: unit closes", "SpanObserver.on_unit_closed"),
    ("model calls (chat span, request check)", "_Run._model_call"),
    ("tool calls", "_Run._tool"),
    ("session setup", "_Run.__init__"),
    ("held decisions ended", "_Run._end_held"),
)


def spy_child(mode: str, seconds: float, n: int) -> None:
    """Replay ``n`` sessions (recency, gated, budget 3000) again and again for ``seconds``."""
    from tracer.lab.replay import replay_session

    convs = list(load())[:n]
    spec = REPLAY_SPEC
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tracing = setup_tracing(Path(tempfile.mkdtemp(prefix="pg-spy-")), otlp_endpoint=False, auto_compact=False) \
            if mode == "traced" else None
        for conv in convs:
            replay_session(conv, spec, tracer_provider=tracing.provider if tracing else None)
        if tracing is not None:
            tracing.shutdown()


def _inclusive(raw: Path) -> tuple[dict[str, int], dict[str, int]]:
    """py-spy's raw (collapsed) stacks -> samples per function name (each counted once per stack),
    over all stacks and over the stacks outside the conversion to Arrow."""
    import re

    counts: dict[str, int] = {}
    outside: dict[str, int] = {}
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        names = {re.sub(r" \(.*\)$", "", f) for f in stack.split(";")}
        for name in names:
            counts[name] = counts.get(name, 0) + int(n)
            if _CONVERSION not in names:
                outside[name] = outside.get(name, 0) + int(n)
    return counts, outside


def spy_split(seconds: float, n: int) -> int:
    """Sample a traced and an untraced replay loop with py-spy; print the traced one's extra time by
    part, in units of the event-stream building (the same work in both, so the two runs compare)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("--profile split needs py-spy: .venv/bin/pip install py-spy", file=sys.stderr)
        return 2
    units: dict[str, dict[str, float]] = {}
    for mode in ("untraced", "traced"):
        raw = Path(tempfile.mkdtemp(prefix="pg-spy-")) / f"{mode}.txt"
        subprocess.run([spy, "record", "-f", "raw", "-r", "500", "-o", str(raw), "--", sys.executable, __file__,
                        "--spy-child", mode, "--seconds", str(seconds), "--sessions", str(n)],
                       check=True, capture_output=True)
        counts, outside = _inclusive(raw)
        unit = counts.get("events_for", 0)
        if not unit:
            print(f"no samples in events_for for the {mode} run", file=sys.stderr)
            return 1
        units[mode] = {k: v / unit for k, v in counts.items()}
        units[mode + " outside"] = {k: v / unit for k, v in outside.items()}
    u, t, t_out = units["untraced"], units["traced"], units["traced outside"]
    base, traced = u.get("replay_session", 0.0), t.get("replay_session", 0.0)
    print(f"one replay, in units of building its event stream (the same work traced or not; {n} sessions, "
          f"{seconds:.0f} s each, py-spy at 500 Hz):")
    print(f"  untraced {base:.2f}, traced {traced:.2f}: tracing adds {traced - base:.2f} "
          f"(rate ratio {base / traced:.2f}x; 0.8x would allow {base / 4:.2f})")
    print(f"  {t.get(_CONVERSION, 0.0):5.2f}  conversion of span records to Arrow (on the agent's thread)")
    for label, frame in _SPLIT_FRAMES:
        extra = t_out.get(frame, 0.0) - u.get(frame, 0.0)
        print(f"  {extra:5.2f}  {label}, conversion left out, traced minus untraced")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sessions and rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--sessions", type=int, default=None, help="sessions for replay and compare")
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--rss-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=0, help="sessions per pass for the RSS runs (0: all)")
    parser.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--skip", default="",
                        help="comma-separated parts to skip: levels,checks,replay,reach,convert,compare,store,burst,rss")
    parser.add_argument("--profile", choices=("check", "replay", "split"),
                        help="print a cProfile of a traced path instead (split: py-spy, traced vs untraced replay)")
    parser.add_argument("--seconds", type=float, default=20.0, help="--profile split: seconds sampled per run")
    parser.add_argument("--spy-child", choices=("traced", "untraced"), help=argparse.SUPPRESS)
    parser.add_argument("--detail", choices=LEVELS, default="full", help="--profile check/replay: the detail level")
    parser.add_argument("--top", type=int, default=20, help="functions shown by --profile")
    args = parser.parse_args(argv)
    if args.spy_child:
        spy_child(args.spy_child, args.seconds, args.sessions or 60)
        return 0
    if args.profile == "split":
        return spy_split(args.seconds, args.sessions or 60)
    if args.profile:
        profile(args.profile, args.sessions or (40 if args.profile == "check" else 60), args.top, args.detail)
        return 0
    limit = args.limit or 10**9
    if args.rss_child:
        rss_child(args.rss_child, limit, args.workers)
        return 0
    rounds = args.rounds or (3 if args.quick else 5)
    short = 3 * rounds  # parts of a few seconds a round (checks, replay, reach): more rounds, a steadier median
    n = args.sessions or (40 if args.quick else 120)
    convs = list(load())[:n]
    skip = set(args.skip.split(",")) - {""}
    root = Path(tempfile.mkdtemp(prefix="pg-ovh-"))
    print(f"{len(convs)} sessions from {SOURCE}; {rounds} interleaved rounds per pair, {short} for the checks, the "
          f"replay and the reach (median of same-round ratios); "
          f"{os.cpu_count()} CPUs, {load_avg()} at start; {accelerator_note()}")
    lines: list[str] = []

    def part(name: str, fn: Callable[[], list[str]]) -> None:
        if name in skip:
            return
        t0 = time.perf_counter()
        got = fn()
        for line in got:
            print(line, flush=True)
        lines.extend(got)
        print(f"        [{name}: {time.perf_counter() - t0:.0f} s, {load_avg()}]", flush=True)

    try:
        part("levels", lambda: level_checks(30 if args.quick else 60, short)
             + level_compares(convs, max(2, rounds - 2)))
        part("checks", lambda: checks(30 if args.quick else 60, short)[1])
        part("replay", lambda: replays(convs, short)[1])
        part("reach", lambda: reach(convs, short))
        part("convert", lambda: conversion(convs, rounds))
        part("compare", lambda: compares(convs, max(2, rounds - 2))[1])
        part("store", lambda: [store_rate(20_000, rounds, root)[1]])
        part("burst", lambda: [burst(args.burst, root)[1]])
        part("rss", lambda: rss(args.limit or (40 if args.quick else 0), 2)[1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nsummary ({load_avg()} at the end):")
    for line in lines:
        if not line.startswith("        "):
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
