"""The Replay page's words: a decision as a sentence, a message in its provider's own shape."""

from __future__ import annotations

import json

from dashboard.components.conversation import decision_sentence, provider_message
from tracer.contract import names as sn

CALL = {"type": "tool_use", "id": "call_1", "name": "get_user", "input": {"user_id": "omar"}}
RESULT = {"type": "tool_result", "tool_use_id": "call_1", "content": '{"name": "Omar"}'}


def test_a_prune_reads_as_a_sentence() -> None:
    attrs = {sn.POLICY: "salience", sn.PRUNED_UNITS: ["u2", "u3"], sn.PRUNED_IDS: ["t1", "t2", "t3", "t4", "t5", "t6"],
             sn.TOKENS_BEFORE: 5840, sn.TOKENS_AFTER: 4000, sn.GROWN_UNITS: ["u4"], sn.GATED: True}
    text = decision_sentence(sn.PRUNE, attrs, {sn.BUDGET: 4000})
    assert text == ("salience pruned 2 units (6 messages, 1,840 tokens) to meet 4,000; "
                    "grew u4 to whole units (the policy proposed part of each)")


def test_a_deferral_says_what_it_waits_for() -> None:
    attrs = {sn.POLICY: "recency", sn.PENDING_CALLS: ["c1", "c2"], sn.TOKENS_BEFORE: 130, sn.REASON: "pending_calls"}
    text = decision_sentence(sn.DEFER, attrs, {sn.BUDGET: 100})
    assert text == ("recency deferred at 130 tokens (budget 100): 2 tool calls pending (c1, c2), "
                    "waiting for a commit boundary")


def test_an_ungated_prune_says_so() -> None:
    attrs = {sn.POLICY: "salience", sn.PRUNED_IDS: ["m3"], sn.TOKENS_BEFORE: 160, sn.TOKENS_AFTER: 110,
             sn.GATED: False}
    assert decision_sentence(sn.PRUNE, attrs, {sn.BUDGET: 100}).endswith("to meet 100 (ungated: raw messages, no gate)")


def test_openai_messages_come_back_in_openai_shape() -> None:
    [assistant] = provider_message("assistant", json.dumps([{"type": "text", "text": "Looking"}, CALL]), "openai")
    assert assistant == {"role": "assistant", "content": "Looking", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_user", "arguments": '{"user_id": "omar"}'}}]}
    assert provider_message("tool", json.dumps([RESULT]), "openai") == [
        {"role": "tool", "tool_call_id": "call_1", "content": '{"name": "Omar"}'}]


def test_anthropic_messages_keep_their_blocks() -> None:
    assert provider_message("user", json.dumps([RESULT]), "anthropic") == [{"role": "user", "content": [RESULT]}]
    assert provider_message("user", "plain words", "anthropic") == [
        {"role": "user", "content": [{"type": "text", "text": "plain words"}]}]
