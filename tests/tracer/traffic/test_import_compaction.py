"""A ``compaction`` part in GenAI spans imports whole, and the context pins it."""

from __future__ import annotations

import json

from policies import Context
from policies.messages import OTHER, text_message
from tracer.spans.redact import genai_parts
from tracer.traffic import import_paths, load_conversations, write_otlp_json

COMPACTION = {"type": "compaction", "content": "Earlier: the user booked Lisbon, asked about trams."}


def test_a_compaction_part_imports_whole_and_is_pinned(tmp_path):
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "Plan my trip."}]},
        {"role": "assistant", "parts": [COMPACTION, {"type": "text", "content": "Noted."}]},
        {"role": "user", "parts": [{"type": "text", "content": "And Porto?"}]},
    ]
    span = {"trace_id": "cd" * 16, "span_id": f"{1:016x}", "name": "chat claude-x", "kind": "CLIENT",
            "start_time_ns": 100, "end_time_ns": 105, "resource": {"service.name": "agent"},
            "attributes": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
                           "gen_ai.request.model": "claude-x", "gen_ai.conversation.id": "conv-c",
                           "gen_ai.input.messages": json.dumps(history)}}
    write_otlp_json([span], tmp_path / "spans.json")
    assert import_paths([tmp_path / "spans.json"], tmp_path / "s").sessions == 1
    [conv] = load_conversations(tmp_path / "s")
    block = conv.messages[1].blocks[0]
    assert (block.type, block.extra) == (OTHER, COMPACTION)
    ctx = Context(provider="anthropic")
    ctx.extend(m.copy() for m in conv.messages)
    ctx.append(text_message("", "user", "one more"))
    assert ctx.unit_id_of(conv.messages[1].id) in ctx.pinned_unit_ids()
    assert ctx.to_anthropic()["messages"][1]["content"][0] == COMPACTION


def test_a_compaction_block_exports_with_its_content():
    from policies.messages import Block

    assert genai_parts([Block(OTHER, extra=dict(COMPACTION))]) == [COMPACTION]
