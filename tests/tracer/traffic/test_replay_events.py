"""Transcript → event stream: model calls before assistant turns, results one at a time, streams."""

from __future__ import annotations

import pytest

from policies import Context, validate
from tests.scenarios import BATCH
from tracer.traffic import build_events, conversation_from_body
from tracer.traffic.events import (
    APPEND,
    CLOSE,
    DELTA,
    MODEL_CALL,
    OPEN,
    TOOL,
    find_references,
    looks_side_effecting,
    split_results,
    tokens_of,
)


def conv(body=BATCH, provider="anthropic"):
    return conversation_from_body(body, provider, name="t", file="f")


def kinds(stream):
    return [e.kind for e in stream.events]


def test_an_opening_assistant_greeting_has_no_model_call_before_it():
    """τ²-bench dialogues open with a scripted greeting: nothing was sent before it, so no (empty) request."""
    body = {"messages": [{"role": "assistant", "content": "Hi! How can I help you today?"},
                         {"role": "user", "content": "Cancel my trip."},
                         {"role": "assistant", "content": "Which reservation?"}]}
    s = build_events(conv(body, "openai").messages, "openai")
    assert kinds(s) == [APPEND, APPEND, MODEL_CALL, APPEND]


def test_a_model_call_precedes_every_assistant_turn_and_the_calls_run_before_their_results():
    s = build_events(conv().messages, "anthropic")
    assert kinds(s) == [APPEND, APPEND, MODEL_CALL, APPEND, TOOL, TOOL, TOOL, APPEND, APPEND, APPEND, APPEND,
                        MODEL_CALL, APPEND]
    calls = [e for e in s.events if e.kind == MODEL_CALL]
    assert [c.message_id for c in calls] == ["t2", "t4"]
    assert calls[1].call_ids == ("c_weather", "c_hotel", "c_book")  # what a naive retry re-issues


def test_a_transcript_ending_on_a_request_ends_with_a_model_call():
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert kinds(build_events(conv(body).messages, "anthropic")) == [APPEND, MODEL_CALL]


def test_results_arrive_one_at_a_time_and_render_back_valid():
    c = conv()
    s = build_events(c.messages, "anthropic")
    arrivals = [e.message for e in s.events if e.kind == APPEND][3:]
    assert [m.id for m in arrivals] == ["t3.r0", "t3.r1", "t3.r2", "t3", "t4"]
    assert [m.answered_ids for m in arrivals[:3]] == [["c_weather"], ["c_hotel"], ["c_book"]]
    assert arrivals[3].plain_text() == "Also, is breakfast included?"
    ctx = Context(provider="anthropic")
    for e in s.events:
        if e.kind == APPEND:
            ctx.append(e.message.copy())
    assert validate(ctx.render(), "anthropic") == []
    assert ctx.render()["messages"][2]["content"][2]["tool_use_id"] == "c_book"


def test_an_openai_tool_message_is_already_one_result():
    c = conversation_from_body({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"}]}, "openai", name="o", file="f")
    singles, rest = split_results(c.messages[2])
    assert singles == [c.messages[2]] and rest is None


def test_shuffled_arrival_is_a_seeded_permutation():
    c = conv()
    order = {seed: [e.message.id for e in build_events(c.messages, "anthropic", shuffle_seed=seed).events
                    if e.kind == APPEND and e.message.role == "tool"] for seed in range(8)}
    assert all(sorted(o) == ["t3.r0", "t3.r1", "t3.r2"] for o in order.values())
    assert len({tuple(o) for o in order.values()}) > 1
    again = [e.message.id for e in build_events(c.messages, "anthropic", shuffle_seed=3).events
             if e.kind == APPEND and e.message.role == "tool"]
    assert again == order[3]


def test_streamed_results_open_stream_and_close_and_the_streams_of_a_batch_interleave():
    c = conv()
    s = build_events(c.messages, "anthropic", stream_chunks=3)
    assert s.streamed == 3
    ev = [e for e in s.events if e.kind in (OPEN, DELTA, CLOSE)]
    assert [e.kind for e in ev[:3]] == [OPEN, OPEN, OPEN]  # all three streams start before any ends
    for call, content in (("c_weather", "sunny, 24C all week long"), ("c_book", "booked, reference PNR-7XK2Q")):
        mine = [e for e in ev if e.call_id == call]
        assert mine[0].kind == OPEN and mine[-1].kind == CLOSE
        assert mine[0].message.blocks[0].content == ""
        assert [e.kind for e in mine[1:-1]] == [DELTA] * 3
        assert "".join(e.text for e in mine[1:-1]) == content


def test_session_recorded_streams_are_streamed_without_the_flag():
    s = build_events(conv().messages, "anthropic", streamed_calls=["c_hotel"], session_stream_chunks=2)
    assert s.streamed == 1
    assert [e.kind for e in s.events if e.call_id == "c_hotel" and e.kind != TOOL] == [OPEN, DELTA, DELTA, CLOSE]


@pytest.mark.parametrize("name,expected", [
    ("book_flight", True), ("cancelOrder", True), ("send", True), ("transfer_to_human_agents", True),
    ("update_reservation_flights", True), ("get_weather", False), ("search_hotels", False), ("think", False),
    ("settings", False), ("bookkeeping_report", False), ("", False),
])
def test_side_effect_heuristic(name, expected):
    assert looks_side_effecting(name) is expected


def test_the_session_list_of_side_effecting_tools_replaces_the_heuristic():
    c = conv()
    flags = {e.tool_name: e.side_effect for e in build_events(c.messages, "anthropic").events if e.kind == TOOL}
    assert flags == {"get_weather": False, "search_hotels": False, "book_flight": True}
    flags = {e.tool_name: e.side_effect for e in build_events(c.messages, "anthropic", side_effect_tools=["search_hotels"]).events
             if e.kind == TOOL}
    assert flags == {"get_weather": False, "search_hotels": True, "book_flight": False}


def test_references_link_later_turns_to_the_messages_they_refer_back_to():
    c = conv()
    s = build_events(c.messages, "anthropic")
    refs = {r.source: r.tokens for r in s.references["t4"]}
    # the hotel code and the booking reference from two results, the user's question about breakfast
    assert refs == {"t3.r1": ("ht-4821",), "t3.r2": ("booked", "pnr-7xk2q"), "t3": ("breakfast",)}
    assert "t3.r0" not in refs  # the weather result is never used again


def test_tokens_and_ambient_text():
    assert tokens_of("Order ORD-1234 of 12 items, reference AB9, see documentation") == {
        "ord-1234", "ab9", "reference", "documentation"}
    refs = find_references(conv().messages, ambient_text="PNR-7XK2Q and breakfast are in the tool schema")
    assert {r.source: r.tokens for r in refs["t4"]} == {"t3": ("booked", "ht-4821")}  # unsplit: one message
