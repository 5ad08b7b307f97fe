"""Tracer throughput and loss, measured side by side in one run.

1. Throughput: the same TracerProvider workload through
   (a) the SDK BatchSpanProcessor with a discarding exporter (the baseline),
   (b) prunegate's ReliableSpanProcessor into a real store (Arrow -> Parquet segments, fsync on),
   (c) prunegate's ReliableSpanProcessor with a discarding exporter (the processor alone).
   Time runs from the first span to force_flush() returning (everything handled). Rounds are
   interleaved a, b, c, a, b, c, ... after one warm-up each; reported: median spans/s, the median
   over rounds of the same-round ratio (a's time / this time), and process CPU per span (less
   sensitive to other load on the machine). Floor: (b)/(a) >= 0.8.
2. span.end() latency on the agent's thread (percentiles), since prunegate converts each chunk
   of 256 spans to Arrow there (about 1 ms once per chunk) and the SDK processor does not.
3. Loss in a burst: N spans as fast as one thread can end them, then flush. Counts for
   prunegate (every span accounted: stored + spooled + dropped; the store's row count verified)
   and, for contrast, what the SDK BatchSpanProcessor (default settings) lost on the same burst
   into a store (the same sink behind it as a plain exporter), silently.

Usage: .venv/bin/python bench/bench_tracer.py [--spans 50000] [--rounds 7] [--burst 100000]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from tracer.spans.pipeline import ExporterSink, ReliableSpanProcessor, SinkExporter  # noqa: E402
from tracer.store import Store  # noqa: E402
from tracer.store.sink import StoreSink  # noqa: E402

FLOOR = 0.8


class Discard(SpanExporter):
    """Accepts and forgets; counts what it was given."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def workload(provider: TracerProvider, n: int) -> None:
    """n spans shaped like gate spans: a session, a seq, a few attributes, an event every 10th."""
    tracer = provider.get_tracer("prunegate.bench", "0.1")
    per_session = 1000
    for i in range(n):
        session = f"sess-{i // per_session}"
        with tracer.start_as_current_span(
            "prunegate.budget_check",
            attributes={
                "prunegate.session.id": session,
                "prunegate.seq": i % per_session,
                "prunegate.context.tokens": 1000 + i % 5000,
                "prunegate.budget.limit": 4000,
                "prunegate.decision": "defer" if i % 7 == 0 else "none",
            },
        ) as span:
            if i % 10 == 0:
                span.add_event("prunegate.pending", {"prunegate.pending.calls": 2})


def provider_with(processor: object) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}), shutdown_on_exit=False)
    provider.add_span_processor(processor)  # type: ignore[arg-type]  # any object with the processor's methods
    return provider


def timed(
    make: Callable[[], tuple[TracerProvider, Callable[[], dict[str, int]]]], n: int
) -> tuple[float, float, dict]:
    """(wall seconds, process CPU seconds, counters) from the first span to flush returning."""
    provider, counts = make()
    start, cpu = time.perf_counter(), time.process_time()
    workload(provider, n)
    provider.force_flush(600_000)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    provider.shutdown()
    return elapsed, cpu, counts()


def sdk_discard() -> tuple[TracerProvider, Callable[[], dict[str, int]]]:
    exporter = Discard()
    return provider_with(BatchSpanProcessor(exporter)), lambda: {"exported": exporter.count}


def ours_store(root: Path) -> Callable[[], tuple[TracerProvider, Callable[[], dict[str, int]]]]:
    def make() -> tuple[TracerProvider, Callable[[], dict[str, int]]]:
        store_dir = Path(tempfile.mkdtemp(dir=root))
        proc = ReliableSpanProcessor(StoreSink(Store(store_dir), spool_dir=store_dir.parent / "spool"))
        return provider_with(proc), proc.stats

    return make


def ours_discard() -> tuple[TracerProvider, Callable[[], dict[str, int]]]:
    proc = ReliableSpanProcessor(ExporterSink(Discard()), max_batch_size=512)  # as setup_tracing's OTLP side
    return provider_with(proc), proc.stats


def throughput(n: int, rounds: int, root: Path) -> float:
    configs = {
        "sdk BatchSpanProcessor + discard": sdk_discard,
        "prunegate processor + store": ours_store(root),
        "prunegate processor + discard": ours_discard,
    }
    base_name = "sdk BatchSpanProcessor + discard"
    times: dict[str, list[float]] = {name: [] for name in configs}
    cpus: dict[str, list[float]] = {name: [] for name in configs}
    for make in configs.values():
        timed(make, min(n, 5000))  # warm-up (imports, caches)
    for _ in range(rounds):
        for name, make in configs.items():
            elapsed, cpu, _ = timed(make, n)
            times[name].append(elapsed)
            cpus[name].append(cpu)
    print(
        f"\n== throughput: {n} spans x {rounds} interleaved rounds, end-to-end incl. flush "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    print("   median spans/s; ratio = median over rounds of (baseline time / this time) in the same round")
    for name, ts in times.items():
        ratios = [b / t for b, t in zip(times[base_name], ts, strict=True)]
        cpu = statistics.median(cpus[name]) / n * 1e6
        print(
            f"  {name:34s} {n / statistics.median(ts):7.0f} spans/s  ratio {statistics.median(ratios):4.2f}  "
            f"CPU {cpu:4.1f} us/span  (rounds: {' '.join(f'{r:.2f}' for r in ratios)})"
        )
    ratio = statistics.median(
        b / t for b, t in zip(times[base_name], times["prunegate processor + store"], strict=True)
    )
    cpu_ratio = statistics.median(cpus[base_name]) / statistics.median(cpus["prunegate processor + store"])
    verdict = "OK" if ratio >= FLOOR else "BELOW FLOOR"
    print(f"  store / discard ratio = {ratio:.2f} (floor {FLOOR}) {verdict}; CPU-time ratio {cpu_ratio:.2f}")
    return ratio


def end_latency(n: int, root: Path) -> None:
    """How long span.end() takes on the agent's thread: the price of converting chunks there."""
    print(f"\n== span.end() latency on the agent's thread ({n} spans; microseconds)")
    store_dir = Path(tempfile.mkdtemp(dir=root))
    configs = {
        "sdk BatchSpanProcessor + discard": lambda: provider_with(BatchSpanProcessor(Discard())),
        "prunegate processor + store": lambda: provider_with(
            ReliableSpanProcessor(StoreSink(Store(store_dir), spool_dir=root / "lat-spool"))
        ),
    }
    for name, make in configs.items():
        provider = make()
        tracer = provider.get_tracer("latency")
        took = []
        for i in range(n):
            span = tracer.start_span("prunegate.budget_check", attributes={"prunegate.seq": i, "k": "v"})
            t0 = time.perf_counter()
            span.end()
            took.append(time.perf_counter() - t0)
        provider.shutdown()
        took.sort()
        pct = {p: took[min(len(took) - 1, int(len(took) * p))] * 1e6 for p in (0.5, 0.99, 0.999)}
        print(
            f"  {name:34s} p50 {pct[0.5]:6.1f}  p99 {pct[0.99]:7.1f}  p99.9 {pct[0.999]:7.1f}  "
            f"max {took[-1] * 1e6:8.1f}  mean {sum(took) / len(took) * 1e6:5.1f}"
        )


def burst(n: int, root: Path) -> None:
    print(f"\n== burst: {n} spans from one thread, then flush")
    store_dir = root / "burst-store"
    proc = ReliableSpanProcessor(StoreSink(Store(store_dir), spool_dir=root / "burst-spool"))
    provider = provider_with(proc)
    start = time.perf_counter()
    workload(provider, n)
    provider.force_flush(600_000)
    elapsed = time.perf_counter() - start
    provider.shutdown()
    s = proc.stats()
    store = Store(store_dir)
    compacted = store.compact(timeout=60)
    in_store = store.query("SELECT count(*) AS n FROM spans WHERE name <> 'prunegate.tracer.stats'")[0]["n"]
    lost = n - in_store
    print(
        f"  prunegate:  received {s['received']}  stored {s['stored']}  spooled {s['spooled']}  "
        f"failed {s['failed']}  dropped {s['dropped']}  in store after compaction {in_store}  "
        f"lost {lost} ({lost / n:.1%})  [{elapsed:.2f}s, {n / elapsed:.0f} spans/s, "
        f"compacted {compacted.rows_inserted} rows]"
    )
    # The same burst through the SDK's BatchSpanProcessor (default settings) into the same kind of
    # store, via the same sink as a plain exporter: what it drops when export is slower than the agent.
    sdk_dir = root / "burst-store-sdk"
    provider = provider_with(BatchSpanProcessor(SinkExporter(StoreSink(Store(sdk_dir), auto_compact=False))))
    start = time.perf_counter()
    workload(provider, n)
    provider.force_flush(600_000)
    elapsed = time.perf_counter() - start
    provider.shutdown()
    sdk_store = Store(sdk_dir)
    sdk_store.compact(timeout=60)
    got = sdk_store.count()
    lost = n - got
    print(
        f"  sdk BSP:    in store {got}  lost {lost} ({lost / n:.1%}), silently  "
        f"[{elapsed:.2f}s, {n / elapsed:.0f} spans/s, default queue 2048 / batch 512]"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--burst", type=int, default=100_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the SDK warns once per dropped span otherwise
    root = Path(tempfile.mkdtemp(prefix="prunegate-bench-"))
    try:
        throughput(args.spans, args.rounds, root)
        end_latency(20_000, root)
        burst(args.burst, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
