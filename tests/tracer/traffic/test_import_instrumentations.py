"""Spans recorded by real GenAI instrumentations import to exactly the conversations that were sent.

The files in tests/data/otel were written by each instrumentation from PyPI (versions in
tests/data/otel/VERSIONS.md) while the official openai/anthropic SDKs talked to a scripted server
on 127.0.0.1; beside each, ``*.requests.json`` holds the bodies the server received and what it
answered. Two conversations per file: a weather question answered with two parallel tool calls
(Anthropic: with thinking blocks), and a two-turn arithmetic chat.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from policies import Block, Message, convert
from policies.messages import TEXT, THINKING, TOOL_RESULT, TOOL_USE
from tests.paths import TEST_DATA
from tracer.cli import main
from tracer.queries import list_sessions
from tracer.spans.genai import response_messages
from tracer.store import Store
from tracer.traffic import import_paths, load_conversations
from tracer.traffic.genai_spans import ModelCall

DATA = TEST_DATA / "otel"
WITH_CONTENT = [
    "otel-genai-openai-v2-parent",  # official OTel GenAI, span_only, a parent span per conversation
    "otel-genai-openai-v2-noparent",  # the same without a parent: stitched by prefix
    "otel-genai-openai-v2-events",  # official OTel GenAI, event_only: content in log events
    "otel-genai-openai-v2-legacy-events",  # official OTel GenAI 2.1b0: one log event per message
    "openinference-openai",
    "openinference-anthropic",
    "openllmetry-openai",
    "openllmetry-anthropic",
    "openllmetry-legacy-openai",  # gen_ai.prompt.N.* / gen_ai.completion.N.*
    "openllmetry-legacy-anthropic",
    "anthropic-sdk",  # the Anthropic SDK's own spans (open_telemetry option, content mode)
]
NO_CONTENT = {
    "otel-genai-openai-v2-nocontent": "OpenTelemetry GenAI (gen_ai.*)",
    "anthropic-sdk-nocontent": "OpenTelemetry GenAI (gen_ai.*)",
    "openinference-openai-nocontent": "OpenInference (llm.*)",  # OPENINFERENCE_HIDE_INPUTS/OUTPUTS
}


def _present(name: str) -> Path:
    path = DATA / f"{name}.jsonl"
    if not path.exists():
        pytest.fail(f"{path} is missing: run tests/data/otel/generate.sh")
    return path


SIGNED = {"openinference-anthropic", "openllmetry-legacy-anthropic"}  # the files whose spans record thinking signatures


def _shape(messages: list[Message], signatures: bool = False) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """What a conversation is made of: roles, texts, tool calls, results and thinking (with its
    signature when asked), in order."""
    out = []
    for m in messages:
        blocks: list[tuple[Any, ...]] = []
        for b in m.blocks:
            if b.type == TEXT and b.text:
                blocks.append(("text", b.text))
            elif b.type == THINKING:
                blocks.append(("thinking", b.text, b.extra.get("signature")) if signatures else ("thinking", b.text))
            elif b.type == TOOL_USE:
                blocks.append(("tool_call", b.id, b.name, b.input))
            elif b.type == TOOL_RESULT:
                content = b.content
                if isinstance(content, list):
                    content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
                blocks.append(("tool_result", b.tool_use_id, content))
        out.append((m.role, blocks))
    return out


def _sent(name: str, signatures: bool = False) -> list[list[tuple[str, list[tuple[Any, ...]]]]]:
    """Each conversation as the server saw it: the last request of the conversation and its answer."""
    exchanges = json.loads((DATA / f"{name}.requests.json").read_text())
    convs: dict[str, dict[str, Any]] = {}
    for ex in exchanges:  # a conversation is keyed by its first user message
        first = next(m for m in ex["body"]["messages"] if m["role"] == "user")
        convs[json.dumps(first)] = ex
    out = []
    for ex in convs.values():
        provider = ex["provider"]
        msgs, _ = (convert.from_anthropic if provider == convert.ANTHROPIC else convert.from_openai)(ex["body"])
        reply, _ = response_messages(ex["response"])
        out.append(_shape(msgs + reply[:1], signatures))
    return out


@pytest.mark.parametrize("name", WITH_CONTENT)
def test_each_instrumentation_imports_to_exactly_the_conversations_sent(tmp_path: Path, name: str) -> None:
    src = _present(name)
    report = import_paths([src], tmp_path / "s")
    assert not report.refused, report.refused
    sent = _sent(name)
    assert report.sessions == len(sent) == 2  # one session per conversation, however the calls were traced
    got = [_shape(c.messages) for c in load_conversations(tmp_path / "s")]  # read back from the store
    assert sorted(map(repr, got)) == sorted(map(repr, sent))
    if "anthropic" in name:  # the thinking blocks came through
        assert sum(b[0] == "thinking" for conv in got for _, blocks in conv for b in blocks) == 4
    assert ('"signature' in src.read_text()) == (name in SIGNED)
    if name in SIGNED:  # and the signatures of every request's thinking (OpenLLMetry writes a reply's without one)
        signed = [_shape(c.messages, signatures=True)[:-1] for c in load_conversations(tmp_path / "s")]
        assert sorted(map(repr, signed)) == sorted(map(repr, [c[:-1] for c in _sent(name, signatures=True)]))


def test_openinference_without_bodies_imports_the_same_from_its_message_attributes(tmp_path: Path) -> None:
    """input.value/output.value hidden (or not JSON): the llm.*_messages attributes alone give the
    same conversations, thinking (signed), tool calls among the contents and all."""
    lines = []
    for line in _present("openinference-anthropic").read_text().splitlines():
        request = json.loads(line)
        for rs in request.get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["attributes"] = [kv for kv in span["attributes"]
                                          if kv["key"] not in ("input.value", "output.value")]
        lines.append(json.dumps(request))
    (tmp_path / "flat.jsonl").write_text("\n".join(lines) + "\n")
    report = import_paths([tmp_path / "flat.jsonl"], tmp_path / "s")
    assert not report.refused and report.sessions == 2
    got = [_shape(c.messages, signatures=True) for c in load_conversations(tmp_path / "s")]
    assert sorted(map(repr, got)) == sorted(map(repr, _sent("openinference-anthropic", signatures=True)))


@pytest.mark.parametrize("name", sorted(NO_CONTENT))
def test_spans_without_content_are_refused_with_the_reason_and_a_non_zero_exit(tmp_path: Path, capsys, name: str) -> None:
    src = _present(name)
    code = main(["import", str(src), "--store", str(tmp_path / "s"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["sessions"] == 0
    [refused] = out["refused"]
    assert "no message content captured" in refused["reason"]
    assert f"attributes seen: {NO_CONTENT[name]} on 4" in refused["reason"]  # which convention the spans follow
    assert list_sessions(tmp_path / "s") == []


def test_spans_with_no_model_call_are_refused_naming_what_was_seen(tmp_path: Path) -> None:
    from tracer.traffic import write_otlp_json

    write_otlp_json([{"trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "GET /health", "kind": "SERVER",
                      "start_time_ns": 1, "end_time_ns": 2, "attributes": {"http.route": "/health"}}],
                    tmp_path / "spans.jsonl")
    report = import_paths([tmp_path / "spans.jsonl"], tmp_path / "s")
    [refused] = report.refused
    assert report.sessions == 0 and "1 spans but no model call" in refused.reason and "GET /health" in refused.reason


def test_log_events_in_a_file_of_their_own_find_their_spans(tmp_path: Path) -> None:
    src = _present("otel-genai-openai-v2-events")
    lines = src.read_text().splitlines()
    (tmp_path / "traces.jsonl").write_text("\n".join(line for line in lines if '"resourceSpans"' in line) + "\n")
    (tmp_path / "logs.jsonl").write_text("\n".join(line for line in lines if '"resourceLogs"' in line) + "\n")
    report = import_paths([tmp_path / "traces.jsonl", tmp_path / "logs.jsonl"], tmp_path / "s")
    assert report.sessions == 2 and not report.refused


def test_all_files_at_once_give_one_session_per_conversation(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in WITH_CONTENT:
        shutil.copy(_present(name), folder)
    report = import_paths([folder], tmp_path / "s")
    assert not report.refused
    sessions = list_sessions(Store(tmp_path / "s"))
    assert len(sessions) == report.sessions == 2 * len(WITH_CONTENT)


def _call(n: int, trace: str, *texts: str, conversation: str | None = None) -> ModelCall:
    roles = ["system", "user", "assistant", "user", "assistant", "user"]
    msgs = [Message(id="", role=roles[i], blocks=[Block(TEXT, text=t)]) for i, t in enumerate(texts)]
    return ModelCall(span_id=f"{n:016x}", trace_id=trace, start_ns=n, family="genai", provider="openai",
                     model="m", input=msgs, conversation_id=conversation)


def test_stitching_rules() -> None:
    from tracer.traffic.genai_spans import stitch

    def groups(*calls):
        return sorted(sorted(c.span_id[-1] for c in chain) for chain in stitch(list(calls)))

    # one trace, two agents with their own system prompts: two conversations; the second agent's
    # trimmed history (same head) stays with it
    assert groups(_call(1, "t", "planner", "go"), _call(2, "t", "coder", "fix"),
                  _call(3, "t", "planner", "go", "ok", "next"), _call(4, "t", "coder", "later")) == [["1", "3"], ["2", "4"]]
    # no shared trace: the request that extends another joins it, the longest prefix wins
    assert groups(_call(1, "a", "s", "q1"), _call(2, "b", "s", "q1", "a1", "q2"), _call(3, "c", "s", "q9"),
                  _call(4, "d", "s", "q1", "a1", "q2", "a2", "q3")) == [["1", "2", "4"], ["3"]]
    # a conversation id wins over everything else
    assert groups(_call(1, "a", "s", "q", conversation="x"), _call(2, "b", "other", conversation="x"),
                  _call(3, "a", "s", "q", "r", "q2", conversation="y")) == [["1", "2"], ["3"]]


def test_a_whole_prunegate_store_exported_as_otlp_json_imports_back_without_refusal(tmp_path: Path) -> None:
    from tracer.store.rows import decode_row
    from tracer.traffic import write_otlp_json

    import_paths([_present("anthropic-sdk")], tmp_path / "a")
    rows = [decode_row(r) for r in Store(tmp_path / "a").query("SELECT * FROM spans")]
    rows.append({"trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "prunegate.tracer.stats", "kind": "INTERNAL",
                 "start_time_ns": 1, "end_time_ns": 2, "attributes": {"prunegate.stats.stored": 3}})  # of no session
    write_otlp_json(rows, tmp_path / "all.jsonl")
    report = import_paths([tmp_path / "all.jsonl"], tmp_path / "b")
    assert not report.refused and report.sessions == 2
    assert list_sessions(tmp_path / "b") == list_sessions(tmp_path / "a")
