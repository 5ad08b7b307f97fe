"""The gate's settings (budget, hard ceiling, mode), checked in one place.

``Gate``, ``PruneGuard``, ``ShadowGuard``, every framework adapter (through the guard it is given)
and the command line all call :func:`limits_problem`, so ``PruneGuard("recency", budget="3000")``
fails at construction with the same sentence ``prunegate replay --budget`` would print, instead of
failing open at the first request.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import SettingsError

MODES = ("grow", "shrink")


def _count_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not a token count (a finite number above zero; bools and strings refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name} must be a positive token count (a number), got {value!r} ({type(value).__name__})"
    if not math.isfinite(value) or value <= 0:
        return f"{name} must be a positive token count (finite), got {value!r}"
    return None


def limits_problem(budget: Any, hard_ceiling: Any = None, mode: Any = "grow", *,
                   budget_required: bool = True, names: tuple[str, str] = ("budget", "hard_ceiling")) -> str | None:
    """What is wrong with these settings, as one sentence, or None.

    ``names`` are how the caller's user spells the two limits (``("--budget", "--hard-ceiling")``
    on the command line). ``budget_required=False`` lets the budget be None (shadow mode).
    """
    b_name, c_name = names
    if budget is not None or budget_required:
        problem = _count_problem(b_name, budget)
        if problem:
            return problem
    if hard_ceiling is not None:
        problem = _count_problem(c_name, hard_ceiling)
        if problem:
            return problem.replace("(a number)", "(a number) or None")
        if budget is not None and hard_ceiling < budget:
            return f"{c_name} ({hard_ceiling}) must be at least the {b_name.lstrip('-')} ({budget})"
    if mode not in MODES:
        return f"mode must be {' or '.join(map(repr, MODES))}, got {mode!r}"
    return None


def check_limits(budget: Any, hard_ceiling: Any = None, mode: Any = "grow", *, where: str = "",
                 budget_required: bool = True) -> None:
    """Raise :class:`~policies.errors.SettingsError` (one line, ``where`` first) if the settings are wrong."""
    problem = limits_problem(budget, hard_ceiling, mode, budget_required=budget_required)
    if problem:
        raise SettingsError(f"{where}: {problem}" if where else problem)
