"""An OpenAI Agents SDK agent with prunegate's gate as its ``call_model_input_filter``.

The agent runs the scripted 24-round conversation of ``scripted.py`` (parallel tool calls, JSON
results) against the local stand-in (Chat Completions); every model call goes through the gate.

    python examples/openai_agents_sdk.py --store ./prunegate-store [--mode sync|async|stream]

Prints a JSON summary (requests, invalid ones, largest request vs the budget) as its last line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from scripted import PROMPT, SYSTEM, ask_in_mode, get_weather, lookup_order, main  # noqa: E402

from policies.adapters.openai_agents import prune_input  # noqa: E402
from tracer import PruneGuard  # noqa: E402

set_tracing_disabled(True)  # the SDK's own tracing would upload to OpenAI; prunegate traces locally


def run(base_url: str, *, budget: int, store: str | None, mode: str = "sync") -> PruneGuard:
    model = OpenAIChatCompletionsModel("gpt-4o", AsyncOpenAI(base_url=base_url, api_key="dummy-key"))
    agent = Agent(name="support", instructions=SYSTEM, model=model,
                  tools=[function_tool(lookup_order), function_tool(get_weather)])
    # --- the integration ------------------------------------------------------------------------
    guard = PruneGuard("tiered", budget=budget, provider="openai", store=store)
    config = RunConfig(call_model_input_filter=prune_input(guard))
    # --------------------------------------------------------------------------------------------
    question = f"{PROMPT} ({mode})"
    ask_in_mode(mode, lambda: Runner.run_sync(agent, question, run_config=config, max_turns=100),
                lambda: Runner.run(agent, question, run_config=config, max_turns=100),
                lambda: Runner.run_streamed(agent, question, run_config=config, max_turns=100).stream_events())
    guard.close()
    return guard


if __name__ == "__main__":
    sys.exit(main(run, doc=__doc__))
