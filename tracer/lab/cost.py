"""Tokens sent → money: a per-model price table and the way providers bill a request's input.

Why a table and not a constant: what a pruning policy saves depends on the model's prices, and on
prompt caching, which pruning can defeat: a provider that caches a request's prefix by itself
(OpenAI: prompts of 1,024 tokens or more, cache hits in 128-token steps) bills the part of a
request that repeats the previous request's prefix at the cached rate. Every prune that removes
early messages changes that prefix, so a smaller context is not always a proportionally cheaper
one. A replay records, per model call, the input tokens, the tokens of the prefix it shares with
the previous request and the tokens of the message the call produced (:attr:`SessionResult.calls`);
:func:`call_cost` bills them.

Prices are US dollars per million tokens. :data:`DEFAULT_PRICES` holds the providers' list prices
as known on :data:`PRICES_AS_OF` (written without access to the live price pages: check them before
relying on a figure); prices change, so a team sets its own with
a JSON or TOML file (``--prices FILE`` or ``$PRUNEGATE_PRICES``) whose ``models`` entries replace
or add to the defaults::

    as_of = "2026-01-15"
    [models."gpt-4o"]
    input = 2.5          # per million uncached input tokens
    cached_input = 1.25  # per million input tokens served from the provider's prompt cache
    output = 10.0
    prefix_cache = "auto"  # the provider caches shared prefixes by itself; "none": no cache reads

A model is found by its exact name, else by the longest table name it starts with
(``gpt-4o-2024-08-06`` → ``gpt-4o``; ``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``).
Anthropic caches only what a request marks with ``cache_control``; replays add no marks, so
Anthropic models bill every input token at the input rate (``prefix_cache = "none"``).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracer.contract.settings import PRICES_ENV
from tracer.errors import PriceError

ENV_PRICES = PRICES_ENV
PRICES_AS_OF = "2025-11-30"
AUTO_CACHE_MIN = 1024  # OpenAI: prompts shorter than this are never cached
AUTO_CACHE_STEP = 128  # OpenAI: cache hits grow in steps of this many tokens beyond the minimum

# (input, cached input, output, prefix cache) in USD per million tokens, as of PRICES_AS_OF.
_DEFAULTS: dict[str, tuple[float, float, float, str]] = {
    # Anthropic: cached reads need cache_control marks, which replays do not add
    "claude-opus-4-5": (5.0, 0.5, 25.0, "none"),
    "claude-opus-4-1": (15.0, 1.5, 75.0, "none"),
    "claude-opus-4": (15.0, 1.5, 75.0, "none"),
    "claude-sonnet-4-5": (3.0, 0.3, 15.0, "none"),
    "claude-sonnet-4": (3.0, 0.3, 15.0, "none"),
    "claude-3-7-sonnet": (3.0, 0.3, 15.0, "none"),
    "claude-3-5-sonnet": (3.0, 0.3, 15.0, "none"),
    "claude-haiku-4-5": (1.0, 0.1, 5.0, "none"),
    "claude-3-5-haiku": (0.8, 0.08, 4.0, "none"),
    "claude-3-haiku": (0.25, 0.03, 1.25, "none"),
    "claude-3-opus": (15.0, 1.5, 75.0, "none"),
    # OpenAI: automatic prefix caching
    "gpt-5": (1.25, 0.125, 10.0, "auto"),
    "gpt-5-mini": (0.25, 0.025, 2.0, "auto"),
    "gpt-5-nano": (0.05, 0.005, 0.4, "auto"),
    "gpt-4.1": (2.0, 0.5, 8.0, "auto"),
    "gpt-4.1-mini": (0.4, 0.1, 1.6, "auto"),
    "gpt-4.1-nano": (0.1, 0.025, 0.4, "auto"),
    "gpt-4o": (2.5, 1.25, 10.0, "auto"),
    "gpt-4o-mini": (0.15, 0.075, 0.6, "auto"),
    "o1": (15.0, 7.5, 60.0, "auto"),
    "o3": (2.0, 0.5, 8.0, "auto"),
    "o3-mini": (1.1, 0.55, 4.4, "auto"),
    "o4-mini": (1.1, 0.275, 4.4, "auto"),
}
PREFIX_CACHES = ("auto", "none")


@dataclass(frozen=True)
class Price:
    """One model's prices (USD per million tokens) and how its provider caches prompts."""

    input: float
    cached_input: float
    output: float
    prefix_cache: str = "none"

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "cached_input": self.cached_input, "output": self.output,
                "prefix_cache": self.prefix_cache}


DEFAULT_PRICES: dict[str, Price] = {name: Price(*p) for name, p in _DEFAULTS.items()}


@dataclass
class PriceTable:
    """Prices by model name, with the date they were taken and where they came from."""

    models: dict[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    as_of: str = PRICES_AS_OF
    source: str = "default"

    def lookup(self, model: str | None) -> tuple[str, Price] | None:
        """(table name, price) for a model: exact, else the longest name it starts with."""
        if not model:
            return None
        m = model.lower().split("/")[-1]  # "openai/gpt-4o" -> "gpt-4o"
        if m in self.models:
            return m, self.models[m]
        best = max((n for n in self.models if m.startswith(n)), key=len, default=None)
        return (best, self.models[best]) if best is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"as_of": self.as_of, "source": self.source,
                "models": {n: p.to_dict() for n, p in sorted(self.models.items())}}


def load_prices(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The default table, with ``path`` (else ``$PRUNEGATE_PRICES``, when set) laid over it."""
    path = path or os.environ.get(ENV_PRICES) or None
    table = PriceTable()
    if path is None:
        return table
    p = Path(path)
    try:
        text = p.read_text()
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise PriceError(f"price file {p}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise PriceError(f"price file {p}: expected a 'models' table of model name -> prices")
    for name, entry in data["models"].items():
        table.models[str(name).lower()] = _price(p, str(name), entry)
    table.as_of = str(data.get("as_of", "unknown"))
    table.source = str(p)
    return table


def _price(path: Path, name: str, entry: Any) -> Price:
    if not isinstance(entry, Mapping):
        raise PriceError(f"price file {path}: model {name!r}: expected a table of prices")
    try:
        inp = float(entry["input"])
        out = float(entry["output"])
        cached = float(entry.get("cached_input", inp))
    except (KeyError, TypeError, ValueError) as exc:
        raise PriceError(f"price file {path}: model {name!r}: needs numeric 'input' and 'output' ({exc})") from None
    cache = str(entry.get("prefix_cache", "none"))
    if cache not in PREFIX_CACHES:
        raise PriceError(f"price file {path}: model {name!r}: prefix_cache must be one of {PREFIX_CACHES}")
    if min(inp, out, cached) < 0:
        raise PriceError(f"price file {path}: model {name!r}: prices cannot be negative")
    return Price(inp, cached, out, cache)


def cached_tokens(price: Price, input_tokens: int, shared_prefix: int) -> int:
    """Input tokens the provider serves from its prompt cache for one request."""
    if price.prefix_cache != "auto" or input_tokens < AUTO_CACHE_MIN or shared_prefix < AUTO_CACHE_MIN:
        return 0
    return min(input_tokens, AUTO_CACHE_MIN + (shared_prefix - AUTO_CACHE_MIN) // AUTO_CACHE_STEP * AUTO_CACHE_STEP)


def call_cost(price: Price, input_tokens: int, shared_prefix: int, output_tokens: int) -> float:
    """US dollars one model call costs: uncached input, cached input and output at their rates."""
    cached = cached_tokens(price, input_tokens, shared_prefix)
    return ((input_tokens - cached) * price.input + cached * price.cached_input
            + output_tokens * price.output) / 1_000_000


def session_cost(price: Price, calls: Sequence[tuple[int, int, int]]) -> float:
    """US dollars of every model call of one replayed session."""
    return sum(call_cost(price, i, s, o) for i, s, o in calls)


def price_results(conversations: Sequence[Any], results: Sequence[Sequence[Any]], table: PriceTable,
                  default_model: str | None = None) -> dict[str, int]:
    """Set ``cost`` on every :class:`SessionResult` (``results[arm][session]``, sessions in the order
    of ``conversations``). A session's model is its recorded ``model``, else ``default_model``;
    a model without a price leaves ``cost`` None. Returns the sessions per model name used
    (``"(unpriced) <model>"`` for those left without a cost)."""
    models: dict[str, int] = {}
    prices: list[Price | None] = []
    for conv in conversations:
        model = getattr(conv, "model", None) or default_model
        found = table.lookup(model)
        key = found[0] if found else f"(unpriced) {model or 'no model recorded'}"
        models[key] = models.get(key, 0) + 1
        prices.append(found[1] if found else None)
    for rs in results:
        for r, price in zip(rs, prices, strict=True):
            r.cost = None if price is None else round(session_cost(price, r.calls), 6)
    return models


__all__ = [
    "DEFAULT_PRICES", "ENV_PRICES", "PRICES_AS_OF", "Price", "PriceError", "PriceTable", "cached_tokens",
    "call_cost", "load_prices", "price_results", "session_cost",
]
