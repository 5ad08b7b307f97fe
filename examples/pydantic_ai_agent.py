"""A Pydantic AI agent with prunegate's gate as a capability.

The agent runs the scripted 24-round conversation of ``scripted.py`` (parallel tool calls, JSON
results) against the local stand-in; every model request goes through the gate first.

    python examples/pydantic_ai_agent.py --store ./prunegate-store [--mode sync|async|stream]

Prints a JSON summary (requests, invalid ones, largest request vs the budget) as its last line.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402
from scripted import PROMPT, SYSTEM, ask_in_mode, get_weather, lookup_order, main  # noqa: E402

from policies.adapters.pydantic_ai import prune_history  # noqa: E402
from tracer import PruneGuard  # noqa: E402


def run(base_url: str, *, budget: int, store: str | None, mode: str = "sync",
        write_back: bool = False) -> PruneGuard:
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=base_url, api_key="dummy-key"))
    # --- the integration ------------------------------------------------------------------------
    guard = PruneGuard("tiered", budget=budget, provider="openai", store=store)
    agent = Agent(model, tools=[lookup_order, get_weather], system_prompt=SYSTEM,
                  capabilities=[prune_history(guard, write_back=write_back)])
    # --------------------------------------------------------------------------------------------
    question = f"{PROMPT} ({mode})"
    async def stream() -> AsyncIterator[str]:
        async with agent.run_stream(question) as result:
            async for text in result.stream_text():
                yield text

    ask_in_mode(mode, lambda: agent.run_sync(question), lambda: agent.run(question), stream)
    guard.close()
    return guard


if __name__ == "__main__":
    sys.exit(main(run, doc=__doc__))
