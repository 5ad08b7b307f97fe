"""Policies by name: the built-ins, plus third-party ones from the ``prunegate.policies`` entry point."""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from .errors import PolicyError
from .policy import Policy

ENTRY_POINT_GROUP = "prunegate.policies"

# name -> "module:attribute" of a factory (a class or function taking keyword parameters)
BUILTINS: dict[str, str] = {
    "recency": "policies.builtin.recency:RecencyPolicy",
    "salience": "policies.builtin.salience:SaliencePolicy",
    "similarity": "policies.builtin.similarity:SimilarityPolicy",
    "mask": "policies.builtin.mask:MaskPolicy",
    "head_tail": "policies.builtin.head_tail:HeadTailPolicy",
    "summarize": "policies.builtin.summarize:SummarizePolicy",
    "tiered": "policies.builtin.tiered:TieredPolicy",
    # emulations of provider-side context editing (docs/policies.md)
    "clear_tool_uses": "policies.builtin.clear_tool_uses:ClearToolUsesPolicy",
    "compact": "policies.builtin.compact:CompactPolicy",
    "langchain_trim": "policies.adapters.langchain:LangChainTrimPolicy",
}

_registered: dict[str, Callable[..., Policy]] = {}


def register(name: str, factory: Callable[..., Policy]) -> None:
    """Register a policy factory under ``name`` (for code that does not ship an entry point)."""
    _registered[name] = factory


def available() -> list[str]:
    names = set(BUILTINS) | set(_registered)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def _factory(name: str) -> Callable[..., Policy]:
    if name in _registered:
        return _registered[name]
    if name in BUILTINS:
        module, _, attr = BUILTINS[name].partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise PolicyError(f"policy {name!r} cannot be imported ({BUILTINS[name]}): {exc}") from exc
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                return ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin is reported by name
                raise PolicyError(f"policy {name!r} (entry point {ep.value}) failed to load: {exc}") from exc
    names = available()
    close = difflib.get_close_matches(str(name), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise PolicyError(f"unknown policy {name!r}{hint}; available: {', '.join(names)}")


def get_policy(name: str, **params: Any) -> Policy:
    """A policy instance by name, its parameters checked against the factory's signature."""
    factory = _factory(name)
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        known = [p.name for p in sig.parameters.values()
                 if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        unknown = [k for k in params if k not in sig.parameters]
        if unknown and not accepts_any:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PolicyError(f"policy {name!r} has no parameter {unknown[0]!r}{hint}; "
                              f"it takes: {', '.join(known) or 'none'}")
        missing = [p.name for p in sig.parameters.values()
                   if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                   and p.name not in params and p.name != "self"]
        if missing:
            raise PolicyError(f"policy {name!r} needs the parameter {missing[0]!r}")
    try:
        policy = factory(**params)
    except PolicyError:
        raise  # already says which policy and which parameter
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"policy {name!r}: {exc}") from exc
    if not isinstance(policy, Policy):
        raise PolicyError(f"policy {name!r} did not produce a policy (needs 'name' and 'propose(view)')")
    return policy


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``k=v`` strings from a command line; values parsed as JSON when they are JSON, else strings."""
    import json

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PolicyError(f"--param {pair!r}: expected key=value")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out
