"""A guarded agent loop that moves every gate metric (docs/metrics.md), for the metrics tests.

:func:`exercise` drives real guards (gated, naive, with a hard ceiling, a body it cannot read, a
broken span processor and a broken observer) and a gate that spills and re-injects, all recording
into ``meter_provider``. Run as a script (``python -m tests.metered PORT``) it serves the metrics on
a Prometheus endpoint and repeats the loop until killed, for the test that scrapes it with a real
Prometheus server.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from policies import Context, Gate, HardCeilingExceeded, MemorySpillStore
from policies.observer import MultiObserver, Observer
from tests.invariants import Scripted
from tests.scenarios import history as history_of
from tests.scenarios import parallel_batch, result
from tracer.guard import PruneGuard
from tracer.spans import SessionConfig, SpanObserver, TracedSession
from tracer.spans.metrics import gate_metrics

FILLER = "details " * 60


def body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 256, "system": "be brief", "tools": [{"name": "lookup"}],
            "messages": messages}


def turn(i: int, *, tool: bool = False) -> list[dict[str, Any]]:
    """One closed exchange: a question and an answer (optionally through a tool call)."""
    out: list[dict[str, Any]] = [{"role": "user", "content": f"question {i} " + FILLER}]
    if tool:
        out.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"call_{i}", "name": "lookup",
                                                      "input": {"q": i}}]})
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"call_{i}",
                                                 "content": "result " + FILLER}]})
    out.append({"role": "assistant", "content": f"answer {i} " + FILLER})
    return out


class _Exploding(SpanProcessor):
    """A span exporter that is down."""

    def on_end(self, span: Any) -> None:
        raise OSError("exporter down")


class _Boom(Observer):
    """An observer that fails at every decision."""

    def on_decision(self, ctx: Any, decision: Any) -> None:
        raise RuntimeError("observer down")


def exercise(meter_provider: MeterProvider | None, tracer_provider: TracerProvider, *,
             metrics_port: int | None = None) -> None:
    """One pass of a guarded agent loop in which every gate metric moves."""
    kw: dict[str, Any] = {"tracer_provider": tracer_provider, "meter_provider": meter_provider,
                          "metrics_port": metrics_port}
    history = turn(0) + turn(1, tool=True) + [{"role": "user", "content": "so?"}]
    # gated: the policy's cut through a unit is grown to the whole unit (a violation prevented)
    pg = PruneGuard(Scripted("m4", name="salience"), budget=50, **kw)
    pg.gate(body(history))
    pg.record_response({"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 40, "output_tokens": 3}})
    # a deferral while a call is pending (live state the gate would not evict)
    pending = turn(0) + [{"role": "assistant", "content": [{"type": "tool_use", "id": "p1", "name": "lookup",
                                                            "input": {}}]}]
    pg.gate(body(pending))
    # a broken observer: counted, never raised
    pg.context.observer = MultiObserver(pg.observer, _Boom())
    pg.gate(body(pending + [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "p1",
                                                          "content": "r"}]}]))
    # a body the guard cannot read passes through
    pg.gate({"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_use", "name": "x"}]}]})
    pg.close()
    # ungated: the same cut orphans a result (a violation caused) and the provider answers 400
    naive = PruneGuard(Scripted("m4", name="salience"), budget=50, gated=False, **kw)
    naive.gate(body(history))
    naive.record_response(error={"type": "error", "error": {"type": "invalid_request_error", "message": "orphan"}})
    naive.close()
    # a hard ceiling that cannot hold
    loud = PruneGuard(Scripted(), budget=50, hard_ceiling=60, **kw)
    try:
        loud.gate(body([{"role": "user", "content": FILLER}]))
    except HardCeilingExceeded:
        pass  # the guarantee the user asked for: loud; the metric is what this loop checks
    loud.close()
    # a tracing pipeline that fails: counted on the guard's metrics, never raised
    broken = TracerProvider()
    broken.add_span_processor(_Exploding())
    down = PruneGuard("recency", budget=300, **{**kw, "tracer_provider": broken})
    down.gate(body(turn(0, tool=True) + turn(1, tool=True) + [{"role": "user", "content": "so?"}]))
    down.close()
    # a gate that spills over the hard ceiling while calls are pending, then re-injects on demand
    metrics = pg.metrics if meter_provider is None else gate_metrics(meter_provider)
    session = TracedSession(tracer_provider, SessionConfig(source="live", policy="scripted", metrics=metrics))
    ctx = Context(observer=SpanObserver(session), session_id=session.session_id)
    history_of(ctx, turns=3)
    parallel_batch(ctx)
    ctx.append(result("call_weather", "sunny " * 30))
    gate = Gate(Scripted(), budget=ctx.tokens // 2, hard_ceiling=ctx.tokens - 1, spill_store=MemorySpillStore())
    d = gate.check(ctx)
    for cid in ("call_hotel", "call_book"):
        ctx.append(result(cid, "ok"))
    for unit_id in d.spilled_units[:1]:
        gate.reinject(ctx, unit_id)
    session.end()


def main(argv: list[str]) -> int:
    """Serve the metrics on 127.0.0.1:PORT and run the loop until killed."""
    port = int(argv[0])
    tracer_provider = TracerProvider()
    print("metered: serving", flush=True)
    while True:
        exercise(None, tracer_provider, metrics_port=port)
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
