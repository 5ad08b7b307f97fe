"""Synthetic OpenAI chat bodies with tool calls, for tests that must run without ../shared/traffic."""

from __future__ import annotations

import json


def synthetic_bodies(n: int) -> list[dict]:
    bodies = []
    for k in range(n):
        msgs: list[dict] = [{"role": "system", "content": "You book flights."}]
        for i in range(2 + k % 4):
            msgs.append({"role": "user", "content": f"session {k}: find flight {i} " + "from A to B " * (10 + k)})
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{k}_{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"n": i})}}]})
            msgs.append({"role": "tool", "tool_call_id": f"c{k}_{i}", "content": "result " * (40 + 7 * i)})
            msgs.append({"role": "assistant", "content": f"flight {i} found"})
        bodies.append({"model": "gpt-4o", "messages": msgs})
    return bodies
