"""OpenTelemetry metrics of the gate and of ``prunegate serve`` (the list: docs/metrics.md).

Production teams watch rates and get alerts before they open a trace. :class:`GateMetrics` holds
prunegate's instruments on one meter; the gate's observer (:class:`~tracer.spans.observer.SpanObserver`)
and its :class:`~tracer.spans.session.TracedSession` record into it, so every guard, adapter and
replay that traces through them is measured in one place. Metrics go wherever the
``MeterProvider`` sends them: the user's own, OTLP (:func:`meter_provider` with ``otlp_endpoint``)
or a Prometheus endpoint (:func:`prometheus_provider`, behind ``PruneGuard(metrics_port=...)`` and
``prunegate serve --metrics``). :func:`resolve` returns None when nothing would read the metrics
(the global provider is OpenTelemetry's no-op one), so an unmeasured guard pays nothing.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from policies.decision import Decision, DecisionKind
from tracer.contract import names as sn

__all__ = ["GateMetrics", "gate_metrics", "meter_provider", "observe_receiver", "prometheus_provider", "resolve"]

# bucket boundaries: the GenAI conventions' advice for token usage and durations; check latency in s
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
CHECK_BUCKETS = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                 0.25, 1.0)
_PREVENTING_DEFERRALS = ("pending_calls", "open_messages")
REFUSALS = (400, 401, 404, 411, 413, 429, 503)  # the statuses prunegate serve refuses with (docs/scale.md)  # a prune here would have evicted live state


class GateMetrics:
    """prunegate's instruments on one meter of ``provider`` (made once per provider: :func:`gate_metrics`)."""

    def __init__(self, provider: MeterProvider) -> None:
        m: Meter = provider.get_meter(sn.SCOPE)
        self.meter = m
        self.checks = m.create_counter(sn.METRIC_CHECKS, "{check}", "budget checks, by decision kind")
        self.decisions = m.create_counter(sn.METRIC_DECISIONS, "{decision}",
                                          "decisions other than within_budget, by kind and reason")
        self.deferrals = m.create_counter(sn.METRIC_DEFERRALS, "{deferral}", "deferrals, by reason")
        self.failures = m.create_counter(sn.METRIC_HARD_CEILING_FAILURES, "{failure}",
                                         "checks that could not hold the hard ceiling")
        self.violations = m.create_counter(sn.METRIC_VIOLATIONS, "{violation}",
                                           "structural violations recorded (caused), by code")
        self.prevented = m.create_counter(sn.METRIC_VIOLATIONS_PREVENTED, "{unit}",
                                          "unit splits and live-state evictions the gate stopped")
        self.errors = m.create_counter(sn.METRIC_GUARD_ERRORS, "{error}",
                                       "observer and tracing-pipeline failures (counted, never raised)")
        self.pass_throughs = m.create_counter(sn.METRIC_GUARD_PASS_THROUGHS, "{request}",
                                              "requests the guard sent unchanged because it could not handle them")
        self.pruned = m.create_counter(sn.METRIC_UNITS_PRUNED, "{unit}", "units pruned")
        self.spilled = m.create_counter(sn.METRIC_UNITS_SPILLED, "{unit}", "units spilled to the spill store")
        self.reinjected = m.create_counter(sn.METRIC_UNITS_REINJECTED, "{unit}", "units re-injected")
        self.tokens = m.create_histogram(sn.METRIC_CHECK_TOKENS, "{token}", "request tokens before and after a check",
                                         explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.saved = m.create_histogram(sn.METRIC_TOKENS_SAVED, "{token}", "tokens a check removed from the request",
                                        explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.duration = m.create_histogram(sn.METRIC_CHECK_DURATION, "s", "time the gate took to decide a check",
                                           explicit_bucket_boundaries_advisory=CHECK_BUCKETS)
        self.token_usage = m.create_histogram(sn.METRIC_GEN_AI_TOKEN_USAGE, "{token}",
                                              "tokens the provider reported, input and output",
                                              explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.operation = m.create_histogram(sn.METRIC_GEN_AI_OPERATION_DURATION, "s", "duration of a model call",
                                            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)

    # ------------------------------------------------------------------ what the observer reports
    def decision(self, d: Decision, gated: bool | None, source: str) -> None:
        """One budget check and its decision."""
        kind = str(d.kind)
        base: dict[str, str | bool] = {sn.POLICY: d.policy or "", sn.GATED: bool(gated), sn.SESSION_SOURCE: source}
        self.checks.add(1, {**base, sn.DECISION: kind})
        self.tokens.record(d.tokens_before, {**base, sn.TOKENS_STAGE: "before"})
        self.tokens.record(d.tokens_after, {**base, sn.TOKENS_STAGE: "after"})
        self.saved.record(max(0, d.tokens_before - d.tokens_after), base)
        if d.duration_ns:
            self.duration.record(d.duration_ns / 1e9, {**base, sn.DECISION: kind})
        if d.kind == DecisionKind.WITHIN_BUDGET:
            return
        self.decisions.add(1, {**base, sn.DECISION: kind, sn.REASON: d.reason})
        if d.kind == DecisionKind.DEFERRED:
            self.deferrals.add(1, {**base, sn.REASON: d.reason})
        elif d.kind == DecisionKind.FAILED:
            self.failures.add(1, base)
        if d.pruned_units:
            self.pruned.add(len(d.pruned_units), base)
        if d.spilled_units:
            self.spilled.add(len(d.spilled_units), base)
        if d.reinjected_units:
            self.reinjected.add(len(d.reinjected_units), base)
        if gated:
            for how, units in (("grown", d.grown_units), ("shrunk", d.shrunk_units)):
                if units:
                    self.prevented.add(len(units), {**base, sn.PREVENTION: how})
            if d.kind == DecisionKind.DEFERRED and d.reason in _PREVENTING_DEFERRALS and d.blocking_units:
                self.prevented.add(len(d.blocking_units), {**base, sn.PREVENTION: "deferred"})

    def violation(self, code: str, gated: bool | None, source: str, policy: str | None) -> None:
        self.violations.add(1, {sn.VIOLATION_CODE: code, sn.POLICY: policy or "", sn.GATED: bool(gated),
                                sn.SESSION_SOURCE: source})

    def error(self, where: str) -> None:
        """An observer (``observer``) or the tracing pipeline (``tracer``) failed; the agent went on."""
        self.errors.add(1, {sn.ERROR_SOURCE: where})

    def pass_through(self, exc: BaseException) -> None:
        self.pass_throughs.add(1, {sn.ERROR_TYPE: type(exc).__name__})

    def model_call(self, attributes: dict[str, str], seconds: float, usage: tuple[int | None, int | None]) -> None:
        """A finished model call: its duration and the provider's token usage (GenAI conventions)."""
        self.operation.record(seconds, attributes)
        for kind, n in zip(("input", "output"), usage, strict=True):
            if n is not None:
                self.token_usage.record(n, {**attributes, sn.GEN_AI_TOKEN_TYPE: kind})


_BY_PROVIDER: weakref.WeakKeyDictionary[Any, GateMetrics] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def gate_metrics(provider: MeterProvider) -> GateMetrics:
    """The :class:`GateMetrics` of ``provider``, made once (instruments are registered per meter)."""
    with _LOCK:
        found = _BY_PROVIDER.get(provider)
        if found is None:
            found = _BY_PROVIDER[provider] = GateMetrics(provider)
        return found


def _reads_metrics(provider: MeterProvider) -> bool:
    """False for OpenTelemetry's default providers (no SDK set up: every measurement is dropped)."""
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return not isinstance(provider, (NoOpMeterProvider, _ProxyMeterProvider))


def resolve(meter_provider: MeterProvider | None = None, metrics_port: int | None = None,
            metrics_host: str = "127.0.0.1") -> GateMetrics | None:
    """The metrics a guard records into: a Prometheus endpoint on ``metrics_port``, else
    ``meter_provider``, else the global provider when one is set up; None when nothing reads them."""
    if metrics_port is not None:
        return gate_metrics(prometheus_provider(metrics_port, metrics_host))
    provider = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
    return gate_metrics(provider) if _reads_metrics(provider) else None


def meter_provider(*, otlp_endpoint: str | None = None, interval_s: float = 10.0,
                   readers: Iterable[Any] = ()) -> MeterProvider:
    """An SDK ``MeterProvider`` exporting to an OTLP/HTTP endpoint (``{endpoint}/v1/metrics``) every
    ``interval_s`` seconds, plus any ``readers`` given."""
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    all_readers = list(readers)
    if otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/metrics")
        all_readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=int(interval_s * 1000)))
    return SdkMeterProvider(metric_readers=all_readers)


_PROMETHEUS: dict[tuple[str, int], MeterProvider] = {}
_PROMETHEUS_PROVIDER: list[MeterProvider] = []


def prometheus_provider(port: int, host: str = "127.0.0.1") -> MeterProvider:
    """A ``MeterProvider`` whose metrics a Prometheus server scrapes at ``http://host:port/metrics``.

    One per process (Prometheus reads the process's one registry): a second call for another port
    serves the same metrics there too. Raises ``OSError`` when the port cannot be bound."""
    with _LOCK:
        if (host, port) in _PROMETHEUS:
            return _PROMETHEUS[(host, port)]
        if not _PROMETHEUS_PROVIDER:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            _PROMETHEUS_PROVIDER.append(meter_provider(readers=[PrometheusMetricReader()]))
        provider = _PROMETHEUS_PROVIDER[0]
        from prometheus_client import start_http_server

        server = start_http_server(port, addr=host)
        bound = int(server[0].server_address[1]) if isinstance(server, tuple) else port
        _PROMETHEUS[(host, port)] = _PROMETHEUS[(host, bound)] = provider
        return provider


def prometheus_port(provider: MeterProvider, host: str = "127.0.0.1") -> int | None:
    """The port ``provider`` is served on (the one bound for a request of port 0)."""
    ports = [p for (h, p), v in _PROMETHEUS.items() if v is provider and h == host and p]
    return ports[-1] if ports else None


def _rss_bytes() -> int:
    """This process's resident set size (Linux ``/proc``; elsewhere the peak from ``resource``)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def observe_receiver(provider: MeterProvider, receiver: Any, max_inflight: int) -> None:
    """Serve's own health as observable instruments read at collection time (nothing on the request
    path): spans and requests committed, refusals by status, requests in flight, pending
    conversations, resident memory. ``receiver`` is a :class:`tracer.wire.serve.Receiver`."""
    m = provider.get_meter(sn.SCOPE)
    stats = receiver.stats
    slots = receiver.slots

    def spans(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(stats.spans)]

    def requests(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(stats.requests)]

    def refused(_: CallbackOptions) -> Iterable[Observation]:
        counts = {**dict.fromkeys(REFUSALS, 0), **stats.refused}  # from 0, so increase() sees the first 429
        return [Observation(n, {sn.HTTP_RESPONSE_STATUS_CODE: code}) for code, n in sorted(counts.items())]

    def inflight(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(max_inflight - slots._value)]  # BoundedSemaphore's free slots

    def limit(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(max_inflight)]

    def pending(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(len(receiver.conversations))]

    def rss(_: CallbackOptions) -> Iterable[Observation]:
        return [Observation(_rss_bytes())]

    m.create_observable_counter(sn.METRIC_SERVE_SPANS, [spans], "{span}", "spans committed to the store")
    m.create_observable_counter(sn.METRIC_SERVE_REQUESTS, [requests], "{request}", "requests committed")
    m.create_observable_counter(sn.METRIC_SERVE_REFUSED, [refused], "{request}",
                                "requests refused, by HTTP status (429: too many in flight)")
    m.create_observable_gauge(sn.METRIC_SERVE_INFLIGHT, [inflight], "{request}",
                              "requests being decoded and written now")
    m.create_observable_gauge(sn.METRIC_SERVE_INFLIGHT_LIMIT, [limit], "{request}", "--max-inflight")
    m.create_observable_gauge(sn.METRIC_SERVE_CONVERSATIONS, [pending], "{span}",
                              "model-call spans of conversations not yet stitched into sessions")
    m.create_observable_gauge(sn.METRIC_PROCESS_MEMORY, [rss], "By", "resident set size of this process")
