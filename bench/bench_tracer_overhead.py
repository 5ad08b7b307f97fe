"""What tracing adds to the gate: the same budget checks, untraced and traced, side by side in one run.

Workload: real τ-bench airline conversations (shared/traffic, OpenAI chat messages). Each
conversation is driven the way a live agent drives the gate: append one message, run one budget
check (recency policy, budget at 60% of the conversation's size, so prunes and deferrals happen),
repeat. Variants, interleaved round by round (median of the rounds is reported):

- ``untraced``: no observer;
- ``traced, store``: SpanObserver -> the store pipeline (ReliableSpanProcessor -> StoreSink,
  Arrow + Parquet segments with fsync in the pipeline's background thread), content capture off;
- ``traced, store, content``: the same with content capture on;
- ``traced, discard``: SpanObserver -> ReliableSpanProcessor -> an exporter that forgets (the
  observer and the SDK alone, no store work competing for the GIL).

Times are measured on the agent's thread (what the agent waits for); the pipeline's flush after the
round is reported separately. The ratio column is traced / untraced per budget check.

Usage: .venv/bin/python bench/bench_tracer_overhead.py [--conversations 60] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

from bench.sources import TAU_FILE  # noqa: E402
from policies import Context, Gate, convert, get_policy  # noqa: E402
from policies.messages import Message  # noqa: E402
from tracer.spans.direct import DIRECT_FLAG  # noqa: E402
from tracer.spans.observer import SpanObserver  # noqa: E402
from tracer.spans.pipeline import ExporterSink, ReliableSpanProcessor  # noqa: E402
from tracer.spans.session import SessionConfig, TracedSession  # noqa: E402
from tracer.spans.setup import setup_tracing  # noqa: E402


class Discard(SpanExporter):
    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def conversations(n: int) -> list[list[Message]]:
    data = json.loads(TAU_FILE.read_text())
    out = []
    for conv in data[:n]:
        messages, _ = convert.from_openai({"messages": conv["traj"]})
        out.append(messages)
    return out


def drive(messages: list[Message], make_observer: Callable[[int], SpanObserver | None]) -> tuple[int, int, int]:
    """(ns spent in budget checks, ns spent in appends, checks) for one conversation."""
    total = sum(len(m.plain_text()) for m in messages) // 4 + 4 * len(messages)
    budget = max(50, int(total * 0.6))
    observer = make_observer(budget)
    ctx = Context(observer=observer, strict=False, provider="openai")
    gate = Gate(get_policy("recency"), budget)
    check_ns = append_ns = 0
    clock = time.perf_counter_ns
    for m in [m.copy() for m in messages]:  # fresh messages, copied outside the timed region
        t0 = clock()
        ctx.append(m)
        t1 = clock()
        gate.check(ctx)
        t2 = clock()
        append_ns += t1 - t0
        check_ns += t2 - t1
    if observer is not None:
        observer.session.end()
    return check_ns, append_ns, gate.checks


def variant_store(root: Path, capture: bool) -> Callable[[], tuple[Callable[[int], SpanObserver | None], Callable]]:
    def make() -> tuple[Callable[[int], SpanObserver | None], Callable]:
        tracing = setup_tracing(Path(tempfile.mkdtemp(dir=root)), otlp_endpoint=False)

        def observer(budget: int) -> SpanObserver:
            return SpanObserver(TracedSession(tracing.provider, SessionConfig(source="synthetic", budget=budget,
                                              capture_content=capture)))

        def finish() -> dict:
            t0 = time.perf_counter()
            tracing.force_flush(600_000)
            flush = time.perf_counter() - t0
            stats = tracing.stats()["store"]
            tracing.shutdown()
            return {"flush_s": flush, "stored": stats["stored"], "dropped": stats["dropped"]}

        return observer, finish

    return make


def variant_discard() -> tuple[Callable[[int], SpanObserver | None], Callable]:
    exporter = Discard()
    provider = TracerProvider(shutdown_on_exit=False)
    setattr(provider, DIRECT_FLAG, True)  # like setup_tracing's provider (tracer.spans.direct)
    processor = ReliableSpanProcessor(ExporterSink(exporter))
    provider.add_span_processor(processor)

    def finish() -> dict:
        t0 = time.perf_counter()
        provider.force_flush(600_000)
        flush = time.perf_counter() - t0
        stats = processor.stats()
        provider.shutdown()
        return {"flush_s": flush, "stored": stats["stored"], "dropped": stats["dropped"]}

    return lambda budget: SpanObserver(TracedSession(provider, SessionConfig(source="synthetic", budget=budget,
                                                     capture_content=False))), finish


def variant_untraced() -> tuple[Callable[[int], None], Callable]:
    return (lambda budget: None), dict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not TAU_FILE.is_file():
        print(f"no τ-bench traffic at {TAU_FILE}", file=sys.stderr)
        return 2
    convs = conversations(args.conversations)
    root = Path(tempfile.mkdtemp(prefix="pg-bench-overhead-"))
    variants = {
        "untraced": variant_untraced,
        "traced, store": variant_store(root, capture=False),
        "traced, store, content": variant_store(root, capture=True),
        "traced, discard": variant_discard,
    }
    per_check: dict[str, list[float]] = {k: [] for k in variants}
    per_event: dict[str, list[float]] = {k: [] for k in variants}
    extra: dict[str, list[dict]] = {k: [] for k in variants}
    try:
        for _ in range(2):  # warm-up: imports, caches, first segment
            for make in variants.values():
                obs, finish = make()
                drive(convs[0], obs)
                finish()
        checks = 0
        for _ in range(args.rounds):
            for name, make in variants.items():
                obs, finish = make()
                c_ns = a_ns = checks = 0
                for conv in convs:
                    c, a, n = drive(conv, obs)
                    c_ns, a_ns, checks = c_ns + c, a_ns + a, checks + n
                per_check[name].append(c_ns / checks / 1000)
                per_event[name].append((c_ns + a_ns) / checks / 1000)
                extra[name].append(finish())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base_check = statistics.median(per_check["untraced"])
    base_event = statistics.median(per_event["untraced"])
    print(f"{len(convs)} τ-bench conversations, {checks} budget checks per round, {args.rounds} interleaved rounds "
          f"(median); times on the agent's thread")
    print(f"  {'variant':26s} {'per check':>11s} {'ratio':>7s} {'append+check':>13s} {'ratio':>7s} "
          f"{'flush after':>12s} {'spans stored':>13s} {'dropped':>8s}")
    for name in variants:
        check = statistics.median(per_check[name])
        event = statistics.median(per_event[name])
        last = extra[name][-1] if extra[name] else {}
        flush = statistics.median([e.get("flush_s", 0.0) for e in extra[name]]) if extra[name] else 0.0
        print(f"  {name:26s} {check:9.1f}µs {check / base_check:6.2f}x {event:11.1f}µs {event / base_event:6.2f}x "
              f"{flush * 1000:10.1f}ms {last.get('stored', '-'):>13} {last.get('dropped', '-'):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
