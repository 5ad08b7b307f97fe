"""The source document's two failures, as event streams any test can drive and as a recorded body."""

from __future__ import annotations

from policies import Block, Context, Message, text_message, tool_result, tool_use
from policies.messages import TOOL_RESULT


def history(ctx: Context, turns: int = 3) -> None:
    """A system prompt, a first question and a few closed turns of filler."""
    ctx.append(text_message("", "system", "You are a travel agent. Use tools."))
    ctx.append(text_message("", "user", "Plan my trip to Lisbon."))
    for i in range(turns):
        ctx.append(text_message("", "assistant", f"Step {i}: " + "details " * 40))
        ctx.append(text_message("", "user", f"ok, continue {i}"))


def parallel_batch(ctx: Context) -> Message:
    """An assistant turn that issues three parallel calls; one is side-effecting."""
    return ctx.append(
        Message(
            id="",
            role="assistant",
            blocks=[
                Block("text", text="Checking three things at once."),
                tool_use("call_weather", "get_weather", {"city": "Lisbon"}),
                tool_use("call_hotel", "search_hotels", {"city": "Lisbon"}),
                tool_use("call_book", "book_flight", {"to": "LIS"}),  # side effect
            ],
        )
    )


def result(call_id: str, content: str) -> Message:
    return Message(id="", role="tool", blocks=[tool_result(call_id, content)])


def open_stream(ctx: Context, call_id: str) -> Message:
    return ctx.open("tool", blocks=[Block(TOOL_RESULT, tool_use_id=call_id, content="")])


# The parallel batch as a recorded Anthropic request body: three calls, one side-effecting (a booking).
BATCH = {
    "system": "You plan trips.",
    "messages": [
        {"role": "user", "content": "Plan Lisbon, booking ref please."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Three things at once."},
            {"type": "tool_use", "id": "c_weather", "name": "get_weather", "input": {"city": "Lisbon"}},
            {"type": "tool_use", "id": "c_hotel", "name": "search_hotels", "input": {"city": "Lisbon"}},
            {"type": "tool_use", "id": "c_book", "name": "book_flight", "input": {"to": "LIS"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c_weather", "content": "sunny, 24C all week long"},
            {"type": "tool_result", "tool_use_id": "c_hotel", "content": "Hotel Azul HT-4821, 90 EUR a night"},
            {"type": "tool_result", "tool_use_id": "c_book", "content": "booked, reference PNR-7XK2Q"},
            {"type": "text", "text": "Also, is breakfast included?"},
        ]},
        {"role": "assistant", "content": "Booked PNR-7XK2Q; Hotel Azul HT-4821 includes breakfast."},
    ],
}
