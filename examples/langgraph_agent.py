"""A LangGraph ReAct agent (``create_react_agent``) with prunegate's gate as its ``pre_model_hook``.

The agent runs the scripted 24-round conversation of ``scripted.py`` (parallel tool calls, JSON
results) against the local stand-in; the model sees the gated history, the graph keeps the full one.

    python examples/langgraph_agent.py --store ./prunegate-store [--mode sync|async|stream]

Prints a JSON summary (requests, invalid ones, largest request vs the budget) as its last line.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from scripted import SYSTEM, ask_runnable, get_weather, lookup_order, main  # noqa: E402

from policies.adapters.langgraph import prune_hook  # noqa: E402
from tracer import PruneGuard  # noqa: E402

with warnings.catch_warnings():  # create_react_agent is deprecated in favour of langchain's create_agent
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent  # noqa: E402


def run(base_url: str, *, budget: int, store: str | None, mode: str = "sync") -> PruneGuard:
    model = ChatOpenAI(model="gpt-4o", base_url=base_url, api_key=SecretStr("dummy-key"), streaming=mode == "stream")
    tools = [tool(lookup_order), tool(get_weather)]
    # --- the integration ------------------------------------------------------------------------
    guard = PruneGuard("tiered", budget=budget, provider="openai", store=store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, tools, prompt=SYSTEM,
                                   pre_model_hook=prune_hook(guard, tools=tools, prompt=SYSTEM))
    # --------------------------------------------------------------------------------------------
    ask_runnable(agent, mode)
    guard.close()
    return guard


if __name__ == "__main__":
    sys.exit(main(run, doc=__doc__))
