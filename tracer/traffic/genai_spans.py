"""Model calls recorded by another instrumentation → the messages each call sent and received.

Every common shape of a GenAI model-call span is read into one :class:`ModelCall` (the request's
messages, the reply, the keys that tie calls of one conversation together). Shapes, by the
attribute family that carries the content (:data:`FAMILIES`):

* ``genai`` — OpenTelemetry GenAI semantic conventions, current: ``gen_ai.input.messages``,
  ``gen_ai.output.messages``, ``gen_ai.system_instructions`` as JSON strings or structured values,
  on the span (official ``opentelemetry-instrumentation-openai-v2`` with ``span_only``, OpenLLMetry
  0.5x+, the Anthropic SDK's own spans) or on a ``gen_ai.client.inference.operation.details`` log
  event (``event_only``);
* ``genai-events`` — the older conventions' per-message log events (``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
  ``gen_ai.choice``), as log records or span events;
* ``openinference`` — ``input.value``/``output.value`` (the request and response bodies, when JSON)
  and ``llm.input_messages.N.*``/``llm.output_messages.N.*``;
* ``openllmetry`` — ``gen_ai.prompt.N.*``/``gen_ai.completion.N.*`` (OpenLLMetry before it moved to
  the current conventions).

Reasoning (``reasoning`` parts, OpenInference ``reasoning`` contents, Anthropic ``thinking``
blocks) becomes a thinking block. :func:`content_families` says which families a span shows even
when it carries no content, so that an import that finds nothing can say why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from policies import convert
from policies.errors import StructureError
from policies.messages import COMPACTION, OTHER, TEXT, THINKING, TOOL_RESULT, TOOL_USE, Block, Message
from tracer.contract import names as sn
from tracer.errors import DecodeError

FAMILIES = ("genai", "genai-events", "openinference", "openllmetry")
ROLES = ("system", "developer", "user", "assistant", "tool")
DETAILS_EVENT = sn.GEN_AI_DETAILS_EVENT
REDACTED = "__REDACTED__"  # what OpenInference writes in place of hidden inputs and outputs
OLD_EVENTS = {sn.GEN_AI_SYSTEM_MESSAGE_EVENT: "system", sn.GEN_AI_USER_MESSAGE_EVENT: "user",
              sn.GEN_AI_ASSISTANT_MESSAGE_EVENT: "assistant", sn.GEN_AI_TOOL_MESSAGE_EVENT: "tool",
              sn.GEN_AI_CHOICE_EVENT: "assistant"}
_INDEXED = re.compile(r"^(llm\.(?:input|output)_messages|gen_ai\.(?:prompt|completion))\.(\d+)\.(.+)$")


@dataclass
class ModelCall:
    """One model call: what it sent (``system`` + ``input``) and what came back (``output``)."""

    span_id: str
    trace_id: str
    start_ns: int
    family: str
    provider: str
    model: str | None
    input: list[Message]
    output: list[Message] = field(default_factory=list)
    conversation_id: str | None = None
    session_id: str | None = None

    @property
    def messages(self) -> list[Message]:
        """The conversation as of this call's reply: its request, then the first reply message."""
        return [*self.input, *self.output[:1]]


# ------------------------------------------------------------------------------------- detection
def is_model_call(attrs: Mapping[str, Any]) -> bool:
    """A chat/completion span of some instrumentation (with or without content)."""
    op = attrs.get(sn.GEN_AI_OPERATION_NAME) or attrs.get("llm.request.type")
    return (op in ("chat", "text_completion", "completion", "generate_content")
            or attrs.get("openinference.span.kind") == "LLM")


def content_families(attrs: Mapping[str, Any], events: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """The content-carrying attribute families present on a span (and its events/log records)."""
    found = []
    names = {e.get("name") or e.get("event_name") for e in events}
    if any(k in attrs for k in (sn.GEN_AI_INPUT_MESSAGES, sn.GEN_AI_OUTPUT_MESSAGES)) or DETAILS_EVENT in names and any(
            sn.GEN_AI_INPUT_MESSAGES in (e.get("attributes") or {}) for e in events):
        found.append("genai")
    if names & set(OLD_EVENTS):
        found.append("genai-events")
    if attrs.get("input.value") not in (None, REDACTED) or any(k.startswith("llm.input_messages.") for k in attrs):
        found.append("openinference")
    if any(k.startswith((f"{sn.GEN_AI_PROMPT}.", f"{sn.GEN_AI_COMPLETION}.")) for k in attrs):
        found.append("openllmetry")
    return found


def metadata_family(attrs: Mapping[str, Any]) -> str:
    """Which convention a model-call span follows, judged from its metadata (for refusals)."""
    if attrs.get("openinference.span.kind") or any(k.startswith("llm.") for k in attrs):
        return "OpenInference (llm.*)"
    if any(k.startswith(sn.GEN_AI_PREFIX) for k in attrs):
        return "OpenTelemetry GenAI (gen_ai.*)"
    return "unknown"


# ------------------------------------------------------------------------------------- decoding
def decode_call(row: Mapping[str, Any], logs: Iterable[Mapping[str, Any]] = ()) -> ModelCall | None:
    """The model call a span records, or None when it records no content (raises :class:`DecodeError`).

    ``logs``: log records (``{"event_name", "attributes", "body"}``) emitted under this span.
    """
    a = row.get("attributes") or {}
    events = [*({"event_name": e.get("name"), "attributes": e.get("attributes") or {}, "body": None}
                for e in row.get("events") or []), *logs]
    provider = provider_of(a)
    call = ModelCall(span_id=str(row.get("span_id")), trace_id=str(row.get("trace_id")),
                     start_ns=int(row.get("start_time_ns") or 0), family="", provider=provider,
                     model=_str(a.get(sn.GEN_AI_REQUEST_MODEL) or a.get("llm.request.model_name")
                                or a.get("llm.model_name") or a.get(sn.GEN_AI_RESPONSE_MODEL)),
                     input=[], conversation_id=_str(a.get(sn.GEN_AI_CONVERSATION_ID)),
                     session_id=_str(a.get("session.id")))
    details = next((e["attributes"] for e in events if e.get("event_name") == DETAILS_EVENT
                    and sn.GEN_AI_INPUT_MESSAGES in (e.get("attributes") or {})), None)
    source = a if sn.GEN_AI_INPUT_MESSAGES in a else details
    if source is not None:
        call.family = "genai"
        call.input = _genai_list(source.get(sn.GEN_AI_SYSTEM_INSTRUCTIONS), sn.GEN_AI_SYSTEM_INSTRUCTIONS, system=True)
        call.input += _genai_list(source[sn.GEN_AI_INPUT_MESSAGES], sn.GEN_AI_INPUT_MESSAGES)
        if source.get(sn.GEN_AI_OUTPUT_MESSAGES) is not None:
            call.output = _genai_list(source[sn.GEN_AI_OUTPUT_MESSAGES], sn.GEN_AI_OUTPUT_MESSAGES)
    elif any(e.get("event_name") in OLD_EVENTS for e in events):
        call.family = "genai-events"
        call.input, call.output = _old_events(events)
    elif a.get("input.value") not in (None, REDACTED) or any(k.startswith("llm.input_messages.") for k in a):
        call.family = "openinference"
        call.input, call.output = _openinference(a, provider)
    elif any(k.startswith(f"{sn.GEN_AI_PROMPT}.") for k in a):
        call.family = "openllmetry"
        call.input = _indexed_messages(a, sn.GEN_AI_PROMPT)
        call.output = _indexed_messages(a, sn.GEN_AI_COMPLETION)
    else:
        return None
    call.input = shape_for(provider, call.input)
    call.output = shape_for(provider, call.output)
    return call


def provider_of(a: Mapping[str, Any]) -> str:
    """``anthropic`` or ``openai`` from the provider/system attributes (else the model name)."""
    name = " ".join(str(a.get(k) or "") for k in (
        sn.GEN_AI_PROVIDER_NAME, sn.GEN_AI_SYSTEM, "llm.provider", "llm.system")).lower()
    model = str(a.get(sn.GEN_AI_REQUEST_MODEL) or a.get("llm.model_name") or a.get("llm.request.model_name") or "")
    return convert.ANTHROPIC if "anthropic" in name or model.lower().startswith("claude") else convert.OPENAI


def shape_for(provider: str, messages: list[Message]) -> list[Message]:
    """Messages in the provider's own shape: for Anthropic, runs of ``tool`` messages become one
    ``user`` message of tool results, as the request carried them."""
    if provider != convert.ANTHROPIC:
        return messages
    out: list[Message] = []
    for m in messages:
        if m.role == "tool":
            if out and out[-1].role == "user" and out[-1].blocks and all(b.type == TOOL_RESULT for b in out[-1].blocks):
                out[-1].blocks.extend(m.blocks)
                continue
            m = Message(id="", role="user", blocks=list(m.blocks), form="list")
        out.append(m)
    return out


# --- current GenAI conventions: role + parts
def _load(value: Any, where: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise DecodeError(f"{where}: malformed JSON ({exc.msg})") from None
    return value


def _genai_list(value: Any, where: str, *, system: bool = False) -> list[Message]:
    if value is None:
        return []
    value = _load(value, where)
    if system:
        parts = value if isinstance(value, list) else [value]
        blocks = parts_to_blocks([p if isinstance(p, dict) else {"type": "text", "content": p} for p in parts], where)
        return [Message(id="", role="system", blocks=blocks, form="str" if len(blocks) == 1 else "list")] if blocks else []
    if not isinstance(value, list):
        raise DecodeError(f"{where}: expected a list of messages")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise DecodeError(f"{where}[{i}]: expected a message with a role")
        blocks = parts_to_blocks(m.get("parts") or [], f"{where}[{i}]")
        if blocks:
            out.append(Message(id="", role=m["role"], blocks=blocks, form="list"))
    return out


def parts_to_blocks(parts: Iterable[Any], where: str) -> list[Block]:
    """GenAI message parts (``text``, ``reasoning``, ``tool_call``, ``tool_call_response``, ``compaction``)
    as blocks; a compaction part stays whole (pinned in the context, docs/gate.md)."""
    blocks = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            blocks.append(Block(TEXT, text=str(part.get("content") or "")))
        elif kind in ("reasoning", "thinking"):
            blocks.append(Block(THINKING, text=str(part.get("content") or "")))
        elif kind == "tool_call":
            blocks.append(Block(TOOL_USE, id=str(part.get("id") or ""), name=str(part.get("name") or ""),
                                input=_arguments(part.get("arguments"))))
        elif kind == "tool_call_response":
            resp = part.get("response")
            blocks.append(Block(TOOL_RESULT, tool_use_id=str(part.get("id") or ""),
                                content=resp if isinstance(resp, (str, list)) or resp is None else json.dumps(resp)))
        elif kind == COMPACTION:
            blocks.append(Block(OTHER, extra=dict(part)))
    if any(b.type == TOOL_USE and not b.id or b.type == TOOL_RESULT and not b.tool_use_id for b in blocks):
        raise DecodeError(f"{where}: a tool call or response without an id")
    return blocks


def _arguments(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args)
        except json.JSONDecodeError:
            return {"_raw_arguments": args}
    return args if args is not None else {}


# --- older GenAI conventions: one log event per message
def _old_events(events: list[Mapping[str, Any]]) -> tuple[list[Message], list[Message]]:
    inp: list[Message] = []
    out: list[Message] = []
    for e in events:
        role = OLD_EVENTS.get(str(e.get("event_name")))
        if role is None:
            continue
        raw = e.get("body")
        body: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if e.get("event_name") == sn.GEN_AI_CHOICE_EVENT and isinstance(body.get("message"), Mapping):
            body = body["message"]
        blocks: list[Block] = []
        content = body.get("content")
        if isinstance(content, str) and content:
            blocks.append(Block(TEXT, text=content))
        elif isinstance(content, list):
            blocks.extend(parts_to_blocks([{"type": "text", "content": c.get("text")} if isinstance(c, Mapping) and
                                           "text" in c else c for c in content], str(e.get("event_name"))))
        for tc in body.get("tool_calls") or []:
            fn = tc.get("function") or {}
            blocks.append(Block(TOOL_USE, id=str(tc.get("id") or ""), name=str(fn.get("name") or ""),
                                input=_arguments(fn.get("arguments"))))
        if role == "tool":
            blocks = [Block(TOOL_RESULT, tool_use_id=str(body.get("id") or ""),
                            content=content if isinstance(content, (str, list)) else json.dumps(content))]
        if blocks:
            (out if e.get("event_name") == sn.GEN_AI_CHOICE_EVENT else inp).append(
                Message(id="", role=role, blocks=blocks, form="list"))
    return inp, out


# --- OpenInference
def _openinference(a: Mapping[str, Any], provider: str) -> tuple[list[Message], list[Message]]:
    inp: list[Message] | None = None
    body = _json_value(a, "input.value")
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        try:
            inp, _ = convert.from_anthropic(body) if provider == convert.ANTHROPIC else convert.from_openai(body)
        except StructureError as exc:
            raise DecodeError(f"input.value: not a valid {provider} request body: {exc}") from None
    if inp is None:
        inp = _indexed_messages(a, "llm.input_messages")
    out: list[Message] | None = None
    reply = _json_value(a, "output.value")
    if isinstance(reply, dict):
        from tracer.spans.genai import response_messages

        try:
            out = response_messages(reply)[0] or None
        except StructureError as exc:
            raise DecodeError(f"output.value: not a valid {provider} response body: {exc}") from None
    if out is None:
        out = _indexed_messages(a, "llm.output_messages")
    if not inp and isinstance(a.get("input.value"), str) and a.get("input.mime_type") != "application/json":
        inp = [Message(id="", role="user", blocks=[Block(TEXT, text=a["input.value"])], form="str")]
    if not out and isinstance(a.get("output.value"), str) and a.get("output.mime_type") != "application/json" \
            and a["output.value"] != REDACTED:
        out = [Message(id="", role="assistant", blocks=[Block(TEXT, text=a["output.value"])], form="str")]
    return inp, out


def _json_value(a: Mapping[str, Any], key: str) -> Any:
    value = a.get(key)
    if not isinstance(value, str):
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return None


def _indexed_messages(a: Mapping[str, Any], prefix: str) -> list[Message]:
    """Flattened messages: ``{prefix}.N.<field>`` (OpenInference ``message.*``, OpenLLMetry bare)."""
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in a.items():
        m = _INDEXED.match(key)
        if m and m.group(1) == prefix:
            by_index.setdefault(int(m.group(2)), {})[m.group(3).removeprefix("message.")] = value
    out: list[Message] = []
    for i in sorted(by_index):
        msg = _flat_message(by_index[i], f"{prefix}.{i}")
        if msg is None:
            continue
        if prefix.endswith(("completion", "output_messages")) and out and out[-1].role == msg.role == "assistant":
            out[-1].blocks.extend(msg.blocks)  # OpenLLMetry writes a reply's thinking as a completion of its own
        else:
            out.append(msg)
    return out


def _flat_message(f: dict[str, Any], where: str) -> Message | None:
    role = str(f.get("role") or "user")
    if role == "thinking":  # OpenLLMetry (Anthropic): a reply's thinking block as a completion of its own
        return Message(id="", role="assistant", blocks=[Block(THINKING, text=str(f.get("content") or ""))], form="list")
    if role not in ROLES:
        role = "assistant" if role in ("model", "ai") else "user"
    blocks: list[Block] = []
    contents: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[str, Any]] = {}
    for key, value in f.items():
        if m := re.match(r"^contents\.(\d+)\.(?:message_content\.)?(.+)$", key):
            contents.setdefault(int(m.group(1)), {})[m.group(2)] = value
        elif m := re.match(r"^tool_calls\.(\d+)\.(?:tool_call\.)?(.+)$", key):
            calls.setdefault(int(m.group(1)), {})[m.group(2)] = value
    content = f.get("content")
    tool_call_id = f.get("tool_call_id")
    if role == "tool" or tool_call_id:
        return Message(id="", role="tool" if role in ("tool", "user") else role, form="list", blocks=[
            Block(TOOL_RESULT, tool_use_id=str(tool_call_id or ""), content=content if content is not None else "")])
    if contents:
        for i in sorted(contents):
            c = contents[i]
            kind = c.get("type")
            if kind in ("reasoning", "thinking"):
                blocks.append(Block(THINKING, text=str(c.get("text") or ""),
                                    extra={"signature": c["signature"]} if c.get("signature") else {}))
            elif kind == "text":
                blocks.append(Block(TEXT, text=str(c.get("text") or "")))
            elif kind == "tool_use" or any(k.startswith("tool_call.") for k in c):  # a call among the contents
                blocks.append(Block(TOOL_USE, id=str(c.get("tool_call.id") or ""),
                                    name=str(c.get("tool_call.function.name") or ""),
                                    input=_arguments(c.get("tool_call.function.arguments"))))
    elif isinstance(content, str):
        parsed = _anthropic_blocks(content) if content.startswith("[") else None
        if parsed is not None:
            blocks.extend(parsed)
        elif content:
            blocks.append(Block(TEXT, text=content))
    listed = {b.id for b in blocks if b.type == TOOL_USE}  # OpenInference lists a call among contents and tool_calls
    for i in sorted(calls):
        c = calls[i]
        if str(c.get("id") or "") in listed:
            continue
        blocks.append(Block(TOOL_USE, id=str(c.get("id") or ""), name=str(c.get("function.name") or c.get("name") or ""),
                            input=_arguments(c.get("function.arguments") or c.get("arguments"))))
    if any(b.type == TOOL_USE and not b.id for b in blocks):
        raise DecodeError(f"{where}: a tool call without an id")
    return Message(id="", role=role, blocks=blocks, form="list") if blocks else None


def _anthropic_blocks(text: str) -> list[Block] | None:
    """A content string that is a JSON list of Anthropic blocks (OpenLLMetry writes them so)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, list) or not all(isinstance(b, dict) and "type" in b for b in raw):
        return None
    try:
        return [convert.anthropic_block(b, "content") for b in raw]
    except StructureError:
        return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# ------------------------------------------------------------------------------------- stitching
def message_key(m: Message) -> tuple[Any, ...]:
    """What two recordings of one message agree on (for prefix matching)."""
    def norm(v: Any) -> str:
        if isinstance(v, list) and len(v) == 1 and isinstance(v[0], dict) and set(v[0]) >= {"type", "text"}:
            v = v[0]["text"]  # one text block == its text
        return json.dumps(v, sort_keys=True, default=str)

    role = "user" if m.role == "tool" else m.role
    return (role, tuple((b.type, b.text, b.id, b.name, norm(b.input), b.tool_use_id, norm(b.content))
                        for b in m.blocks if b.type != THINKING))


def extends(before: list[Message], after: list[Message]) -> bool:
    """``after`` starts with every message of ``before`` (thinking parts aside: some
    instrumentations drop them from requests)."""
    if len(before) > len(after) or not before:
        return False
    return all(message_key(x) == message_key(y) for x, y in zip(before, after, strict=False))


def prefix_hashes(messages: list[Message]) -> list[int]:
    """``h[i]``: a hash of ``message_key`` of ``messages[:i + 1]`` (one pass; equal prefixes, equal
    hashes within one process). What the stitcher indexes requests by, so finding the request a
    call extends costs the call's own length, not the number of waiting conversations."""
    out: list[int] = []
    h = 0
    for m in messages:
        h = hash((h, message_key(m)))
        out.append(h)
    return out


@dataclass(eq=False)
class Chain:
    """One conversation being stitched: its calls' span ids (oldest first) and its latest call.

    ``calls`` keeps every call only when the stitcher was asked to (the importer); the receiver keeps
    the latest call alone, since a conversation is its latest request plus its reply."""

    id: int
    first_trace: str
    head: int  # hash of the first call's first message
    last: ModelCall
    latest: int  # hash of the latest call's whole request
    span_ids: list[str] = field(default_factory=list)
    calls: list[ModelCall] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    traces: set[str] = field(default_factory=set)
    size: int = 0  # bytes the owner says the latest call holds (the receiver's memory cap)
    spilled: bool = False  # the latest call's content is on disk (the receiver's journal), not in ``last``


class Stitcher:
    """Model calls grouped into conversations one call at a time (the rules of :func:`stitch`).

    Every lookup is a dictionary probe: by conversation key; by (trace, first message); by the hash
    of the latest request of each chain, probed with each prefix of the new request, longest first.
    A call costs O(its messages) however many conversations wait (``ops`` counts the probes and
    comparisons, for the scaling test)."""

    def __init__(self, *, keep_calls: bool = True) -> None:
        self.keep_calls = keep_calls
        self.chains: dict[int, Chain] = {}  # id -> chain, in creation order
        self._by_key: dict[str, Chain] = {}
        self._by_head: dict[tuple[str, int], list[Chain]] = {}
        self._by_latest: dict[int, list[Chain]] = {}
        self._next = 0
        self.ops = 0

    def __len__(self) -> int:
        return len(self.chains)

    def add(self, call: ModelCall) -> Chain:
        """Put ``call`` in its conversation (a new one when none fits); returns that chain."""
        key = _key(call)
        hashes = prefix_hashes(call.input)
        self.ops += 1 + len(hashes)
        chain = self._by_key.get(key) if key else None
        if chain is None and key is None and hashes:
            found = self._by_head.get((call.trace_id, hashes[0]))
            chain = found[-1] if found else None
        if chain is None:
            chain = self._extended(call, key, hashes)
        if chain is None:
            chain = Chain(id=self._next, first_trace=call.trace_id, head=hashes[0] if hashes else 0,
                          last=call, latest=hashes[-1] if hashes else 0)
            self._next += 1
            self.chains[chain.id] = chain
        else:
            self._unindex_latest(chain)
        chain.last = call
        chain.spilled = False
        chain.latest = hashes[-1] if hashes else 0
        chain.span_ids.append(call.span_id)
        if self.keep_calls:
            chain.calls.append(call)
        if key:
            chain.keys.add(key)
        chain.traces.add(call.trace_id)
        self._index(chain)
        return chain

    def _extended(self, call: ModelCall, key: str | None, hashes: list[int]) -> Chain | None:
        """The chain whose latest request ``call``'s request extends (the longest; the oldest on a tie)."""
        for h in reversed(hashes):
            self.ops += 1
            fits = [c for c in self._by_latest.get(h, ())
                    if (key is None or _key(c.last) is None or _key(c.last) == key)
                    and (c.spilled or extends(c.last.input, call.input))]  # spilled: the hash alone
            self.ops += len(fits)
            if fits:
                return min(fits, key=lambda c: c.id)
        return None

    def _index(self, chain: Chain) -> None:
        for key in chain.keys:
            self._by_key.setdefault(key, chain)
        for trace in chain.traces:
            at = self._by_head.setdefault((trace, chain.head), [])
            if chain not in at:
                at.append(chain)
        if chain.last.input or chain.spilled:
            self._by_latest.setdefault(chain.latest, []).append(chain)

    def _unindex_latest(self, chain: Chain) -> None:
        at = self._by_latest.get(chain.latest)
        if at is not None and chain in at:
            at.remove(chain)
            if not at:
                del self._by_latest[chain.latest]

    def remove(self, chain: Chain) -> None:
        """Forget ``chain`` (committed): later calls start a conversation of their own."""
        self.chains.pop(chain.id, None)
        self._unindex_latest(chain)
        for key in chain.keys:
            if self._by_key.get(key) is chain:
                del self._by_key[key]
        for trace in chain.traces:
            at = self._by_head.get((trace, chain.head))
            if at is not None and chain in at:
                at.remove(chain)
                if not at:
                    del self._by_head[(trace, chain.head)]

    def spill(self, chain: Chain) -> None:
        """Drop the latest call's messages from memory (its owner keeps them on disk); the chain stays
        indexed, so later calls still join it (by key, first message, or the hash of its request)."""
        if chain.last.input or chain.last.output:
            chain.last = replace(chain.last, input=[], output=[])
        chain.spilled = True

    def put_back(self, chain: Chain) -> None:
        """Index a removed chain again (its commit failed: it waits for the next try)."""
        self.chains[chain.id] = chain
        self._index(chain)


def stitch(calls: list[ModelCall]) -> list[list[ModelCall]]:
    """Group model calls into conversations, oldest first.

    Calls sharing ``gen_ai.conversation.id`` (else ``session.id``) are one conversation. A call
    without either joins the conversation of its trace that starts with the same message (so a
    sub-agent with its own system prompt in the same trace stays apart, and a history the agent
    trimmed stays with its conversation), else the conversation whose latest request its own
    request extends (prefix match, the longest one wins), else starts a new one.
    """
    stitcher = Stitcher()
    for call in sorted(calls, key=lambda c: (c.start_ns, c.span_id)):
        stitcher.add(call)
    return [c.calls for c in stitcher.chains.values()]


def _key(call: ModelCall) -> str | None:
    if call.conversation_id:
        return f"conversation:{call.conversation_id}"
    return f"session:{call.session_id}" if call.session_id else None


def _keyed(call: ModelCall) -> bool:
    return _key(call) is not None
