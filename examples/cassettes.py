"""Recorded model traffic for the examples: real Anthropic/OpenAI responses and tool results.

The responses come from the pydantic-ai test cassettes in ``shared/traffic`` (beside the repo),
or from the sample of them shipped in ``tests/data/traffic`` when that is absent: each
interaction's ``response.parsed_body`` is what the provider really answered. A :class:`Script` is one user turn: its prompt, the responses of each round (a round is
one model call; tool rounds continue the turn) and the results its tools returned, so an example
agent can run the tools "for real" from the recording.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tracer.traffic.importers import provider_of_uri

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_FULL = Path(__file__).resolve().parents[2] / "shared" / "traffic"
TRAFFIC = _FULL if _FULL.is_dir() else Path(__file__).resolve().parents[1] / "tests" / "data" / "traffic"
CASSETTES = TRAFFIC / "pydantic-ai-cassettes" / "tests" / "models" / "cassettes"
ANTHROPIC, OPENAI = "anthropic", "openai"


@dataclass
class Script:
    """One recorded user turn."""

    provider: str
    prompt: str
    source: str  # cassette file name
    request: dict[str, Any]  # the first request of the turn, as recorded
    responses: list[dict[str, Any]] = field(default_factory=list)  # by round

    def round_for(self, present_ids: set[str]) -> int:
        """The round to answer: one past the latest round whose tool calls the request already holds."""
        nxt = 0
        for i, resp in enumerate(self.responses):
            if present_ids & set(call_ids(resp, self.provider)):
                nxt = i + 1
        return nxt


@cache
def interactions(path: Path) -> list[dict[str, Any]]:
    """The recorded interactions of one cassette file (parsed once per process)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader).get("interactions", [])


def call_ids(response: Mapping[str, Any], provider: str) -> list[str]:
    """Tool call ids a response issues."""
    if provider == OPENAI:
        msg = (response.get("choices") or [{}])[0].get("message") or {}
        return [c["id"] for c in msg.get("tool_calls") or []]
    return [b["id"] for b in response.get("content", []) if b.get("type") == "tool_use"]


def user_text(msg: Mapping[str, Any]) -> str | None:
    """The text of a user message that is a prompt (not a tool-result carrier), else None."""
    if msg.get("role") != "user":
        return None
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
            return None
        texts = [b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        return "\n".join(texts) if texts else None
    return None


def last_prompt(messages: list[Any]) -> tuple[int, str | None]:
    """(index, text) of the last user prompt of a request's messages."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        text = user_text(m) if isinstance(m, Mapping) else None
        if text is not None:
            return i, text
    return -1, None


def ids_after(messages: list[Any], start: int) -> set[str]:
    """Every tool call id (issued or answered) in ``messages[start:]``."""
    out: set[str] = set()
    for m in messages[start:]:
        if not isinstance(m, Mapping):
            continue
        if isinstance(m.get("tool_call_id"), str):
            out.add(m["tool_call_id"])
        for c in m.get("tool_calls") or []:
            if isinstance(c, Mapping) and isinstance(c.get("id"), str):
                out.add(c["id"])
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, Mapping):
                    for key in ("id", "tool_use_id"):
                        if isinstance(b.get(key), str) and b.get("type") in ("tool_use", "tool_result"):
                            out.add(b[key])
    return out


def load_scripts(files: Iterable[str] | None = None, root: Path = CASSETTES) -> dict[str, list[Script]]:
    """Scripts by provider from the cassettes (all of them, or the named files), first prompt wins."""
    out: dict[str, dict[str, Script]] = {ANTHROPIC: {}, OPENAI: {}}
    paths = sorted(root.rglob("*.yaml")) if files is None else [root / f for f in files]
    for path in paths:
        for it in interactions(path):
            req, resp = it.get("request", {}), it.get("response", {})
            provider = provider_of_uri(req.get("uri", ""))
            body, answer = req.get("parsed_body"), resp.get("parsed_body")
            if provider is None or not isinstance(body, dict) or not isinstance(answer, dict):
                continue
            if resp.get("status", {}).get("code") != 200 or body.get("stream"):
                continue
            at, prompt = last_prompt(body.get("messages", []))
            if prompt is None:
                continue
            script = out[provider].get(prompt)
            if script is None:
                script = out[provider][prompt] = Script(provider, prompt, path.name, body)
            elif script.source != path.name:
                continue
            script.responses.append(answer)
    return {p: list(s.values()) for p, s in out.items()}


class RecordedTools:
    """Tool implementations that answer from the recorded results: (name, arguments) -> content."""

    def __init__(self, scripts: Iterable[Script]) -> None:
        self.results: dict[tuple[str, str], Any] = {}
        self.definitions: dict[str, Any] = {}
        for s in scripts:
            for tool in s.request.get("tools") or []:
                name = tool.get("name") or (tool.get("function") or {}).get("name")
                if name:
                    self.definitions.setdefault(name, tool)

    def add_request(self, provider: str, body: Mapping[str, Any]) -> None:
        """Learn (call -> result) pairs from a recorded request body."""
        calls: dict[str, tuple[str, Any]] = {}
        for m in body.get("messages", []):
            if provider == OPENAI:
                for c in m.get("tool_calls") or []:
                    fn = c.get("function") or {}
                    calls[c["id"]] = (fn.get("name", ""), json.loads(fn.get("arguments") or "{}"))
                if m.get("role") == "tool" and m.get("tool_call_id") in calls:
                    self.results[_key(*calls[m["tool_call_id"]])] = m.get("content")
                continue
            content = m.get("content")
            if not isinstance(content, list):
                continue
            for b in content:
                if b.get("type") == "tool_use":
                    calls[b["id"]] = (b["name"], b.get("input") or {})
                elif b.get("type") == "tool_result" and b.get("tool_use_id") in calls:
                    self.results[_key(*calls[b["tool_use_id"]])] = b.get("content")

    def __call__(self, name: str, arguments: Any) -> Any:
        try:
            return self.results[_key(name, arguments)]
        except KeyError:
            raise LookupError(f"no recorded result for tool {name}({json.dumps(arguments)})") from None


def _key(name: str, arguments: Any) -> tuple[str, str]:
    return name, json.dumps(arguments, sort_keys=True)


def recorded_tools(files: Iterable[str] | None = None, root: Path = CASSETTES) -> RecordedTools:
    """Tools answering from every recorded request of the cassettes."""
    scripts = [s for group in load_scripts(files, root).values() for s in group]
    tools = RecordedTools(scripts)
    paths = sorted(root.rglob("*.yaml")) if files is None else [root / f for f in files]
    for path in paths:
        for it in interactions(path):
            provider = provider_of_uri(it["request"].get("uri", ""))
            body = it["request"].get("parsed_body")
            if provider and isinstance(body, dict):
                tools.add_request(provider, body)
    return tools
