"""Every span name and attribute key prunegate writes or reads, defined once (the contract: docs/spans.md).

Code elsewhere imports these constants (``from tracer.contract import names as n``) instead of
spelling ``"prunegate.…"`` strings; SQL takes them through f-strings, e.g.
``attributes->>'{n.MESSAGE_ID}'``. ``tests/tracer/contract/test_names.py`` fails when a ``"prunegate.``
literal appears outside this module, and when this module and docs/spans.md disagree.

This module imports nothing, so every wing may import it (the store's views classify spans by
these names) without pulling in OpenTelemetry.
"""

from __future__ import annotations

PREFIX = "prunegate."  # stripped from decision span names for display (``prunegate.prune`` -> ``prune``)
SCOPE = "prunegate.tracer"  # the OpenTelemetry instrumentation scope and the tracer's logger name

# ---------------------------------------------------------------- span names
SESSION = "prunegate.session"  # the root of a session's trace
MESSAGE = "prunegate.message"
UNIT_CLOSE = "prunegate.unit.close"
BUDGET_CHECK = "prunegate.budget_check"
PRUNE = "prunegate.prune"
DEFER = "prunegate.defer"
SPILL = "prunegate.spill"
REINJECT = "prunegate.reinject"
FAIL = "prunegate.fail"
VIOLATION = "prunegate.violation"
MESSAGES = "prunegate.messages"  # below full detail: message events past one span's 128 events
TRACER_STATS = "prunegate.tracer.stats"  # one row per pipeline shutdown, written by the store sink
ANNOTATION = "prunegate.annotation"  # a person's label and note on a session, a decision or a violation
COMPARISON = "prunegate.comparison"  # a saved comparison of an older store (now a record: tracer.store.records)
PASSTHROUGH = "prunegate.passthrough"  # a live request the guard could not handle, sent unchanged
UNSENT_REQUEST = "prunegate.unsent_request"  # a replay's request the gate failed before it went out

DECISION_SPANS: tuple[str, ...] = (PRUNE, DEFER, SPILL, REINJECT, FAIL)  # children of a budget check
SPAN_NAMES: tuple[str, ...] = (SESSION, MESSAGE, MESSAGES, UNIT_CLOSE, BUDGET_CHECK, *DECISION_SPANS, VIOLATION, TRACER_STATS,
                                ANNOTATION, COMPARISON, PASSTHROUGH, UNSENT_REQUEST)
# spans people add after the fact: never part of a session's events, counts or activity times
AFTERWARDS_SPANS: tuple[str, ...] = (ANNOTATION, COMPARISON)
# A decision counts as a deferral when it deferred, or when its reason starts with one of these
# (a deferral that then spilled or failed at the hard ceiling: "pending_calls; spilled to hold ...").
DEFERRAL_REASONS: tuple[str, ...] = ("pending_calls", "open_messages", "no_safe_prune", "policy_error")

# ---------------------------------------------------------------- on every prunegate span
SESSION_ID = "prunegate.session.id"
SEQ = "prunegate.seq"

# ---------------------------------------------------------------- session root
SESSION_SOURCE = "prunegate.session.source"
DETAIL = "prunegate.detail"  # the detail level the session was recorded at: decisions | checks | full
SESSION_SOURCE_ID = "prunegate.session.source_id"
SESSION_NAME = "prunegate.session.name"
PROVIDER = "prunegate.provider"
POLICY = "prunegate.policy"
POLICY_PARAMS = "prunegate.policy.params"
GATED = "prunegate.gated"
BUDGET = "prunegate.budget"
HARD_CEILING = "prunegate.hard_ceiling"
CONTENT_CAPTURED = "prunegate.content_captured"
VIOLATIONS = "prunegate.violations"  # count, set when the session ends
SESSION_PREVIOUS = "prunegate.session.previous"
SESSION_DIVERGED_AT = "prunegate.session.diverged_at"
REQUESTS = "prunegate.requests"
GUARD_ERRORS = "prunegate.guard.errors"
SESSION_KEY = "prunegate.session.key"  # live sessions: the framework's conversation identity (thread id, ...)
SESSION_REWRITES = "prunegate.session.rewrites"  # live keyed sessions, at the end: histories the framework rewrote
# a passthrough span: what the guard could not handle, and where
GUARD_ERROR = "prunegate.guard.error"
GUARD_WHERE = "prunegate.guard.where"
SHADOW_RUNS = "prunegate.shadow.runs"
# imported sessions: where the conversation came from
SESSION_FORMAT = "prunegate.session.format"
SESSION_FILE = "prunegate.session.file"
SESSION_LINE = "prunegate.session.line"
SESSION_MESSAGES = "prunegate.session.messages"
SESSION_TOOL_CALLS = "prunegate.session.tool_calls"
SESSION_RENAMED_IDS = "prunegate.session.renamed_ids"
SESSION_SIDE_EFFECT_TOOLS = "prunegate.session.side_effect_tools"
SESSION_STREAMED_CALLS = "prunegate.session.streamed_calls"
SESSION_REQUEST = "prunegate.session.request"
# any span: how many code points of its text were not valid Unicode (lone surrogates) and were
# replaced by U+FFFD before it was written (tracer.store.text); on an imported session's root: its input's
TEXT_REPLACED = "prunegate.text.replaced"
# replay sessions: the run's label and outcome
REPLAY_LABEL = "prunegate.replay.label"
REPLAY_SEED = "prunegate.replay.seed"
REPLAY_STREAM_RESULTS = "prunegate.replay.stream_results"
REPLAY_MODE = "prunegate.replay.mode"  # the gate's mode the replay ran in (grow | ...): what a re-run needs
REPLAY_RERUN_OF = "prunegate.replay.rerun_of"  # a re-run at full detail of this replay (tracer.lab.rerun)
REPLAY_FAILED = "prunegate.replay.failed"
REPLAY_ERROR = "prunegate.replay.error"
# replay sessions, at the end: one attribute per metric of tracer.lab.metrics (its ``attribute(name)``)
REPLAY_METRIC_PREFIX = "prunegate.replay."
REPLAY_INVALID_REQUESTS = "prunegate.replay.invalid_requests"
REPLAY_ORPHAN_RESULTS = "prunegate.replay.orphan_results"
REPLAY_DANGLING_CALLS = "prunegate.replay.dangling_calls"
REPLAY_DUPLICATED_SIDE_EFFECTS = "prunegate.replay.duplicated_side_effects"
REPLAY_TOKENS_SENT = "prunegate.replay.tokens_sent"
REPLAY_PEAK_TOKENS = "prunegate.replay.peak_tokens"
REPLAY_PRUNES = "prunegate.replay.prunes"
REPLAY_DEFERRALS = "prunegate.replay.deferrals"
REPLAY_SPILLS = "prunegate.replay.spills"
REPLAY_FAILURES = "prunegate.replay.failures"
REPLAY_RETENTION = "prunegate.replay.retention"
REPLAY_MODEL_CALLS = "prunegate.replay.model_calls"
REPLAY_REINJECTS = "prunegate.replay.reinjects"
REPLAY_REFERENCES = "prunegate.replay.references"
REPLAY_RETAINED = "prunegate.replay.retained"
REPLAY_LOST_STREAM_HEADS = "prunegate.replay.lost_stream_heads"

# ---------------------------------------------------------------- prunegate.message
EVENT = "prunegate.event"
MESSAGE_ID = "prunegate.message.id"
MESSAGE_ROLE = "prunegate.message.role"
UNIT_ID = "prunegate.unit.id"
MESSAGE_TOKENS = "prunegate.message.tokens"
CONTEXT_TOKENS = "prunegate.context.tokens"
MESSAGE_CLOSED = "prunegate.message.closed"
MESSAGE_CALL_IDS = "prunegate.message.call_ids"
MESSAGE_ANSWERS = "prunegate.message.answers"
MESSAGE_TOOL_NAMES = "prunegate.message.tool_names"
MESSAGE_CAUSE = "prunegate.message.cause"
MESSAGE_SUMMARY_OF = "prunegate.message.summary_of"
MESSAGE_TOKENS_BEFORE = "prunegate.message.tokens_before"
MESSAGE_CONTENT = "prunegate.message.content"
DELTA_CHARS = "prunegate.delta.chars"
DELTA_TEXT = "prunegate.delta.text"

# ---------------------------------------------------------------- prunegate.unit.close
UNIT_KIND = "prunegate.unit.kind"
UNIT_TOKENS = "prunegate.unit.tokens"
UNIT_MESSAGE_IDS = "prunegate.unit.message_ids"
UNIT_CALL_IDS = "prunegate.unit.call_ids"

# ---------------------------------------------------------------- budget checks and decisions
CHECK = "prunegate.check"
DECISION = "prunegate.decision"
REASON = "prunegate.reason"
TOKENS_BEFORE = "prunegate.tokens.before"
TOKENS_AFTER = "prunegate.tokens.after"
TOKENS_OVERHEAD = "prunegate.tokens.overhead"  # tokens outside the context (system prompt, tools) the budget counts
PENDING_CALLS = "prunegate.pending_calls"
OPEN_MESSAGES = "prunegate.open_messages"
PROPOSAL = "prunegate.proposal"
PROPOSAL_IDS = "prunegate.proposal.ids"
SCORES = "prunegate.scores"
PRUNED_UNITS = "prunegate.pruned.units"
PRUNED_IDS = "prunegate.pruned.ids"
GROWN_UNITS = "prunegate.grown.units"
SHRUNK_UNITS = "prunegate.shrunk.units"
SKIPPED_UNITS = "prunegate.skipped.units"
REWRITTEN_IDS = "prunegate.rewritten.ids"
SUMMARIZED_UNITS = "prunegate.summarized.units"
SUMMARY_ID = "prunegate.summary.id"
BUDGET_MET = "prunegate.budget_met"
ERROR = "prunegate.error"
BLOCKING_UNITS = "prunegate.blocking.units"
SPILLED_UNITS = "prunegate.spilled.units"
REINJECTED_UNITS = "prunegate.reinjected.units"

# replays: references a prune made unavailable (tracer.lab.attribution), on the prune span and the session root
LOST_REFERENCES = "prunegate.lost_references"
LOST_REFERRERS = "prunegate.lost_references.referrers"
LOST_SOURCES = "prunegate.lost_references.sources"
REFERENCES = "prunegate.references"
REFERENCES_LOST = "prunegate.references.lost"
REFERENCES_LOST_SOURCES = "prunegate.references.lost_sources"
REFERENCES_LOST_TOOLS = "prunegate.references.lost_tools"
REFERENCES_LOST_PRUNE_SEQS = "prunegate.references.lost_prune_seqs"
REFERENCES_LOST_PRUNE_SPANS = "prunegate.references.lost_prune_span_ids"
# ---------------------------------------------------------------- shadow mode (on the prune span)
SHADOW_VERDICT = "prunegate.shadow.verdict"
SHADOW_SPLIT_UNITS = "prunegate.shadow.split.units"
SHADOW_SKIPPED_UNITS = "prunegate.shadow.skipped.units"
SHADOW_INSERTED = "prunegate.shadow.inserted"
SHADOW_GROW_IDS = "prunegate.shadow.grow.ids"
SHADOW_GROW_TOKENS_AFTER = "prunegate.shadow.grow.tokens_after"
SHADOW_GROW_VALID = "prunegate.shadow.grow.valid"
SHADOW_GROW_BUDGET_MET = "prunegate.shadow.grow.budget_met"
SHADOW_SHRINK_IDS = "prunegate.shadow.shrink.ids"
SHADOW_SHRINK_TOKENS_AFTER = "prunegate.shadow.shrink.tokens_after"
SHADOW_SHRINK_VALID = "prunegate.shadow.shrink.valid"
SHADOW_SHRINK_BUDGET_MET = "prunegate.shadow.shrink.budget_met"
# the gate's two counterfactuals: option -> (ids, tokens_after, valid, budget_met)
SHADOW_OPTIONS: dict[str, tuple[str, str, str, str]] = {
    "grow": (SHADOW_GROW_IDS, SHADOW_GROW_TOKENS_AFTER, SHADOW_GROW_VALID, SHADOW_GROW_BUDGET_MET),
    "shrink": (SHADOW_SHRINK_IDS, SHADOW_SHRINK_TOKENS_AFTER, SHADOW_SHRINK_VALID, SHADOW_SHRINK_BUDGET_MET),
}

# ---------------------------------------------------------------- model calls and tool executions
REQUEST_VALID = "prunegate.request.valid"
REQUEST_ERRORS = "prunegate.request.errors"
REQUEST_TOKENS = "prunegate.request.tokens"
REQUEST_MESSAGE_IDS = "prunegate.request.message_ids"
REQUEST_OVERHEAD_TOKENS = "prunegate.request.overhead_tokens"
RESPONSE_CALL_IDS = "prunegate.response.call_ids"
TOOL_SIDE_EFFECT = "prunegate.tool.side_effect"
TOOL_RETRY = "prunegate.tool.retry"

# ---------------------------------------------------------------- prunegate.violation
VIOLATION_CODE = "prunegate.violation.code"
VIOLATION_MESSAGE = "prunegate.violation.message"
VIOLATION_IDS = "prunegate.violation.ids"
VIOLATION_INDEX = "prunegate.violation.index"
VIOLATION_MESSAGE_IDS = "prunegate.violation.message_ids"
VIOLATION_EVICTED_ID = "prunegate.violation.evicted_id"
VIOLATION_CAUSE_CHECK = "prunegate.violation.cause_check"
# the cause's span and trace ids (hex), for backends that do not show span links (tracer.spans.openinference)
VIOLATION_CAUSE_SPAN_ID = "prunegate.violation.cause_span_id"
VIOLATION_CAUSE_TRACE_ID = "prunegate.violation.cause_trace_id"
LINK = "prunegate.link"  # on the violation's span link: "caused_by"
LINK_CAUSED_BY = "caused_by"

# ---------------------------------------------------------------- prunegate.annotation
ANNOTATION_ID = "prunegate.annotation.id"
ANNOTATION_TARGET = "prunegate.annotation.target"  # session | decision | violation
ANNOTATION_SPAN_ID = "prunegate.annotation.span_id"  # the annotated span (the root for a session)
ANNOTATION_LABEL = "prunegate.annotation.label"
ANNOTATION_NOTE = "prunegate.annotation.note"
ANNOTATION_AUTHOR = "prunegate.annotation.author"
ANNOTATION_TARGETS: tuple[str, ...] = ("session", "decision", "violation")

# ---------------------------------------------------------------- prunegate.comparison
COMPARISON_ID = "prunegate.comparison.id"
COMPARISON_TITLE = "prunegate.comparison.title"
COMPARISON_PARAMS = "prunegate.comparison.params"  # JSON: what was run (sessions, policies, budget, ...)
COMPARISON_RESULTS = "prunegate.comparison.results"  # JSON: the summary, sums and paired differences

# ---------------------------------------------------------------- prunegate.tracer.stats
TRACER_SINK = "prunegate.tracer.sink"
TRACER_RECEIVED = "prunegate.tracer.received"
TRACER_STORED = "prunegate.tracer.stored"
TRACER_SPOOLED = "prunegate.tracer.spooled"
TRACER_RECOVERED = "prunegate.tracer.recovered"
TRACER_FAILED = "prunegate.tracer.failed"
TRACER_DROPPED = "prunegate.tracer.dropped"
TRACER_LAST_ERROR = "prunegate.tracer.last_error"
# the span pipeline's counter -> its attribute
TRACER_STAT_KEYS: dict[str, str] = {
    "received": TRACER_RECEIVED, "stored": TRACER_STORED, "spooled": TRACER_SPOOLED,
    "recovered": TRACER_RECOVERED, "failed": TRACER_FAILED, "dropped": TRACER_DROPPED,
    "last_error": TRACER_LAST_ERROR,
}

# ---------------------------------------------------------------- OpenTelemetry GenAI / general keys prunegate emits
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_CONVERSATION_COMPACTED = "gen_ai.conversation.compacted"  # the request's check pruned, summarized or spilled
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
# GenAI keys and event names prunegate only reads (import and serve of other instrumentations' spans)
GEN_AI_PREFIX = "gen_ai."  # any GenAI key: a span carrying one is a GenAI span
GEN_AI_SYSTEM = "gen_ai.system"  # the provider, before gen_ai.provider.name
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_PROMPT = "gen_ai.prompt"  # older indexed keys: gen_ai.prompt.<i>.role / .content
GEN_AI_COMPLETION = "gen_ai.completion"  # gen_ai.completion.<i>.role / .content
GEN_AI_DETAILS_EVENT = "gen_ai.client.inference.operation.details"  # event holding the messages
GEN_AI_SYSTEM_MESSAGE_EVENT = "gen_ai.system.message"  # older per-message events
GEN_AI_USER_MESSAGE_EVENT = "gen_ai.user.message"
GEN_AI_ASSISTANT_MESSAGE_EVENT = "gen_ai.assistant.message"
GEN_AI_TOOL_MESSAGE_EVENT = "gen_ai.tool.message"
GEN_AI_CHOICE_EVENT = "gen_ai.choice"
ERROR_TYPE = "error.type"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
PROCESS_PID = "process.pid"  # on prunegate.tracer.stats
# OpenInference keys prunegate emits on its live spans (what Phoenix/Langfuse read: tracer.spans.openinference)
OI_SPAN_KIND = "openinference.span.kind"
OI_SESSION_ID = "session.id"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OP_CHAT = "chat"  # values of gen_ai.operation.name, and the first word of the GenAI span names
OP_EXECUTE_TOOL = "execute_tool"

# ---------------------------------------------------------------- metrics (docs/metrics.md)
# instrument names: the OpenTelemetry GenAI metric conventions where they exist, prunegate.* otherwise
METRIC_CHECKS = "prunegate.checks"  # counter: budget checks, by decision kind
METRIC_DECISIONS = "prunegate.decisions"  # counter: decisions other than within_budget, by kind and reason
METRIC_DEFERRALS = "prunegate.deferrals"  # counter: deferrals, by reason
METRIC_HARD_CEILING_FAILURES = "prunegate.hard_ceiling.failures"  # counter
METRIC_VIOLATIONS = "prunegate.violations.caused"  # counter: violations recorded, by code
METRIC_VIOLATIONS_PREVENTED = "prunegate.violations.prevented"  # counter: unit splits and live evictions the gate stopped
METRIC_GUARD_ERRORS = "prunegate.tracing.errors"  # counter: observer and tracing-pipeline failures (never raised)
METRIC_GUARD_PASS_THROUGHS = "prunegate.guard.pass_throughs"  # counter: requests sent unchanged
METRIC_UNITS_PRUNED = "prunegate.units.pruned"
METRIC_UNITS_SPILLED = "prunegate.units.spilled"
METRIC_UNITS_REINJECTED = "prunegate.units.reinjected"
METRIC_CHECK_TOKENS = "prunegate.check.tokens"  # histogram: request tokens before and after a check
METRIC_TOKENS_SAVED = "prunegate.tokens.saved"  # histogram: tokens a check removed from the request
METRIC_CHECK_DURATION = "prunegate.check.duration"  # histogram (s)
METRIC_GEN_AI_TOKEN_USAGE = "gen_ai.client.token.usage"  # histogram: the provider's usage, input and output
METRIC_GEN_AI_OPERATION_DURATION = "gen_ai.client.operation.duration"  # histogram (s): a model call
METRIC_SERVE_SPANS = "prunegate.serve.spans"  # counter: spans committed by prunegate serve
METRIC_SERVE_REQUESTS = "prunegate.serve.requests"  # counter: requests committed
METRIC_SERVE_REFUSED = "prunegate.serve.refused"  # counter: requests refused, by HTTP status (429: back-pressure)
METRIC_SERVE_INFLIGHT = "prunegate.serve.inflight"  # gauge: requests being decoded and written (the queue)
METRIC_SERVE_INFLIGHT_LIMIT = "prunegate.serve.inflight.limit"  # gauge: --max-inflight
METRIC_SERVE_CONVERSATIONS = "prunegate.serve.conversations.pending"  # gauge: model-call spans awaiting stitching
METRIC_PROCESS_MEMORY = "process.memory.usage"  # gauge (By): resident set size (OTel process conventions)
METRIC_NAMES: tuple[str, ...] = (
    METRIC_CHECKS, METRIC_DECISIONS, METRIC_DEFERRALS, METRIC_HARD_CEILING_FAILURES, METRIC_VIOLATIONS,
    METRIC_VIOLATIONS_PREVENTED, METRIC_GUARD_ERRORS, METRIC_GUARD_PASS_THROUGHS, METRIC_UNITS_PRUNED,
    METRIC_UNITS_SPILLED, METRIC_UNITS_REINJECTED, METRIC_CHECK_TOKENS, METRIC_TOKENS_SAVED, METRIC_CHECK_DURATION,
    METRIC_GEN_AI_TOKEN_USAGE, METRIC_GEN_AI_OPERATION_DURATION, METRIC_SERVE_SPANS, METRIC_SERVE_REQUESTS,
    METRIC_SERVE_REFUSED, METRIC_SERVE_INFLIGHT, METRIC_SERVE_INFLIGHT_LIMIT, METRIC_SERVE_CONVERSATIONS,
    METRIC_PROCESS_MEMORY,
)
# attribute keys only metrics carry (with prunegate.decision, .policy, .reason, .gated, .session.source, ...)
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"  # input | output
TOKENS_STAGE = "prunegate.tokens.stage"  # before | after
PREVENTION = "prunegate.prevention"  # grown | shrunk | deferred
ERROR_SOURCE = "prunegate.error.source"  # observer | tracer

# the attributes that carry a span's session id, in order of preference (the store promotes it)
SESSION_ATTRIBUTES: tuple[str, str] = (GEN_AI_CONVERSATION_ID, SESSION_ID)


def metric_names() -> tuple[str, ...]:
    """Every metric (instrument) name above."""
    return METRIC_NAMES


def span_names() -> tuple[str, ...]:
    """Every span name above."""
    return SPAN_NAMES


def attribute_keys() -> tuple[str, ...]:
    """Every attribute key above (``prunegate.*`` and the GenAI/OTel keys prunegate emits)."""
    names = set(SPAN_NAMES) | set(METRIC_NAMES) | {PREFIX, SCOPE, REPLAY_METRIC_PREFIX, GEN_AI_PREFIX}
    return tuple(sorted(
        v for k, v in globals().items()
        if k.isupper() and isinstance(v, str) and "." in v and v not in names
    ))
