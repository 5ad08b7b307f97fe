"""What LLM-trace backends (Arize Phoenix, Langfuse) read, added to prunegate's spans.

Those backends sort spans by the OpenInference attributes: ``openinference.span.kind`` (a span
without it shows as UNKNOWN), ``session.id`` (the sessions page), ``input.value`` and
``output.value`` (a session's first input and last output, an LLM span's request and reply), and
the resource attribute ``openinference.project.name`` (the project). Span links are not shown by
every backend, so a violation also names the span that caused it in attributes.

:func:`span_kind` is applied when a span is emitted (:mod:`tracer.spans.session`);
:func:`enrich_rows` fills in the rest when stored spans are sent out (``prunegate export``), so a
store written before these attributes existed reads the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tracer.contract import names as sn

SPAN_KIND = sn.OI_SPAN_KIND
SESSION_ID = sn.OI_SESSION_ID
INPUT_VALUE = sn.OI_INPUT_VALUE
INPUT_MIME = "input.mime_type"
OUTPUT_VALUE = sn.OI_OUTPUT_VALUE
OUTPUT_MIME = "output.mime_type"
LLM_MODEL = "llm.model_name"
LLM_PROMPT_TOKENS = "llm.token_count.prompt"
LLM_COMPLETION_TOKENS = "llm.token_count.completion"
PROJECT = "openinference.project.name"  # a resource attribute
CAUSE_SPAN = sn.VIOLATION_CAUSE_SPAN_ID
CAUSE_TRACE = sn.VIOLATION_CAUSE_TRACE_ID
CHAIN, LLM, TOOL = "CHAIN", "LLM", "TOOL"


def span_kind(name: str, attributes: Mapping[str, Any]) -> str | None:
    """CHAIN for sessions, decisions and every other ``prunegate.*`` span, LLM for model calls,
    TOOL for tool executions; None for a span that is none of these."""
    op = attributes.get(sn.GEN_AI_OPERATION_NAME)
    if op == "execute_tool" or name.startswith("execute_tool"):
        return TOOL
    if op in ("chat", "text_completion", "generate_content") or name == "chat" or name.startswith("chat "):
        return LLM
    if name.startswith(sn.PREFIX):
        return CHAIN
    return None


def first_user_text(messages: Iterable[tuple[str, str]]) -> str | None:
    """The first user message that has text, from (role, text) pairs in order."""
    return next((text for role, text in messages if role == "user" and text), None)


def last_answer_text(messages: Iterable[tuple[str, str]]) -> str | None:
    """The last assistant message that has text, from (role, text) pairs in order."""
    found = None
    for role, text in messages:
        if role == "assistant" and text:
            found = text
    return found


def _content_text(content: Any) -> str:
    """The text blocks of a ``prunegate.message.content`` JSON (thinking and tool traffic left out)."""
    try:
        blocks = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return ""
    if not isinstance(blocks, list):
        return ""
    return "\n".join(str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text").strip()


def enrich_rows(rows: list[dict[str, Any]], project: str | None = None) -> list[dict[str, Any]]:
    """Span rows with the backends' attributes filled in where missing (new dicts; rows unchanged).

    Per session: the root gets ``input.value``/``output.value`` from its recorded message content
    (first user text, last assistant text; nothing when content was not captured) and
    ``session.id``; every prunegate span gets its kind; chat spans get ``input.value``/
    ``output.value`` from ``gen_ai.input.messages``/``gen_ai.output.messages`` and the model and
    token counts under the ``llm.*`` names; a violation gets the span id of its cause from its link.
    ``project`` sets the resource's ``openinference.project.name``.
    """
    io: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        a = r.get("attributes") or {}
        if r.get("name") == sn.MESSAGE and a.get(sn.EVENT) in ("append", "open"):
            sid = str(a.get(sn.SESSION_ID) or r.get("session_id") or "")
            io.setdefault(sid, []).append((str(a.get(sn.MESSAGE_ROLE) or ""),
                                           _content_text(a.get(sn.MESSAGE_CONTENT))))
    out = []
    for r in rows:
        row = dict(r)
        a = dict(row.get("attributes") or {})
        name = str(row.get("name") or "")
        session = a.get(sn.SESSION_ID) or (row.get("session_id") if name.startswith(sn.PREFIX) else None)
        kind = span_kind(name, a)
        if kind and SPAN_KIND not in a:
            a[SPAN_KIND] = kind
        if name == sn.SESSION:
            if session and SESSION_ID not in a:
                a[SESSION_ID] = session
            pairs = io.get(str(session), [])
            first, last = first_user_text(pairs), last_answer_text(pairs)
            if first and INPUT_VALUE not in a:
                a[INPUT_VALUE] = first
            if last and OUTPUT_VALUE not in a:
                a[OUTPUT_VALUE] = last
        elif kind == LLM and a.get(sn.SESSION_ID):
            _llm(a)
        elif name == sn.VIOLATION and CAUSE_SPAN not in a:
            for link in row.get("links") or []:
                if (link.get("attributes") or {}).get(sn.LINK) == sn.LINK_CAUSED_BY:
                    a[CAUSE_SPAN], a[CAUSE_TRACE] = link.get("span_id"), link.get("trace_id")
        row["attributes"] = {k: v for k, v in a.items() if v is not None}
        if project:
            row["resource"] = {**(row.get("resource") or {}), PROJECT: project}
        out.append(row)
    return out


def _llm(a: dict[str, Any]) -> None:
    for src, dst, mime, flat in ((sn.GEN_AI_INPUT_MESSAGES, INPUT_VALUE, INPUT_MIME, "llm.input_messages"),
                                 (sn.GEN_AI_OUTPUT_MESSAGES, OUTPUT_VALUE, OUTPUT_MIME, "llm.output_messages")):
        if isinstance(a.get(src), str) and dst not in a:
            a[dst], a[mime] = a[src], "application/json"
        if isinstance(a.get(src), str) and not any(k.startswith(flat + ".") for k in a):
            a.update(flat_messages(flat, a[src]))
    for src, dst in ((sn.GEN_AI_REQUEST_MODEL, LLM_MODEL), (sn.GEN_AI_USAGE_INPUT_TOKENS, LLM_PROMPT_TOKENS),
                     (sn.GEN_AI_USAGE_OUTPUT_TOKENS, LLM_COMPLETION_TOKENS)):
        if a.get(src) is not None and dst not in a:
            a[dst] = a[src]


def flat_messages(prefix: str, genai_json: str) -> dict[str, Any]:
    """GenAI-convention messages (JSON) as OpenInference's flattened ``{prefix}.N.message.*``
    attributes (role, text content, tool calls, the id a tool result answers), which Phoenix's LLM
    view reads. Reasoning parts are left out, as OpenInference's own instrumentations do for text."""
    try:
        messages = json.loads(genai_json)
    except json.JSONDecodeError:
        return {}
    out: dict[str, Any] = {}
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(m, dict):
            continue
        at = f"{prefix}.{i}.message"
        parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
        out[f"{at}.role"] = "tool" if parts and all(p.get("type") == "tool_call_response" for p in parts) \
            else str(m.get("role") or "")
        text = "\n".join(str(p.get("content") or "") for p in parts if p.get("type") == "text")
        results = [p for p in parts if p.get("type") == "tool_call_response"]
        if results:
            out[f"{at}.tool_call_id"] = str(results[0].get("id") or "")
            resp = results[0].get("response")
            text = text or (resp if isinstance(resp, str) else json.dumps(resp))
        if text:
            out[f"{at}.content"] = text
        calls = [p for p in parts if p.get("type") == "tool_call"]
        for j, c in enumerate(calls):
            call_at = f"{at}.tool_calls.{j}.tool_call"
            out[f"{call_at}.id"] = str(c.get("id") or "")
            out[f"{call_at}.function.name"] = str(c.get("name") or "")
            args = c.get("arguments")
            out[f"{call_at}.function.arguments"] = args if isinstance(args, str) else json.dumps(args)
    return out
