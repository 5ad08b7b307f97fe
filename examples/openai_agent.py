"""An OpenAI Chat Completions agent loop with prunegate's gate in front of every model call.

Same loop as ``anthropic_agent.py`` with the official ``openai`` SDK. The stand-in answers from
recorded real Chat Completions responses (OpenAI's, and DeepSeek's OpenAI-compatible API with a
parallel batch of two calls); tools answer from the recorded results.

    python examples/openai_agent.py --store ./prunegate-store             # gated
    python examples/openai_agent.py --store ./prunegate-store --ungated   # naive trimming: 400s

Without ``--base-url`` it starts the stand-in in a thread. Prints a JSON summary as its last line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai  # noqa: E402
from cassettes import OPENAI, load_scripts, recorded_tools  # noqa: E402
from standin_server import loop_main  # noqa: E402

from tracer.guard import PruneGuard, assistant_message, tool_calls, tool_results_message  # noqa: E402

MODEL = "gpt-4o-mini"
SYSTEM = "You are a helpful assistant and a dice game host. Use the tools."
PROMPT_SOURCES = (  # recorded user turns, asked one after the other in one conversation
    "test_multiple_agent_tool_calls.yaml",
    "test_deepseek_deferred_capability_with_thinking.yaml",
)
TOOLS = [  # as the recorded requests declared them
    {"type": "function", "function": {"name": "get_capital", "description": "Get the capital of a country.",
                                      "parameters": {"type": "object", "properties": {"country": {"type": "string"}},
                                                     "required": ["country"]}}},
    {"type": "function", "function": {"name": "load_capability", "description": "Load a deferred capability.",
                                      "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_player_name", "description": "Get the player's name.",
                                      "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "roll_dice", "description": "Roll a six-sided die.",
                                      "parameters": {"type": "object", "properties": {}}}},
]


def run(base_url: str, *, budget: int, store: str | None, gated: bool, policy: str = "recency",
        capture: bool = False) -> dict:
    scripts = {s.source: s for s in load_scripts()[OPENAI]}
    turns = [scripts[name] for name in PROMPT_SOURCES]
    run_tool = recorded_tools()
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="dummy-key", max_retries=0)

    # --- the instrumentation: one guard per conversation --------------------------------------
    pg = PruneGuard(policy=policy, budget=budget, provider="openai", store=store, gated=gated,
                    capture_content=capture, session_name="examples/openai_agent",
                    side_effects={"roll_dice"})
    history: list[dict] = [{"role": "system", "content": SYSTEM}]
    answers, rejected = [], []
    for turn in turns:
        history.append({"role": "user", "content": turn.prompt})
        for _ in range(8):  # tool rounds of this turn
            body = pg.gate({"model": MODEL, "tools": TOOLS, "messages": history})
            try:
                response = client.chat.completions.create(**body)
            except openai.BadRequestError as exc:
                pg.record_response(error=exc)  # the provider's 400 lands on the chat span
                rejected.append(exc.message)
                break
            pg.record_response(response)
            history.append(assistant_message(response, "openai"))
            calls = tool_calls(response, "openai")
            if not calls:
                answers.append(response.choices[0].message.content)
                break
            results = []
            for call in calls:
                with pg.tool(call.name, call.id, arguments=call.arguments) as span:
                    output = run_tool(call.name, call.arguments)
                    span.result(output)
                results.append((call.id, output))
            history.extend(tool_results_message(results, "openai"))
    stats = pg.stats()
    pg.close()
    return {"provider": "openai", "gated": gated, "answers": answers, "rejected": rejected,
            "history_messages": len(history), **stats}


if __name__ == "__main__":
    sys.exit(loop_main(run, doc=__doc__, budget=260))
