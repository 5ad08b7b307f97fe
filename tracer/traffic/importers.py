"""Recorded traffic → conversations ready to record as sessions.

Reads the formats ``prunegate import`` accepts and turns each conversation into a
:class:`Conversation` (provider-neutral :class:`~policies.messages.Message` list, ids assigned,
reused tool-call ids made unique). Anything that cannot be read becomes a :class:`Refusal` naming
the file, the line and the reason; the reader yields both in file order so that a caller records
each conversation as soon as it is read and nothing is dropped without being counted.

Formats (detected per file unless forced):

* Anthropic Messages request bodies ``{"id"?, "system"?, "messages"}``, one per JSON file or one
  per JSONL line; OpenAI Chat Completions bodies ``{"id"?, "messages"}`` likewise;
* the τ-bench trajectory file: a JSON list of ``{"task_id", "trial", "traj": [OpenAI messages]}``;
* VCR cassettes (YAML ``interactions[].request.parsed_body``): the last Anthropic/OpenAI request
  of a cassette holds the whole conversation;
* OTLP JSON span files (``{"resourceSpans": ...}``, whole file or one per line): yielded as
  :class:`OtlpFile` for the store's OTLP importer.

Pure: no store, no tracing. ``tracer.cli.import_cmd`` records what this yields.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies import Context, convert
from policies.errors import StructureError
from policies.messages import Block, Message
from tracer.contract import names as sn
from tracer.contract.settings import MAX_FILE_BYTES_ENV
from tracer.store.text import scrub
from tracer.traffic import jsonparse
from tracer.traffic.bounded import FileTooLarge, lines, max_file_bytes, not_regular
from tracer.traffic.collector_files import is_binary_otlp

# searched for in directories; .gz/.zst: a Collector file exporter's compressed (rotated) files
IMPORTED_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".gz", ".zst")

FORMATS = ("auto", "anthropic", "openai", "otlp")
# Keys a JSONL line may carry beside the request body; they describe the session, not the request.
META_KEYS = ("id", "side_effect_tools", "streamed_calls")
RENAME_SEP = "~"


@dataclass(frozen=True)
class Refusal:
    """Input that could not become a session: where (file, line; line is None when not line-based) and why."""

    file: str
    line: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class Renamed:
    """A reused tool-call id given a unique name: ``old`` issued again by message ``message_id``."""

    old: str
    new: str
    message_id: str


@dataclass(frozen=True)
class OtlpFile:
    """An OTLP JSON file: spans, imported as they are by the store's OTLP importer."""

    path: Path


@dataclass
class Conversation:
    """One conversation read from a file, ready to be recorded as a session."""

    name: str
    provider: str  # "anthropic" | "openai"
    messages: list[Message]
    request_extra: dict[str, Any]  # the body's other keys (model, tools, ...)
    file: str
    line: int | None
    format: str  # "anthropic" | "openai" | "tau-bench" | "tau2-bench" | "cassette"
    renamed: list[Renamed] = field(default_factory=list)
    side_effect_tools: tuple[str, ...] | None = None
    streamed_calls: tuple[str, ...] = ()
    session_id: str | None = None  # set once recorded (or when loaded from the store)
    source_key: str | None = None  # what identifies it wherever its file lies (spans: the conversation key)
    source_spans: tuple[str, ...] = ()  # spans: the model-call spans stitched into it (span ids, oldest first)
    text_replaced: int = 0  # code points of its input that were not valid Unicode, replaced by U+FFFD
    summary_counts: tuple[int, int] | None = None  # once recorded: (messages, tool calls); messages dropped

    @property
    def tool_calls(self) -> int:
        return sum(len(m.call_ids) for m in self.messages)

    @property
    def model(self) -> str | None:
        model = self.request_extra.get("model")
        return model if isinstance(model, str) else None


Item = Conversation | Refusal | OtlpFile


class _Refused(Exception):
    """Internal: a conversation is refused; the message is the reason."""


# --------------------------------------------------------------------------------------------- files
def read_paths(paths: Sequence[str | os.PathLike[str]], fmt: str = "auto") -> Iterator[Item]:
    """Everything in ``paths`` (files, or directories searched for :data:`IMPORTED_SUFFIXES` files)."""
    for path in expand_paths(paths):
        yield from read_file(path, fmt)


def expand_paths(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(sorted(q for q in path.rglob("*") if q.is_file() and q.suffix in IMPORTED_SUFFIXES))
        else:
            out.append(path)
    return out


def read_file(path: str | Path, fmt: str = "auto") -> Iterator[Item]:
    """The conversations (or refusals, or an OTLP marker) in one file.

    A line (JSONL) or a file (one JSON value) that is not UTF-8, not JSON, nested deeper than
    :data:`~tracer.traffic.jsonparse.MAX_DEPTH` or larger than the input limit is refused with
    its file, line and reason; the other lines and files are read."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    path = Path(path)
    name = str(path)
    why = not_regular(path)
    if why is not None:
        yield Refusal(name, None, why)
        return
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            size = os.fstat(f.fileno()).st_size
            if is_binary_otlp(head, size):  # an OpenTelemetry Collector file exporter's compressed/framed output
                yield OtlpFile(path)
                return
            if size > max_file_bytes():
                yield Refusal(name, None, f"too large: {size:,} bytes, over the per-file limit of {max_file_bytes():,} "
                              f"(${MAX_FILE_BYTES_ENV})")
                return
            f.seek(0)
            if path.suffix not in (".yaml", ".yml") and _is_jsonl(f):
                f.seek(0)
                yield from _stream_jsonl(path, f, fmt)
                return
            if size > jsonparse.max_bytes():
                yield Refusal(name, 1, f"too large: one JSON value of {size:,} bytes (the limit is "
                              f"{jsonparse.max_bytes():,} bytes, ${jsonparse.MAX_BYTES_ENV})")
                return
            f.seek(0)
            data = f.read()
    except OSError as exc:
        yield Refusal(name, None, f"cannot read: {exc.strerror or exc}")
        return
    try:
        text = data.decode("utf-8")
        bad_utf8 = False
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")  # bad bytes become lone surrogates, refused per line
        bad_utf8 = True
    del data
    if not text.strip():
        yield Refusal(name, None, "empty file")
        return
    with jsonparse.deep_enough():
        if path.suffix in (".yaml", ".yml"):
            if bad_utf8:
                yield Refusal(name, _first_bad_line(text), f"not UTF-8 text ({_bad_byte(text)})")
                return
            yield from _read_cassette(path, text)
            return
        whole: tuple[int, str] | None = None
        if bad_utf8:
            whole = (_first_bad_line(text), f"not UTF-8 text ({_bad_byte(text)})")
        else:
            try:
                value = jsonparse.loads(text)
            except json.JSONDecodeError as exc:
                whole = (exc.lineno, jsonparse.refusal_reason(exc))
            except jsonparse.Unparseable as exc:
                whole = (1, str(exc))
        if whole is not None:
            yield from _read_jsonl(path, text, fmt, whole)
            return
        yield from _read_value(path, text, value, fmt)


_SNIFF_LINE = 16 * 1024 * 1024  # bytes of a first line looked at to tell JSONL from one JSON value


def _is_jsonl(f: Any) -> bool:
    """Whether a file is JSONL to stream: its first non-blank line is a JSON object (or too long to
    look at) and another non-blank line follows (a file of one line keeps the whole-file reading it
    always had). Holds at most one line of :data:`_SNIFF_LINE` bytes."""
    seen_first = False
    for _, line in lines(f, line_limit=_SNIFF_LINE):
        if isinstance(line, bytes) and not line.strip():
            continue
        if seen_first:
            return True
        if isinstance(line, bytes) and not _starts_object(line.decode("utf-8", "replace")):
            return False
        seen_first = True
    return False


def _stream_jsonl(path: Path, f: Any, fmt: str) -> Iterator[Item]:
    """One body per line, read line by line: memory holds one line, whatever the file's size."""
    name = str(path)
    otlp_seen = False
    try:
        with jsonparse.deep_enough():
            for n, raw in lines(f, what=f"{name}: the file"):
                if isinstance(raw, Exception):
                    yield Refusal(name, n, str(raw))
                    continue
                if not raw.strip():
                    continue
                try:
                    line = raw.decode("utf-8").rstrip("\r")
                except UnicodeDecodeError:
                    bad = raw.decode("utf-8", "surrogateescape")
                    yield Refusal(name, n, f"not UTF-8 text ({_bad_byte(bad)})")
                    continue
                del raw
                item = _line_item(path, n, line, fmt)
                if isinstance(item, OtlpFile):
                    if otlp_seen:
                        continue
                    otlp_seen = True
                yield item
    except FileTooLarge as exc:
        yield Refusal(name, None, str(exc))


def _first_bad_line(text: str) -> int:
    for n, line in enumerate(text.split("\n"), 1):
        if _has_surrogate(line):
            return n
    return 1


def _has_surrogate(line: str) -> bool:
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _bad_byte(line: str) -> str:
    for col, ch in enumerate(line.split("\n")[_first_bad_line(line) - 1], 1):
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            return f"invalid byte 0x{ord(ch) - 0xDC00:02x} at column {col}"
    return "invalid bytes"


def _read_value(path: Path, text: str, value: Any, fmt: str) -> Iterator[Item]:
    name = str(path)
    if isinstance(value, dict) and ("resourceSpans" in value or "resourceLogs" in value):
        yield OtlpFile(path)
    elif isinstance(value, dict) and "interactions" in value:
        yield from _cassette_items(path, value)
    elif fmt == "otlp":
        yield Refusal(name, 1, "--format otlp: expected an OTLP JSON object with 'resourceSpans'")
    elif isinstance(value, dict):
        yield _body(name, 1, value, fmt, default_name=path.stem)
    elif isinstance(value, list):
        lines = _item_lines(text)
        for i, item in enumerate(value):
            line = lines[i] if i < len(lines) else None
            if isinstance(item, dict) and "traj" in item:
                yield _tau_item(name, line, i, item)
            elif isinstance(item, dict) and _is_tau2(item):
                yield _tau2_item(name, line, i, item)
            elif isinstance(item, dict):
                yield _body(name, line, item, fmt, default_name=f"{path.stem}-{i}")
            else:
                yield Refusal(name, line, f"item {i}: expected an object (a request body), got {_kind(item)}")
    else:
        yield Refusal(name, 1, f"expected a JSON object (a request body) or a list, got {_kind(value)}")


def _read_jsonl(path: Path, text: str, fmt: str, whole: tuple[int, str]) -> Iterator[Item]:
    """One body per line; ``whole`` is why the file is not one JSON value (line, reason), reported
    when the file is not JSONL either."""
    name = str(path)
    lines = [line.rstrip("\r") for line in text.split("\n")]  # not splitlines(): U+2028 is legal JSON
    first = next(n for n, line in enumerate(lines, 1) if line.strip())
    if not _starts_object(lines[first - 1]):  # not JSONL either: the whole-file error is the useful one
        yield Refusal(name, whole[0], whole[1])
        return
    otlp_seen = False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if _has_surrogate(line):
            yield Refusal(name, n, f"not UTF-8 text ({_bad_byte(line)})")
            continue
        item = _line_item(path, n, line, fmt)
        if isinstance(item, OtlpFile):
            if otlp_seen:
                continue
            otlp_seen = True
        yield item


def _line_item(path: Path, n: int, line: str, fmt: str) -> Item:
    """What line ``n`` of a JSONL file holds: a body's conversation, a refusal, or the file's OTLP
    content (the caller takes the first :class:`OtlpFile` of a file and drops the rest)."""
    name = str(path)
    try:
        value = jsonparse.loads(line)
    except (json.JSONDecodeError, jsonparse.Unparseable) as exc:
        return Refusal(name, n, jsonparse.refusal_reason(exc))
    if isinstance(value, dict) and ("resourceSpans" in value or "resourceLogs" in value):
        return OtlpFile(path)
    if not isinstance(value, dict):
        return Refusal(name, n, f"expected a JSON object (a request body), got {_kind(value)}")
    if fmt == "otlp":
        return Refusal(name, n, "--format otlp: expected an OTLP JSON object with 'resourceSpans'")
    return _body(name, n, value, fmt, default_name=f"{path.stem}:{n}")


def _starts_object(line: str) -> bool:
    """Whether a line looks like a JSONL body: a JSON object (checked without parsing deep input)."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return False
    try:
        return isinstance(jsonparse.loads(stripped), dict)
    except (json.JSONDecodeError, jsonparse.Unparseable, UnicodeError):
        return stripped.endswith("}")


def _item_lines(text: str) -> list[int]:
    """The 1-based line on which each item of a top-level JSON list starts (for error messages)."""
    decoder = json.JSONDecoder()
    lines: list[int] = []
    pos = text.index("[") + 1
    line, counted = 1, 0
    n = len(text)
    while pos < n:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n or text[pos] == "]":
            break
        line += text.count("\n", counted, pos)
        counted = pos
        lines.append(line)
        try:
            _, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
    return lines


# ------------------------------------------------------------------------------------------ bodies
def detect_provider(body: dict[str, Any]) -> str:
    """Anthropic or OpenAI, from the body's shape (a top-level ``system``, block types, roles, model)."""
    if "system" in body:
        return convert.ANTHROPIC
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("tool", "system", "developer", "function") or "tool_calls" in m or "tool_call_id" in m:
            return convert.OPENAI
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                kind = b.get("type") if isinstance(b, dict) else None
                if kind in ("tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
                            "server_tool_use") or (isinstance(kind, str) and kind.endswith("_tool_result")):
                    return convert.ANTHROPIC
                if kind in ("image_url", "input_audio", "file", "refusal"):
                    return convert.OPENAI
    model = str(body.get("model") or "").lower()
    if model.startswith("claude"):
        return convert.ANTHROPIC
    if model.startswith(("gpt", "o1", "o3", "o4", "chatgpt", "deepseek")):
        return convert.OPENAI
    return convert.ANTHROPIC  # plain text both ways: either renders the same conversation


def _body(name: str, line: int | None, value: dict[str, Any], fmt: str, *, default_name: str) -> Conversation | Refusal:
    value, replaced = scrub(value)
    meta = {k: value[k] for k in META_KEYS if k in value}
    body = {k: v for k, v in value.items() if k not in META_KEYS}
    label = meta.get("id")
    try:
        if "messages" not in body:
            raise _Refused("request body without 'messages'")
        provider = fmt if fmt in (convert.ANTHROPIC, convert.OPENAI) else detect_provider(body)
        side, streamed = _meta_lists(meta)
        conv = conversation_from_body(
            body, provider, name=str(label) if label is not None else default_name, file=name, line=line,
            fmt=provider,
        )
        conv.side_effect_tools = side
        conv.streamed_calls = streamed
        conv.text_replaced += replaced
        return conv
    except _Refused as exc:
        return Refusal(name, line, f"{_label(label)}{exc}")


def _meta_lists(meta: dict[str, Any]) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    side = meta.get("side_effect_tools")
    streamed = meta.get("streamed_calls", [])
    for key, val in (("side_effect_tools", side), ("streamed_calls", streamed)):
        if val is not None and not (isinstance(val, list) and all(isinstance(x, str) for x in val)):
            raise _Refused(f"'{key}' must be a list of strings")
    return (tuple(side) if side is not None else None), tuple(streamed)


def _label(label: Any) -> str:
    return "" if label is None else f"body {label!r}: "


def conversation_from_body(
    body: dict[str, Any], provider: str, *, name: str, file: str, line: int | None = None, fmt: str | None = None
) -> Conversation:
    """A request body as a conversation: converted, checked, ids assigned, reused call ids renamed.

    Raises ``_Refused`` (internal) with the reason; public callers use :func:`read_file`. Text that
    is not valid Unicode (lone surrogates) is replaced and counted (``text_replaced``) first.
    """
    body, replaced = scrub(body)
    messages_raw = body.get("messages")
    if not isinstance(messages_raw, list):
        raise _Refused("request body without 'messages' (expected a list)")
    if not messages_raw:
        raise _Refused("request body with an empty 'messages' list")
    try:
        if provider == convert.ANTHROPIC:
            messages, rest = convert.from_anthropic(body)
        else:
            messages, rest = convert.from_openai(body)
    except StructureError as exc:
        raise _Refused(f"not a valid {provider} body: {exc}") from None
    offset = 1 if provider == convert.ANTHROPIC and "system" in body else 0
    for i, m in enumerate(messages):
        m.id = f"t{i}"
    renamed = unique_call_ids(messages, offset)
    _dry_run(messages, provider)
    return Conversation(name=name, provider=provider, messages=messages, request_extra=rest, file=file,
                        line=line, format=fmt or provider, renamed=renamed, text_replaced=replaced)


def unique_call_ids(messages: list[Message], offset: int = 0) -> list[Renamed]:
    """Rename tool-call ids issued again after their first call/result pair completed (``id~2``, ...).

    Refuses (``_Refused``) a message that issues one id twice, an id issued again while its call is
    still pending, a result for a call never issued, and a second result for one call. ``offset``
    maps list positions back to the body's ``messages`` index in reasons (an Anthropic ``system``).
    """
    ids = _CallIds(messages)
    for i, msg in enumerate(messages):
        where = f"messages.{i - offset}" if i >= offset else "system"
        seen: set[str] = set()
        for block in msg.blocks:
            if block.call_id is not None:
                ids.issue(block, block.call_id, msg.id, where, seen)
        results: set[str] = set()
        for block in msg.blocks:
            if block.answers is not None:
                ids.answer(block, block.answers, where, results)
    return ids.renamed


class _CallIds:
    """The tool-call ids of one conversation as it is read: which id as written stands for which call."""

    def __init__(self, messages: list[Message]) -> None:
        self.current: dict[str, str] = {}  # id as written -> id it now stands for
        self.pending: set[str] = set()
        self.answered: set[str] = set()
        self.taken: set[str] = {cid for m in messages for cid in m.call_ids}
        self.uses: dict[str, int] = {}
        self.renamed: list[Renamed] = []

    def issue(self, block: Block, cid: str, message_id: str, where: str, seen: set[str]) -> None:
        """A call: renamed (``id~2``, ...) when its id was issued before and that pair completed."""
        if cid in seen:
            raise _Refused(f"{where}: tool call id '{cid}' appears twice in one message")
        seen.add(cid)
        if self.current.get(cid) in self.pending:
            raise _Refused(f"{where}: tool call id '{cid}' issued again while its first call is pending")
        if cid in self.current:
            new = self._fresh(cid)
            block.id = new
            self.renamed.append(Renamed(cid, new, message_id))
            self.current[cid] = new
        else:
            self.current[cid] = cid
        self.pending.add(self.current[cid])

    def answer(self, block: Block, rid: str, where: str, results: set[str]) -> None:
        """A result: pointed at the call its id stands for now; refused when unknown or answered twice."""
        target = self.current.get(rid)
        if target is None:
            raise _Refused(f"{where}: result for unknown tool call '{rid}'")
        if target in self.answered or rid in results:
            raise _Refused(f"{where}: second result for tool call '{rid}'")
        results.add(rid)
        block.tool_use_id = target
        self.pending.discard(target)
        self.answered.add(target)

    def _fresh(self, cid: str) -> str:
        n = self.uses.get(cid, 1)
        while True:
            n += 1
            new = f"{cid}{RENAME_SEP}{n}"
            if new not in self.taken:
                break
        self.uses[cid] = n
        self.taken.add(new)
        return new


def _dry_run(messages: list[Message], provider: str) -> None:
    """Build the context once so that anything it would refuse is refused before recording starts."""
    ctx = Context(provider=provider)
    try:
        for m in messages:
            ctx.append(m.shallow_copy())
    except StructureError as exc:
        raise _Refused(str(exc)) from None


# --------------------------------------------------------------------------------------- τ-bench
def _tau_item(name: str, line: int | None, index: int, item: dict[str, Any]) -> Conversation | Refusal:
    label = f"task{item.get('task_id')}-trial{item.get('trial')}"
    try:
        traj = item.get("traj")
        if not isinstance(traj, list):
            raise _Refused("'traj' is not a list of messages")
        conv = conversation_from_body({"messages": traj}, convert.OPENAI, name=f"tau-airline-{label}",
                                      file=name, line=line, fmt="tau-bench")
        return conv
    except _Refused as exc:
        return Refusal(name, line, f"item {index} ({label}): {exc}")


def _is_tau2(item: dict[str, Any]) -> bool:
    """A τ²-bench simulation record (its ``messages`` are τ²'s own shape, not a request body)."""
    return isinstance(item.get("messages"), list) and "task_id" in item and "termination_reason" in item


def _tau2_item(name: str, line: int | None, index: int, item: dict[str, Any]) -> Conversation | Refusal:
    """A τ²-bench simulation as the agent's conversation in OpenAI chat form: τ²'s tool calls carry
    ``name`` and ``arguments`` (an object) on the call itself, and its tool messages their call's ``id``."""
    label = f"task{item.get('task_id')}-trial{item.get('trial')}"
    try:
        messages = [_tau2_message(i, m) for i, m in enumerate(item["messages"])]
        models = [m["raw_data"].get("model") for m in item["messages"]
                  if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("raw_data"), dict)]
        body: dict[str, Any] = {"messages": messages}
        if models and isinstance(models[0], str):
            body["model"] = models[0]
        return conversation_from_body(body, convert.OPENAI, name=f"tau2-{label}", file=name, line=line,
                                      fmt="tau2-bench")
    except _Refused as exc:
        return Refusal(name, line, f"item {index} ({label}): {exc}")


def _tau2_message(i: int, m: Any) -> dict[str, Any]:
    if not isinstance(m, dict) or m.get("role") not in ("assistant", "user", "tool", "system"):
        raise _Refused(f"messages.{i}: expected a τ²-bench message with a role")
    content = m.get("content")
    if m["role"] == "tool":
        return {"role": "tool", "tool_call_id": str(m.get("id")), "content": content or ""}
    out: dict[str, Any] = {"role": m["role"], "content": content or None}
    calls = m.get("tool_calls")
    if calls:
        if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
            raise _Refused(f"messages.{i}: 'tool_calls' must be a list of calls")
        out["tool_calls"] = [{"id": str(c.get("id")), "type": "function",
                              "function": {"name": str(c.get("name")), "arguments": json.dumps(c.get("arguments") or {})}}
                             for c in calls]
    elif out["content"] is None:
        out["content"] = ""
    return out


# ------------------------------------------------------------------------------ OTLP GenAI spans
CAPTURE_HINT = ("turn content capture on: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only with "
                "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (official OTel GenAI), "
                "open_telemetry traces content_mode 'content' (Anthropic SDK), TRACELOOP_TRACE_CONTENT=true "
                "(OpenLLMetry), OPENINFERENCE_HIDE_INPUTS/OUTPUTS unset (OpenInference)")


def call_of_row(row: dict[str, Any], file: str, logs: Sequence[dict[str, Any]] = ()) -> Any:
    """One span row read as a model call (a :class:`tracer.traffic.genai_spans.ModelCall`); a
    :class:`Refusal` when its content cannot be decoded; the convention it follows (a string) when it
    is a model call without content; None when it is no model call at all."""
    from tracer.errors import DecodeError
    from tracer.traffic.genai_spans import content_families, decode_call, is_model_call, metadata_family

    a = row.get("attributes") or {}
    if not is_model_call(a) and not content_families(a, logs):
        return None
    try:
        call = decode_call(row, logs)
    except DecodeError as exc:
        return Refusal(file, None, f"span {row.get('span_id')} ({row.get('name')}): {exc}")
    if call is None or not call.input:
        return metadata_family(a)
    return call


def no_content_refusal(file: str, empty: dict[str, int]) -> Refusal:
    """What to say about model-call spans that carried no content (counts by convention)."""
    seen = ", ".join(f"{family} on {n}" for family, n in sorted(empty.items()))
    return Refusal(file, None, f"{sum(empty.values())} model-call spans but no message content captured "
                               f"(attributes seen: {seen}), so no conversation to import; {CAPTURE_HINT}")


def conversations_from_genai_rows(rows: list[dict[str, Any]], file: str,
                                  logs: list[dict[str, Any]] | None = None) -> list[Conversation | Refusal]:
    """Conversations held by another instrumentation's model-call spans (decoded span rows) and
    their GenAI log events (:func:`tracer.traffic.otlp_json.read_otlp_logs`).

    Every common shape is read (:mod:`tracer.traffic.genai_spans`); calls are stitched into one
    conversation per ``gen_ai.conversation.id``/``session.id``/trace/prefix chain, and each
    conversation is the latest call's request plus its reply. Spans that are model calls but
    carry no content give one refusal saying so (and which convention they follow); spans that are
    no model call at all give one refusal naming what was seen.
    """
    from tracer.traffic.genai_spans import stitch

    by_span: dict[str, list[dict[str, Any]]] = {}
    for rec in logs or []:
        if rec.get("span_id"):
            by_span.setdefault(str(rec["span_id"]), []).append(rec)
    out: list[Conversation | Refusal] = []
    calls = []
    empty: dict[str, int] = {}
    foreign = [r for r in rows if not (r.get("attributes") or {}).get(sn.SESSION_ID)]
    for row in foreign:
        call = call_of_row(row, file, by_span.get(str(row.get("span_id")), []))
        if isinstance(call, Refusal):
            out.append(call)
        elif isinstance(call, str):
            empty[call] = empty.get(call, 0) + 1
        elif call is not None:
            calls.append(call)
    if not calls and empty:
        out.append(no_content_refusal(file, empty))
    elif not calls and not out and foreign:
        names = sorted({str(r.get("name")) for r in foreign})
        out.append(Refusal(file, None, f"{len(foreign)} spans but no model call among them "
                                       f"(span names: {', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"))
    for chain in stitch(calls):
        out.append(conversation_of_chain(chain[-1], chain[0].trace_id, [c.span_id for c in chain], file))
    return out


def conversation_of_chain(last: Any, first_trace: str, span_ids: Sequence[str], file: str, *,
                          check: bool = True) -> Conversation | Refusal:
    """The conversation a stitched chain of model calls holds: its latest call's request and reply
    (``last``, a :class:`tracer.traffic.genai_spans.ModelCall`), keyed by its conversation id,
    session id or first trace, so ``serve`` and ``import`` give the same spans the same session.

    ``check=False`` skips building its context once to refuse it early: for a caller that records it
    right away, where recording builds the same context and refuses the same way (``serve``'s
    session process: the early build was about 15% of its time per conversation)."""
    key = last.conversation_id or last.session_id or first_trace
    name = f"{Path(file).stem}:{key}"
    try:
        msgs = [m.shallow_copy() for m in last.messages]  # own blocks (ids are renamed), shared payloads
        for i, m in enumerate(msgs):
            m.id = f"t{i}"
            m.origin = None
        renamed = unique_call_ids(msgs)
        if check:
            _dry_run(msgs, last.provider)
        extra = {"model": last.model} if last.model else {}
        return Conversation(name=name, provider=last.provider, messages=msgs, request_extra=extra, file=file,
                            line=None, format=f"otlp-{last.family}", renamed=renamed, source_key=key,
                            source_spans=tuple(span_ids))
    except _Refused as exc:
        return Refusal(file, None, f"span {last.span_id} ({key}): {exc}")


# ------------------------------------------------------------------------------------- cassettes
def provider_of_uri(uri: str) -> str | None:
    """The provider a recorded HTTP request went to (Anthropic Messages or an OpenAI-style Chat Completions)."""
    base = uri.split("?", 1)[0].rstrip("/")
    if base.endswith("/v1/messages") and "anthropic" in base:
        return convert.ANTHROPIC
    if base.endswith("/chat/completions"):
        return convert.OPENAI
    return None


def _read_cassette(path: Path, text: str) -> Iterator[Item]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        yield Refusal(str(path), line, f"malformed YAML: {getattr(exc, 'problem', None) or exc}")
        return
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        yield Refusal(str(path), None, "not a VCR cassette (no 'interactions' list)")
        return
    yield from _cassette_items(path, data)


def _cassette_items(path: Path, data: dict[str, Any]) -> Iterator[Item]:
    name = str(path)
    last: tuple[int, str, dict[str, Any]] | None = None
    for i, interaction in enumerate(data.get("interactions") or []):
        request = interaction.get("request") if isinstance(interaction, dict) else None
        if not isinstance(request, dict):
            continue
        provider = provider_of_uri(str(request.get("uri", "")))
        body = request.get("parsed_body")
        if body is None and isinstance(request.get("body"), str):
            try:
                body = json.loads(request["body"])
            except json.JSONDecodeError:
                body = None
        if provider and isinstance(body, dict) and isinstance(body.get("messages"), list) and body["messages"]:
            last = (i, provider, body)
    if last is None:
        yield Refusal(name, None, "cassette holds no Anthropic Messages or Chat Completions request with messages")
        return
    i, provider, body = last
    try:
        yield conversation_from_body(body, provider, name=path.stem, file=name, line=None, fmt="cassette")
    except _Refused as exc:
        yield Refusal(name, None, f"interaction {i}: {exc}")


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return {str: "string", bool: "boolean", int: "number", float: "number", dict: "object"}.get(type(value), type(value).__name__)


def shipped_sessions_dir() -> Path | None:
    """``data/sessions`` of a source checkout (the demo's recorded sessions), when present."""
    here = Path(__file__).resolve().parents[2] / "data" / "sessions"
    return here if here.is_dir() else None
