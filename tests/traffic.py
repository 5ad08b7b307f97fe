"""Real recorded traffic for the tests: the full ``../shared/traffic`` when it sits beside the
repository, else the small sample shipped in ``tests/data/traffic`` (see tests/data/README.md).

Both have the same layout, so every path below works on either. Tests assert behaviour that holds
on both; the few counts that differ come from here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import yaml

from tracer.traffic.importers import provider_of_uri

FULL = Path(__file__).resolve().parents[2] / "shared" / "traffic"
SAMPLE = Path(__file__).resolve().parent / "data" / "traffic"
TRAFFIC = FULL if FULL.is_dir() else SAMPLE
TAU = TRAFFIC / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
CASSETTES = TRAFFIC / "pydantic-ai-cassettes"
TAU2 = TRAFFIC / "tau2-claude-opus-4-6-airline"  # claude-opus-4-6 calls with their usage (token calibration)
# How many dialogues the τ-bench file holds: tests check that the whole file was read.
TAU_DIALOGUES = 200 if TRAFFIC == FULL else 10


@cache
def tau_conversations() -> list[dict]:
    """The τ-bench airline dialogues: each ``{"task_id", "trial", "traj": [OpenAI chat messages]}``."""
    return json.loads(TAU.read_text())


def tau_spread(n: int) -> list[dict]:
    """At most ``n`` dialogues spread evenly over the file (every dialogue of the sample)."""
    convs = tau_conversations()
    return convs[:: max(1, len(convs) // n)][:n]


def responses_bodies() -> Iterator[tuple[str, dict]]:
    """(cassette name + interaction index, request body) for every recorded OpenAI Responses API request."""
    for path in sorted(CASSETTES.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for i, interaction in enumerate(data.get("interactions", [])):
            request = interaction["request"]
            body = request.get("parsed_body")
            if request.get("uri", "").split("?", 1)[0].rstrip("/").endswith("/v1/responses") and isinstance(body, dict):
                yield f"{path.relative_to(CASSETTES)}#{i}", body


def cassette_bodies() -> Iterator[tuple[str, str, dict]]:
    """(cassette name + interaction index, provider, request body) for every Anthropic/OpenAI request."""
    for path in sorted(CASSETTES.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for i, interaction in enumerate(data.get("interactions", [])):
            request = interaction["request"]
            provider = provider_of_uri(request.get("uri", ""))
            body = request.get("parsed_body")
            if provider and isinstance(body, dict):
                yield f"{path.relative_to(CASSETTES)}#{i}", provider, body
