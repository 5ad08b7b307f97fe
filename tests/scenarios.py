"""The source document's two failures, as event streams any test can drive."""

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
