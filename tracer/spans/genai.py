"""Model-call and tool-execution spans, after the OpenTelemetry GenAI semantic conventions.

``chat {model}`` (kind CLIENT) covers one request to the provider: what was sent (message ids,
tokens, validity under the provider's structural rules) and what came back (usage, finish
reasons, response id). ``execute_tool {name}`` covers one tool execution. Content is recorded only
when the session captures content, and always through its redaction hook.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind, Status, StatusCode

from policies import convert
from policies.messages import Message
from tracer.contract import names as sn
from tracer.spans import redact as _redact
from tracer.spans.direct import DirectSpan

if TYPE_CHECKING:
    from policies.validate import Violation
    from tracer.spans.session import TracedSession


def plain(obj: Any) -> Any:
    """SDK objects (pydantic models) as plain JSON-like data; everything else unchanged."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except TypeError:
            return dump()
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def response_messages(response: Mapping[str, Any]) -> tuple[list[Message], list[str]]:
    """The assistant messages and finish reasons of an Anthropic, OpenAI Chat Completions or OpenAI
    Responses API response body (its ``output`` items, as the Responses format groups them)."""
    if isinstance(response.get("choices"), list):
        msgs, reasons = [], []
        for choice in response["choices"]:
            if isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping):
                m, _ = convert.from_openai({"messages": [dict(choice["message"])]})
                msgs.extend(m)
                if choice.get("finish_reason"):
                    reasons.append(str(choice["finish_reason"]))
        return msgs, reasons
    if isinstance(response.get("output"), list):
        items = [dict(i) for i in response["output"] if isinstance(i, Mapping)]
        status = response.get("status")
        return convert.responses_messages(items, "output"), [str(status)] if status else []
    if isinstance(response.get("content"), list):
        m, _ = convert.from_anthropic({"messages": [{"role": "assistant", "content": response["content"]}]})
        return m, [str(response["stop_reason"])] if response.get("stop_reason") else []
    return [], []


def usage_of(response: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(input tokens, output tokens) of either provider's ``usage`` object."""
    usage = response.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    inp = usage.get("input_tokens", usage.get("prompt_tokens"))
    out = usage.get("output_tokens", usage.get("completion_tokens"))
    return (inp if isinstance(inp, int) else None), (out if isinstance(out, int) else None)


class ChatCall:
    """An open ``chat {model}`` span; finish it with :meth:`response`, :meth:`error` or :meth:`end`."""

    def __init__(self, session: TracedSession, model: str | None, provider: str | None, seq: int | None,
                 attributes: Mapping[str, Any], start_time: int | None = None) -> None:
        self.session = session
        self.model = model
        self.provider = provider
        attrs = {
            sn.GEN_AI_OPERATION_NAME: sn.OP_CHAT,
            sn.GEN_AI_PROVIDER_NAME: provider,
            sn.GEN_AI_REQUEST_MODEL: model,
            sn.GEN_AI_CONVERSATION_ID: session.session_id,
            **attributes,
        }
        self.span = session.start_span(f"{sn.OP_CHAT} {model}" if model else sn.OP_CHAT, attrs, seq=seq, kind=SpanKind.CLIENT,
                                        start_time=start_time)
        self.ended = False
        self._started = time.perf_counter()  # gen_ai.client.operation.duration, when metrics are on
        self._usage: tuple[int | None, int | None] = (None, None)
        self._error_type: str | None = None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Attributes known only when the request is sent (a replay opens the span before its checks)."""
        from tracer.spans.session import clean  # session imports this module

        try:
            span = self.span
            if type(span) is DirectSpan:  # cleaned with its record, a chunk at a time (same rule)
                span.add_cleaned(attributes)
            else:
                span.set_attributes(clean(attributes))
        except Exception as exc:  # noqa: BLE001 - never reaches the agent
            self.session._tracer_failed(exc)

    def set_input(self, messages: Sequence[Message]) -> None:
        """``gen_ai.input.messages`` (only when the session captures content)."""
        text = self.session.content(_redact.genai_messages_json, messages)
        if text is not None:
            self.span.set_attribute(sn.GEN_AI_INPUT_MESSAGES, text)

    def set_invalid(self, violations: Sequence[Violation]) -> None:
        """The request breaks the provider's structural rules: status ERROR with the provider's 400 text."""
        self.span.set_attribute(sn.REQUEST_VALID, False)
        self.span.set_attribute(sn.REQUEST_ERRORS, _redact.dumps(
            [{"code": v.code, "message": v.message} for v in violations]))
        self.span.set_attribute(sn.ERROR_TYPE, "invalid_request_error")
        self.span.set_status(Status(StatusCode.ERROR, violations[0].message if violations else "invalid request"))

    def response(self, response: Any) -> None:
        """Record the provider's response (a dict or an SDK object) and end the span."""
        if self.ended:
            return
        body = plain(response)
        if isinstance(body, Mapping):
            inp, out = usage_of(body)
            self._usage = (inp, out)
            if inp is not None:
                self.span.set_attribute(sn.GEN_AI_USAGE_INPUT_TOKENS, inp)
            if out is not None:
                self.span.set_attribute(sn.GEN_AI_USAGE_OUTPUT_TOKENS, out)
            if isinstance(body.get("id"), str):
                self.span.set_attribute(sn.GEN_AI_RESPONSE_ID, body["id"])
            if isinstance(body.get("model"), str):
                self.span.set_attribute(sn.GEN_AI_RESPONSE_MODEL, body["model"])
            msgs, reasons = response_messages(body)
            if reasons:
                self.span.set_attribute(sn.GEN_AI_RESPONSE_FINISH_REASONS, reasons)
            calls = [cid for m in msgs for cid in m.call_ids]
            if calls:
                self.span.set_attribute(sn.RESPONSE_CALL_IDS, calls)
            text = self.session.content(_redact.genai_messages_json, msgs, reasons[0] if reasons else None)
            if text is not None:
                self.span.set_attribute(sn.GEN_AI_OUTPUT_MESSAGES, text)
        self.end()

    def error(self, message: str, *, status_code: int | None = None, error_type: str | None = None) -> None:
        """The provider answered with an error (e.g. its 400 for a structurally invalid request)."""
        if self.ended:
            return
        self.session.note_failure()
        self._error_type = error_type or (str(status_code) if status_code else "error")
        self.span.set_attribute(sn.ERROR_TYPE, self._error_type)
        if status_code is not None:
            self.span.set_attribute(sn.HTTP_RESPONSE_STATUS_CODE, status_code)
        self.span.set_status(Status(StatusCode.ERROR, message))
        self.end()

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.session.end_span(self.span)
            metrics = self.session.metrics
            if metrics is not None:
                attrs = {sn.GEN_AI_OPERATION_NAME: sn.OP_CHAT, sn.GEN_AI_PROVIDER_NAME: self.provider or "",
                         sn.GEN_AI_REQUEST_MODEL: self.model or ""}
                if self._error_type is not None:
                    attrs[sn.ERROR_TYPE] = self._error_type
                metrics.model_call(attrs, time.perf_counter() - self._started, self._usage)


class ToolCall:
    """An ``execute_tool {name}`` span as a context manager; exceptions are recorded and re-raised."""

    def __init__(self, session: TracedSession, name: str, call_id: str, arguments: Any, side_effect: bool,
                 retry: bool, seq: int | None) -> None:
        self.session = session
        self.name = name
        self.call_id = call_id
        self.arguments = arguments
        self.retry = retry
        self._attrs = {
            sn.GEN_AI_OPERATION_NAME: sn.OP_EXECUTE_TOOL,
            sn.GEN_AI_TOOL_NAME: name,
            sn.GEN_AI_TOOL_CALL_ID: call_id,
            sn.GEN_AI_CONVERSATION_ID: session.session_id,
            sn.TOOL_SIDE_EFFECT: side_effect,
            sn.TOOL_RETRY: retry,
        }
        self._seq = seq
        self.span: Any = None

    def __enter__(self) -> ToolCall:
        self.span = self.session.start_span(f"{sn.OP_EXECUTE_TOOL} {self.name}", self._attrs, seq=self._seq)
        args = self.session.content(_redact_json, self.arguments)
        if args is not None:
            self.span.set_attribute(sn.GEN_AI_TOOL_CALL_ARGUMENTS, args)
        return self

    def result(self, value: Any) -> None:
        """Record the tool's result (only when the session captures content)."""
        text = self.session.content(_redact_json, value)
        if text is not None and self.span is not None:
            self.span.set_attribute(sn.GEN_AI_TOOL_CALL_RESULT, text)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.span is None:
            return
        if exc is not None:
            self.span.set_attribute(sn.ERROR_TYPE, type(exc).__name__)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.session.end_span(self.span)


def _redact_json(value: Any, redact: _redact.Redactor | None) -> str:
    value = _redact.safe_redact(value, redact)
    return value if isinstance(value, str) else _redact.dumps(value)
