"""An Anthropic agent loop with prunegate's gate in front of every model call.

The agent keeps its full history and sends it all each time, as agents do; ``pg.gate(body)``
returns the gated body to send. The model is the local stand-in server answering from recorded
real Anthropic responses (``examples/standin_server.py``), and the tools answer from the recorded
tool results, so the loop runs offline and the same way every time.

    python examples/anthropic_agent.py --store ./prunegate-store             # gated
    python examples/anthropic_agent.py --store ./prunegate-store --ungated   # naive trimming: 400s

Without ``--base-url`` it starts the stand-in in a thread. Prints a JSON summary as its last line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic  # noqa: E402
from cassettes import ANTHROPIC, load_scripts, recorded_tools  # noqa: E402
from standin_server import loop_main  # noqa: E402

from tracer.guard import PruneGuard, assistant_message, tool_calls, tool_results_message  # noqa: E402

MODEL = "claude-haiku-4-5"
SYSTEM = "You are a helpful assistant. Use the tools; call them in parallel when you can."
PROMPT_SOURCES = (  # recorded user turns, asked one after the other in one conversation
    "test_anthropic_mixed_strict_tool_run.yaml",
    "test_multiple_parallel_tool_calls.yaml",
    "test_anthropic_tool_with_thinking.yaml",
)


def run(base_url: str, *, budget: int, store: str | None, gated: bool, policy: str = "recency",
        capture: bool = False) -> dict:
    scripts = {s.source: s for s in load_scripts()[ANTHROPIC]}
    turns = [scripts[name] for name in PROMPT_SOURCES]
    tool_defs = {t["name"]: t for s in turns for t in s.request.get("tools", [])}
    run_tool = recorded_tools()
    client = anthropic.Anthropic(base_url=base_url, api_key="dummy-key", max_retries=0)

    # --- the instrumentation: one guard per conversation --------------------------------------
    pg = PruneGuard(policy=policy, budget=budget, provider="anthropic", store=store, gated=gated,
                    capture_content=capture, session_name="examples/anthropic_agent")
    history: list[dict] = []
    answers, rejected = [], []
    for turn in turns:
        history.append({"role": "user", "content": turn.prompt})
        for _ in range(8):  # tool rounds of this turn
            body = pg.gate({"model": MODEL, "max_tokens": 1024, "system": SYSTEM,
                            "tools": list(tool_defs.values()), "messages": history})
            try:
                response = client.messages.create(**body)
            except anthropic.BadRequestError as exc:
                pg.record_response(error=exc)  # the provider's 400 lands on the chat span
                rejected.append(exc.message)
                break
            pg.record_response(response)
            history.append(assistant_message(response, "anthropic"))
            calls = tool_calls(response, "anthropic")
            if not calls:
                answers.append("".join(b.text for b in response.content if b.type == "text"))
                break
            results = []
            for call in calls:
                with pg.tool(call.name, call.id, arguments=call.arguments) as span:
                    output = run_tool(call.name, call.arguments)
                    span.result(output)
                results.append((call.id, output))
            history.extend(tool_results_message(results, "anthropic"))
    stats = pg.stats()
    pg.close()
    return {"provider": "anthropic", "gated": gated, "answers": answers, "rejected": rejected,
            "history_messages": len(history), **stats}


if __name__ == "__main__":
    sys.exit(loop_main(run, doc=__doc__, budget=1500))  # in the per-turn calibrated Anthropic tokens (docs/tokens.md)
