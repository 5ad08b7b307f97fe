"""Exceptions. Loud ones are raised only where the caller asked for a guarantee."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .decision import Decision


class PrunegateError(Exception):
    """Base class of prunegate's own errors."""


class StructureError(PrunegateError, ValueError):
    """Input that does not describe a well-formed conversation; the message says where and why."""


class DuplicateToolIdError(StructureError):
    """A tool call id was issued (or answered) twice."""


class OrphanResultError(StructureError):
    """A tool result answers a call the context has never seen."""


class EvictedMessageError(PrunegateError, LookupError):
    """A write targeted a message that is no longer in the context (pruned or spilled).

    Raised instead of silently writing into nothing: the second failure of the source document.
    """


class PruneBoundaryViolation(PrunegateError, RuntimeError):
    """A prune set breaks the commit-boundary rule (the source document's reference check).

    A ``RuntimeError`` as the source document specifies, and a :class:`PrunegateError` like the rest.
    """


class HardCeilingExceeded(PrunegateError, RuntimeError):
    """The context cannot be held under the hard ceiling even after spilling every closed unit."""

    def __init__(self, message: str, decision: Decision | None = None) -> None:
        super().__init__(message)
        self.decision = decision


class PolicyError(PrunegateError, ValueError):
    """Unknown policy, or bad policy parameters."""


class SettingsError(PolicyError):
    """A gate setting (budget, hard ceiling, mode) of the wrong type or out of range (:mod:`policies.limits`)."""
