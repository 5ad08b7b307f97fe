"""prunegate's domain: a context window as structural units, the commit-boundary gate, spill
stores, provider validators and the pluggable pruning policies that run under the gate."""

from .context import Context, Spilled, Unit
from .decision import Decision, DecisionKind
from .errors import (
    DuplicateToolIdError,
    EvictedMessageError,
    HardCeilingExceeded,
    OrphanResultError,
    PolicyError,
    PruneBoundaryViolation,
    SettingsError,
    StructureError,
)
from .gate import Gate
from .limits import check_limits, limits_problem
from .messages import Block, Message, text_message, tool_result, tool_use
from .observer import MultiObserver, Observer
from .policy import ContextView, Eviction, Policy, Proposal, Rewrite, Summary, UnitView
from .reference import prune_context
from .registry import available, get_policy, parse_params, register
from .runtime import Runtime, build_runtime
from .spill import DirectorySpillStore, MemorySpillStore, SpillStore
from .tokens import ApproxTokenCounter, TokenCounter
from .validate import Violation, is_valid, validate

__all__ = [
    "ApproxTokenCounter",
    "Block",
    "Context",
    "ContextView",
    "Decision",
    "DecisionKind",
    "DirectorySpillStore",
    "DuplicateToolIdError",
    "EvictedMessageError",
    "Eviction",
    "Gate",
    "HardCeilingExceeded",
    "MemorySpillStore",
    "Message",
    "MultiObserver",
    "Observer",
    "OrphanResultError",
    "Policy",
    "PolicyError",
    "Proposal",
    "PruneBoundaryViolation",
    "Rewrite",
    "Runtime",
    "SettingsError",
    "SpillStore",
    "Spilled",
    "StructureError",
    "Summary",
    "TokenCounter",
    "Unit",
    "UnitView",
    "Violation",
    "available",
    "build_runtime",
    "check_limits",
    "get_policy",
    "is_valid",
    "limits_problem",
    "parse_params",
    "prune_context",
    "register",
    "text_message",
    "tool_result",
    "tool_use",
    "validate",
]
