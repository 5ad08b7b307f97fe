"""Conversations ⇄ the trace store: record an imported conversation as a session, read sessions back.

Recording (``prunegate import``): a root ``prunegate.session`` span (source ``import``), one
``prunegate.message`` append span per message (structure always, content when captured; import
captures content by default since the files are the user's own), ``prunegate.unit.close`` spans,
and a ``chat`` span for every model invocation (before each assistant message but an opening one, and a last one when
the conversation ends on a request), whose request is validated for the session's provider.

Reading back (``prunegate replay``/``compare``): the trace **is** the recording, so a session's
message spans are enough to rebuild its conversation. With content captured the messages come
back as they were; without, each message is rebuilt from its structure (role, tool calls and the
ids it answers, tool names, token count) with filler text of the same size.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policies import Context
from policies import messages as kinds
from policies.messages import (
    Block,
    Message,
)
from policies.tokens import DEFAULT_COUNTER
from policies.validate import unrecorded
from tracer.contract import names as sn
from tracer.store import Store, lookups
from tracer.store.claims import ClaimState
from tracer.traffic.importers import (
    Conversation,
    OtlpFile,
    Refusal,
    conversations_from_genai_rows,
    read_paths,
)

SOURCE_SESSIONS = ("import", "live", "shadow", "synthetic")  # what replay reads unless told otherwise
ARRIVALS = ("append", "open")


# ------------------------------------------------------------------------------------ providers
def store_tracer_provider(store: Store | str | os.PathLike[str], *, auto_compact: bool = True) -> Any:
    """A tracer provider whose spans go into ``store`` (and to OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT``
    is set), built by :func:`tracer.spans.setup.setup_tracing`; the global provider is left alone.

    Flush or shut it down when done (:func:`close_provider`).
    """
    from tracer.spans.setup import setup_tracing

    return setup_tracing(store if isinstance(store, Store) else Store(store), auto_compact=auto_compact).provider


def close_provider(provider: Any) -> None:
    """Flush every span into the store and stop the provider's threads."""
    provider.force_flush()
    provider.shutdown()


# ------------------------------------------------------------------------------------ recording
def session_id_for(conv: Conversation) -> str:
    """A stable id for an imported conversation: importing the same file twice finds it already there."""
    h = hashlib.sha256()
    if conv.source_key is not None:  # spans: the same conversation from another copy of the file is the same
        h.update(f"{conv.format}\0{conv.source_key}\0".encode())
    else:
        h.update(f"{conv.format}\0{conv.name}\0{conv.line}\0".encode())
    for m in conv.messages:
        h.update(m.id.encode())
        h.update(m.role.encode())
        h.update(m.plain_text().encode("utf-8", "replace"))
    return "imp-" + h.hexdigest()[:20]


def record_conversation(conv: Conversation, tracer_provider: Any, *, session_id: str | None = None,
                        capture_content: bool = True, detail: str = "full") -> str:
    """Record one conversation as an ``import`` session at ``detail`` (docs/spans.md); returns its id."""
    from tracer.spans.observer import SpanObserver
    from tracer.spans.redact import genai_messages_json
    from tracer.spans.session import SessionConfig, TracedSession

    sid = session_id or session_id_for(conv)
    attrs: dict[str, Any] = {
        sn.GEN_AI_REQUEST_MODEL: conv.model,
        sn.SESSION_FORMAT: conv.format,
        sn.SESSION_FILE: conv.file,
        sn.SESSION_LINE: conv.line,
        sn.SESSION_MESSAGES: len(conv.messages),
        sn.SESSION_TOOL_CALLS: conv.tool_calls,
        sn.SESSION_RENAMED_IDS: [f"{r.old}->{r.new}" for r in conv.renamed] or None,
        sn.SESSION_SIDE_EFFECT_TOOLS: list(conv.side_effect_tools) if conv.side_effect_tools is not None else None,
        sn.SESSION_STREAMED_CALLS: list(conv.streamed_calls) or None,
        sn.TEXT_REPLACED: conv.text_replaced or None,
    }
    if capture_content and conv.request_extra:
        attrs[sn.SESSION_REQUEST] = json.dumps(conv.request_extra, ensure_ascii=False)
    session = TracedSession(tracer_provider, SessionConfig(
        session_id=sid, source="import", name=conv.name, provider=conv.provider,
        gated=None,  # no gate and no naive runtime: not applicable
        capture_content=capture_content, attributes=attrs, detail=detail,
    ))
    ctx = Context(observer=SpanObserver(session), provider=conv.provider, request_extra=dict(conv.request_extra),
                  session_id=sid)
    lost = unrecorded(conv.messages)  # e.g. thinking signatures the instrumentation did not record
    try:
        for msg in conv.messages:
            if msg.role == "assistant" and len(ctx):  # an opening greeting had no request before it
                _chat(session, ctx, conv, msg, genai_messages_json, lost)
            ctx.append(msg.shallow_copy())
        if conv.messages and conv.messages[-1].role != "assistant":
            _chat(session, ctx, conv, None, genai_messages_json, lost)
    finally:
        session.end()
    return sid


def _chat(session: Any, ctx: Context, conv: Conversation, reply: Message | None, render_json: Any,
          lost: frozenset[str]) -> None:
    """A ``chat`` span for the request the context holds now, and the reply it got (if recorded)."""
    chat = session.chat(conv.model, provider=conv.provider, seq=ctx.seq, attributes={
        sn.REQUEST_TOKENS: ctx.tokens,
        sn.REQUEST_MESSAGE_IDS: [m.id for m in ctx.iter_messages()],
        sn.REQUEST_VALID: True,
        sn.GEN_AI_USAGE_INPUT_TOKENS: ctx.tokens,
    })
    chat.set_input(list(ctx.iter_messages()))  # gen_ai.input.messages, when content is captured
    found = session.check_request(ctx.render(conv.provider), conv.provider, seq=ctx.seq, unrecorded=lost)
    if found:
        chat.set_invalid(found)
    if reply is not None:
        chat.span.set_attribute(sn.GEN_AI_USAGE_OUTPUT_TOKENS, ctx.counter.count(reply))
        if reply.call_ids:
            chat.span.set_attribute(sn.RESPONSE_CALL_IDS, reply.call_ids)
        text = session.content(render_json, [reply])
        if text is not None:
            chat.span.set_attribute(sn.GEN_AI_OUTPUT_MESSAGES, text)
    chat.end()


@dataclass
class ImportReport:
    """What ``prunegate import`` did: counts read back from the store, refusals (file, line,
    reason), renamed ids, and whatever did not reach the store (spooled, lost, still busy)."""

    sessions: int = 0  # sessions this run committed, verified by reading the store back
    spans: int = 0  # their spans, read back
    messages: int = 0
    tool_calls: int = 0
    refused: list[Refusal] = field(default_factory=list)
    renamed: list[dict[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already in the store (or committed by another process)
    otlp_files: int = 0
    otlp_spans: int = 0
    session_ids: list[str] = field(default_factory=list)
    spooled_sessions: int = 0
    spooled_spans: int = 0
    spool_dir: str | None = None
    lost_sessions: int = 0
    lost_spans: int = 0
    busy: list[str] = field(default_factory=list)  # held by another live process until the end
    unverified: list[str] = field(default_factory=list)  # written, but the read-back disagrees
    store_error: str | None = None
    spool_error: str | None = None
    otlp_sessions: dict[str, tuple[int, int, int]] = field(default_factory=dict, repr=False)  # spans, msgs, calls

    @property
    def complete(self) -> bool:
        """Whether everything read (and not refused) is in the store."""
        return not (self.spooled_spans or self.lost_spans or self.busy or self.unverified or self.store_error)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "spans": self.spans,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "refused": [r.to_dict() for r in self.refused],
            "renamed_ids": len(self.renamed),
            "renamed": self.renamed,
            "skipped": len(self.skipped),
            "otlp_files": self.otlp_files,
            "otlp_spans": self.otlp_spans,
            "session_ids": self.session_ids,
            "spooled_sessions": self.spooled_sessions,
            "spooled_spans": self.spooled_spans,
            "spool_dir": self.spool_dir,
            "lost_sessions": self.lost_sessions,
            "lost_spans": self.lost_spans,
            "busy": self.busy,
            "unverified": self.unverified,
            "store_error": self.store_error,
            "spool_error": self.spool_error,
            "complete": self.complete,
        }


def import_paths(paths: Iterable[str | os.PathLike[str]], store: Store | str | os.PathLike[str] | None = None, *,
                 fmt: str = "auto", capture_content: bool = True, batch_spans: int = 2048,
                 wait_busy: float = 60.0, detail: str = "full") -> ImportReport:
    """Read ``paths`` and commit every conversation into ``store``, each session exactly once.

    A conversation already in the store (same stable id), or committed meanwhile by another
    process, is skipped. Refusals are collected, never raised. Sessions the store refuses go to
    the spool (counted in the report). The counts of stored sessions and spans are read back
    from the store (see :mod:`tracer.traffic.committer`). ``detail`` is how much each recorded
    conversation keeps (docs/spans.md "Detail levels"); OTLP files go in as they are.
    """
    from tracer.spans.session import check_detail
    from tracer.traffic.jsonparse import deep_enough

    check_detail(detail)
    with deep_enough():  # recorded content may nest a few thousand levels (parsing, encoding, counting)
        return _import_paths(paths, store, fmt, capture_content, batch_spans, wait_busy, detail)


def _import_paths(paths: Iterable[str | os.PathLike[str]], store: Store | str | os.PathLike[str] | None, fmt: str,
                  capture_content: bool, batch_spans: int, wait_busy: float, detail: str) -> ImportReport:
    from tracer.traffic.committer import SessionCommitter

    store = store if isinstance(store, Store) else Store(store)
    report = ImportReport()
    existing = _existing_ids(store)
    committer = SessionCommitter(store, batch_spans=batch_spans, wait_busy=wait_busy)
    convs: dict[str, Conversation] = {}
    otlp: list[tuple[OtlpFile, list[dict[str, Any]]]] = []
    logs: list[dict[str, Any]] = []
    for item in read_paths([Path(p) for p in paths], fmt):
        if isinstance(item, Refusal):
            report.refused.append(item)
        elif isinstance(item, OtlpFile):
            read = _import_otlp(store, item, report, existing)
            if read is not None:
                otlp.append((item, read[0]))
                logs.extend(read[1])
        else:
            _record(item, existing, committer, convs, capture_content, detail)
    # another instrumentation's model calls: decoded once every file is read, so that GenAI log
    # events written to a file of their own find their spans
    for item, rows in otlp:
        for conv in conversations_from_genai_rows(rows, str(item.path), logs):
            if isinstance(conv, Refusal):
                report.refused.append(conv)
            else:
                _record(conv, existing, committer, convs, capture_content, detail)
    result = committer.finish()
    for sid, reason in result.failed.items():
        conv = convs[sid]
        report.refused.append(Refusal(conv.file, conv.line, f"{conv.name}: could not be recorded: {reason}"))
    report.skipped.extend(result.already)
    report.busy = result.busy
    report.spooled_sessions, report.spooled_spans = len(result.spooled), sum(result.spooled.values())
    report.lost_sessions, report.lost_spans = len(result.lost), sum(result.lost.values())
    report.spool_dir = result.spool_dir
    report.store_error = report.store_error or result.store_error
    report.spool_error = result.spool_error
    _verify(store, result.stored, convs, report)
    return report


def _verify(store: Store, written: dict[str, int], convs: dict[str, Conversation], report: ImportReport) -> None:
    """Count what this run wrote by reading the store back: only what is there is reported as imported."""
    if not written and not report.otlp_sessions:
        return
    with store.reader() as r:
        found = lookups.span_counts(r, [*written, *report.otlp_sessions])
    for sid, (n, messages, tool_calls) in report.otlp_sessions.items():  # sessions an OTLP file held whole
        if found.get(sid) != n:
            report.unverified.append(sid)
            continue
        report.session_ids.append(sid)
        report.sessions += 1
        report.spans += n
        report.messages += messages
        report.tool_calls += tool_calls
    for sid, n in written.items():
        if found.get(sid) != n:
            report.unverified.append(sid)
            continue
        conv = convs[sid]
        report.session_ids.append(sid)
        report.sessions += 1
        report.spans += n
        messages, tool_calls = conv.summary_counts or (len(conv.messages), conv.tool_calls)
        report.messages += messages
        report.tool_calls += tool_calls
        report.renamed.extend({"session": conv.name, "message": r.message_id, "old": r.old, "new": r.new}
                              for r in conv.renamed)


def _import_otlp(store: Store, item: OtlpFile, report: ImportReport,
                 existing: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """An OTLP JSON file: its spans go in as they are (all or nothing). prunegate's own sessions are
    then sessions already; returns the other spans and the file's log records (GenAI events) for
    :func:`conversations_from_genai_rows`, or None when the file was refused."""
    from tracer.errors import OtlpJsonError
    from tracer.traffic.otlp_json import import_otlp_json, read_otlp_json, read_otlp_logs

    try:
        rows = list(read_otlp_json(item.path))
        logs = list(read_otlp_logs(item.path))
        result = import_otlp_json(store, item.path)
    except OtlpJsonError as exc:
        report.refused.append(Refusal(str(item.path), exc.line or None, str(exc).split(": ", 1)[-1]))
        return None
    except OSError as exc:
        report.store_error = f"{item.path}: {exc.strerror or exc}"
        return None
    report.otlp_files += 1
    report.otlp_spans += result.imported
    own = {r["session_id"] for r in rows if r["name"] == sn.SESSION and r.get("session_id")}
    for sid in sorted(own - existing):
        mine = [a for a in _message_events(r for r in rows if r["session_id"] == sid)
                if a.get(sn.EVENT) in ARRIVALS and not a.get(sn.MESSAGE_SUMMARY_OF)]
        report.otlp_sessions[sid] = (sum(1 for r in rows if r["session_id"] == sid), len(mine),
                                     sum(len(a.get(sn.MESSAGE_CALL_IDS) or []) for a in mine))
    existing |= own
    foreign = [r for r in rows if not (r.get("attributes") or {}).get(sn.SESSION_ID)
               and not str(r.get("name") or "").startswith(sn.PREFIX)]  # e.g. the pipeline's stats span
    return foreign, logs


def _message_events(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The attributes of every message event of ``rows``: message spans (``full``) and, below full
    detail, the message span events that check and ``prunegate.messages`` spans carry (docs/spans.md)."""
    for r in rows:
        if r["name"] == sn.MESSAGE:
            yield r["attributes"]
        for e in r.get("events") or ():
            if e["name"] == sn.MESSAGE:
                yield e["attributes"]


def _record(conv: Conversation, existing: set[str], committer: Any, convs: dict[str, Conversation],
            capture_content: bool, detail: str) -> None:
    sid = session_id_for(conv)
    if sid in existing or sid in convs:  # in the store already, or twice in this input
        committer.report.already.append(sid)
        return
    convs[sid] = conv
    state = committer.add(sid, lambda provider: record_conversation(conv, provider, session_id=sid,
                                                                    capture_content=capture_content,
                                                                    detail=detail))
    if state is not ClaimState.BUSY:  # recorded: keep what the report needs, not the messages (memory
        convs[sid] = _summary(conv)   # stays flat however large the input)


def _summary(conv: Conversation) -> Conversation:
    """``conv`` without its messages, with their count and tool calls kept for the report."""
    done = replace(conv, messages=[], request_extra={})
    done.summary_counts = (len(conv.messages), conv.tool_calls)
    return done


def _existing_ids(store: Store) -> set[str]:
    if not store.path.exists():
        return set()
    with store.reader() as r:
        return lookups.root_session_ids(r)


# ------------------------------------------------------------------------------------- reading
def load_conversations(store: Store | str | os.PathLike[str] | None = None, session_ids: Iterable[str] | None = None,
                       *, sources: Iterable[str] = SOURCE_SESSIONS) -> list[Conversation]:
    """Rebuild recorded sessions as conversations, oldest first.

    ``session_ids`` selects sessions by id (any source) or by name (sources in ``sources`` only: a
    replay carries its source's name); otherwise every session whose source is in ``sources``
    (replays are left out: they are derived data). :func:`select_sessions` and
    :func:`iter_conversations` do the same a batch of sessions at a time.
    """
    store = store if isinstance(store, Store) else Store(store)
    return list(iter_conversations(store, select_sessions(store, session_ids, sources=sources)))


def select_sessions(store: Store | str | os.PathLike[str] | None = None, session_ids: Iterable[str] | None = None,
                    *, sources: Iterable[str] = SOURCE_SESSIONS) -> dict[str, dict[str, Any]]:
    """The sessions :func:`load_conversations` would rebuild: session id -> root attributes, oldest first."""
    from tracer.traffic.jsonparse import deep_enough

    store = store if isinstance(store, Store) else Store(store)
    if not store.path.exists():
        return {}
    with store.reader() as r:
        roots = lookups.session_roots(r)
    with deep_enough():
        return _pick(roots, session_ids, sources)


def _pick(roots: Iterable[dict[str, Any]], session_ids: Iterable[str] | None,
          sources: Iterable[str]) -> dict[str, dict[str, Any]]:
    wanted = set(session_ids) if session_ids is not None else None
    allowed = set(sources)
    picked: dict[str, dict[str, Any]] = {}
    for row in roots:
        attrs = _json(row["attributes"])
        sid = row["session_id"]
        if sid in picked:
            continue
        source_ok = attrs.get(sn.SESSION_SOURCE) in allowed
        if wanted is not None:
            if sid in wanted or (source_ok and attrs.get(sn.SESSION_NAME) in wanted):
                picked[sid] = attrs
        elif source_ok:
            picked[sid] = attrs
    return picked


class StoredSessions:
    """Selected sessions of a store, rebuilt as conversations a batch at a time each time it is iterated."""

    def __init__(self, store: Store, picked: dict[str, dict[str, Any]]) -> None:
        self.store, self.picked = store, picked

    def __len__(self) -> int:
        return len(self.picked)

    def __iter__(self) -> Iterator[Conversation]:
        return iter_conversations(self.store, self.picked)

    def names(self) -> set[str]:
        """Every session id and session name selected."""
        return set(self.picked) | {str(a.get(sn.SESSION_NAME)) for a in self.picked.values()}


def iter_conversations(store: Store | str | os.PathLike[str] | None, picked: dict[str, dict[str, Any]], *,
                       batch: int = 256) -> Iterator[Conversation]:
    """The conversations of ``picked`` (from :func:`select_sessions`), in its order, reading ``batch``
    sessions' messages per query: a replay over many sessions holds one batch, not the store."""
    from tracer.traffic.jsonparse import deep_enough

    store = store if isinstance(store, Store) else Store(store)
    ids = list(picked)
    for start in range(0, len(ids), batch):
        part = ids[start:start + batch]
        with store.reader() as r:
            rows = lookups.message_rows(r, part)
        with deep_enough():
            events: dict[str, list[dict[str, Any]]] = {sid: [] for sid in part}
            for row in rows:
                events[row["session_id"]].append(_json(row["attributes"]))
            del rows
            convs = [conversation_from_spans(sid, picked[sid], events.pop(sid)) for sid in part]
        yield from convs


def conversation_from_spans(session_id: str, root: dict[str, Any], message_events: list[dict[str, Any]]) -> Conversation:
    """The conversation a session's ``prunegate.message`` spans describe (arrivals in seq order)."""
    messages: dict[str, Message] = {}
    streamed: list[str] = []
    for a in message_events:
        event = a.get(sn.EVENT)
        mid = a.get(sn.MESSAGE_ID)
        if not mid:
            continue
        if event in ARRIVALS and mid not in messages and not a.get(sn.MESSAGE_SUMMARY_OF):
            msg = _message(mid, a)
            messages[mid] = msg
            if event == "open":
                streamed.extend(msg.answered_ids)
        elif event == "delta" and mid in messages and isinstance(a.get(sn.DELTA_TEXT), str):
            _extend(messages[mid], a[sn.DELTA_TEXT])
        elif event == "close" and mid in messages:
            messages[mid].closed = True
    for m in messages.values():
        m.closed = True
    extra: dict[str, Any] = {}
    if isinstance(root.get(sn.SESSION_REQUEST), str):
        try:
            extra = json.loads(root[sn.SESSION_REQUEST])
        except json.JSONDecodeError:
            extra = {}
    if root.get(sn.GEN_AI_REQUEST_MODEL) and "model" not in extra:
        extra["model"] = root[sn.GEN_AI_REQUEST_MODEL]
    side = root.get(sn.SESSION_SIDE_EFFECT_TOOLS)
    recorded_streams = root.get(sn.SESSION_STREAMED_CALLS) or []
    return Conversation(
        name=str(root.get(sn.SESSION_NAME) or session_id),
        provider=str(root.get(sn.PROVIDER) or "anthropic"),
        messages=list(messages.values()),
        request_extra=extra,
        file=str(root.get(sn.SESSION_FILE) or ""),
        line=root.get(sn.SESSION_LINE),
        format=str(root.get(sn.SESSION_FORMAT) or root.get(sn.SESSION_SOURCE) or "store"),
        side_effect_tools=tuple(side) if isinstance(side, list) else None,
        streamed_calls=tuple(dict.fromkeys([*recorded_streams, *streamed])),
        session_id=session_id,
    )


def _message(mid: str, a: dict[str, Any]) -> Message:
    role = str(a.get(sn.MESSAGE_ROLE) or "user")
    content = a.get(sn.MESSAGE_CONTENT)
    if isinstance(content, str):
        try:
            blocks = [_block(d) for d in json.loads(content)]
            return Message(id=mid, role=role, blocks=blocks, form="list")
        except (json.JSONDecodeError, TypeError, ValueError):
            pass
    return _from_structure(mid, role, a)


def _block(d: dict[str, Any]) -> Block:
    d = dict(d)
    kind = d.pop("type")
    extra = {"data": d.pop("data")} if kind == kinds.REDACTED_THINKING and "data" in d else {}
    if kind == kinds.THINKING and d.get("signature"):
        extra["signature"] = d.pop("signature")
    if kind == kinds.OTHER and isinstance(d.get("extra"), dict) and d["extra"].get("type") == kinds.COMPACTION:
        extra = dict(d["extra"])  # a compaction block (block_dict keeps it whole)
    allowed = {k: d[k] for k in ("text", "id", "name", "input", "tool_use_id", "content", "is_error") if k in d}
    return Block(kind, extra=extra, **allowed)


def _from_structure(mid: str, role: str, a: dict[str, Any]) -> Message:
    """A stand-in message with the recorded structure and about the recorded token count."""
    calls = list(a.get(sn.MESSAGE_CALL_IDS) or [])
    names = list(a.get(sn.MESSAGE_TOOL_NAMES) or [])
    answers = list(a.get(sn.MESSAGE_ANSWERS) or [])
    blocks: list[Block] = []
    for i, cid in enumerate(calls):
        blocks.append(Block(kinds.TOOL_USE, id=cid, name=names[i] if i < len(names) else "tool", input={}))
    for cid in answers:
        blocks.append(Block(kinds.TOOL_RESULT, tool_use_id=cid, content=""))
    if not blocks or (role == "assistant" and not answers):
        blocks.insert(0, Block(kinds.TEXT, text=""))
    msg = Message(id=mid, role=role, blocks=blocks, form="list")
    deficit = int(a.get(sn.MESSAGE_TOKENS) or 0) - DEFAULT_COUNTER.count(msg)
    if deficit > 0:
        filler = ("lorem " * deficit)[: 4 * deficit]
        target = next(b for b in blocks if b.type in (kinds.TEXT, kinds.TOOL_RESULT))
        if target.type == kinds.TEXT:
            target.text = filler
        else:
            target.content = filler
    return msg


def _extend(msg: Message, text: str) -> None:
    if not msg.blocks:
        msg.blocks.append(Block(kinds.TEXT, text=""))
    b = msg.blocks[-1]
    if b.type == kinds.TOOL_RESULT and (b.content is None or isinstance(b.content, str)):
        b.content = (b.content or "") + text
    elif b.type == kinds.TEXT:
        b.text = (b.text or "") + text


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            out = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}
