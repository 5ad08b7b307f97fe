"""Locate and read ../shared/traffic (real recorded agent traffic; never copied into the repo)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import yaml

TRAFFIC = Path(__file__).resolve().parents[2] / "shared" / "traffic"
TAU = TRAFFIC / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
CASSETTES = TRAFFIC / "pydantic-ai-cassettes"


@cache
def tau_conversations() -> list[dict]:
    """The τ-bench airline dialogues: each ``{"task_id", "trial", "traj": [OpenAI chat messages]}``."""
    return json.loads(TAU.read_text())


def provider_of(uri: str) -> str | None:
    if "api.anthropic.com/v1/messages" in uri:
        return "anthropic"
    if uri.endswith("/chat/completions"):
        return "openai"
    return None


def cassette_bodies() -> Iterator[tuple[str, str, dict]]:
    """(cassette name + interaction index, provider, request body) for every Anthropic/OpenAI request."""
    for path in sorted(CASSETTES.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for i, interaction in enumerate(data.get("interactions", [])):
            request = interaction["request"]
            provider = provider_of(request.get("uri", ""))
            body = request.get("parsed_body")
            if provider and isinstance(body, dict):
                yield f"{path.relative_to(CASSETTES)}#{i}", provider, body
