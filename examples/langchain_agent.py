"""A LangChain 1.x agent (``create_agent``) with prunegate's gate as middleware.

The agent runs the scripted 24-round conversation of ``scripted.py`` (parallel tool calls, JSON
results) against the local stand-in; every model call goes through the gate first.

    python examples/langchain_agent.py --store ./prunegate-store [--mode sync|async|stream]

Prints a JSON summary (requests, invalid ones, largest request vs the budget) as its last line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from scripted import SYSTEM, ask_runnable, get_weather, lookup_order, main  # noqa: E402

from policies.adapters.langchain_middleware import prune_middleware  # noqa: E402
from tracer import PruneGuard  # noqa: E402


def run(base_url: str, *, budget: int, store: str | None, mode: str = "sync") -> PruneGuard:
    model = ChatOpenAI(model="gpt-4o", base_url=base_url, api_key=SecretStr("dummy-key"), streaming=mode == "stream")
    tools = [tool(lookup_order), tool(get_weather)]
    # --- the integration ------------------------------------------------------------------------
    guard = PruneGuard("tiered", budget=budget, provider="openai", store=store)
    agent = create_agent(model, tools, system_prompt=SYSTEM, middleware=[prune_middleware(guard)])
    # --------------------------------------------------------------------------------------------
    ask_runnable(agent, mode)
    guard.close()
    return guard


if __name__ == "__main__":
    sys.exit(main(run, doc=__doc__))
