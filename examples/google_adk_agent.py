"""A Google ADK agent with prunegate's gate as its ``before_model_callback``.

The agent runs the scripted 24-round conversation of ``scripted.py`` (parallel tool calls, JSON
results) against the local stand-in, which speaks the Gemini API (``generateContent``, and
``streamGenerateContent`` for ``--mode stream``) and checks every request; every model call goes
through the gate. google-adk pins an older OpenTelemetry than prunegate's other extras, so it may
live in a venv of its own (``tests/policies/adapters/test_google_adk.py`` makes one).

    python examples/google_adk_agent.py --store ./prunegate-store [--mode sync|async|stream]

Prints a JSON summary (requests, invalid ones, largest request vs the budget) as its last line.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from google.adk.agents import Agent  # noqa: E402
from google.adk.agents.run_config import RunConfig, StreamingMode  # noqa: E402
from google.adk.models import Gemini  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402
from scripted import PROMPT, SYSTEM, get_weather, lookup_order, main  # noqa: E402

from policies.adapters.google_adk import prune_callback  # noqa: E402
from tracer import PruneGuard  # noqa: E402


def run(base_url: str, *, budget: int, store: str | None, mode: str = "sync") -> PruneGuard:
    os.environ.setdefault("GOOGLE_API_KEY", "dummy-key")
    model = Gemini(model="gemini-2.5-flash", base_url=base_url.removesuffix("/v1"))
    # --- the integration ------------------------------------------------------------------------
    guard = PruneGuard("tiered", budget=budget, provider="openai", store=store)
    agent = Agent(name="support", model=model, instruction=SYSTEM, tools=[lookup_order, get_weather],
                  before_model_callback=prune_callback(guard))
    # --------------------------------------------------------------------------------------------
    runner = InMemoryRunner(agent=agent, app_name="prunegate-example")
    config = RunConfig(max_llm_calls=500, streaming_mode=StreamingMode.SSE if mode == "stream" else StreamingMode.NONE)
    question = types.Content(role="user", parts=[types.Part(text=f"{PROMPT} ({mode})")])

    async def ask() -> None:
        session = await runner.session_service.create_session(app_name="prunegate-example", user_id="user")
        async for _ in runner.run_async(user_id="user", session_id=session.id, new_message=question,
                                        run_config=config):
            pass

    if mode == "sync":
        session = runner.session_service.create_session_sync(app_name="prunegate-example", user_id="user")
        for _ in runner.run(user_id="user", session_id=session.id, new_message=question, run_config=config):
            pass
    else:
        asyncio.run(ask())
    guard.close()
    return guard


if __name__ == "__main__":
    sys.exit(main(run, doc=__doc__))
