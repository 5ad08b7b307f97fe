"""Parameter checks shared by the built-in policies.

Every check raises :class:`~policies.errors.PolicyError` naming the policy, the parameter, what it
accepts and what it got, so ``get_policy("mask", keep_last="3")`` fails at construction with a
message a user can act on, not later inside a budget check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import PolicyError


def _got(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def fraction(policy: str, name: str, value: Any) -> float:
    """A number in (0, 1]: a share of the budget."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(f"{policy}: {name} must be a number in (0, 1], got {_got(value)}")
    if not 0 < value <= 1:
        raise PolicyError(f"{policy}: {name} must be in (0, 1], got {value!r}")
    return float(value)


def number(policy: str, name: str, value: Any, *, minimum: float = 0.0) -> float:
    """A number at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(f"{policy}: {name} must be a number >= {minimum:g}, got {_got(value)}")
    if value < minimum:
        raise PolicyError(f"{policy}: {name} must be >= {minimum:g}, got {value!r}")
    return float(value)


def integer(policy: str, name: str, value: Any, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An int in [minimum, maximum] (bools and floats refused: ``keep_last=2.5`` is a mistake)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{policy}: {name} must be an integer >= {minimum}, got {_got(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise PolicyError(f"{policy}: {name} must be {bound}, got {value!r}")
    return value


def optional_integer(policy: str, name: str, value: Any, *, minimum: int = 0) -> int | None:
    return None if value is None else integer(policy, name, value, minimum=minimum)


def choice(policy: str, name: str, value: Any, options: Iterable[str]) -> str:
    options = tuple(options)
    if value not in options:
        raise PolicyError(f"{policy}: {name} must be one of {', '.join(map(repr, options))}, got {_got(value)}")
    return value


def flag(policy: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"{policy}: {name} must be true or false, got {_got(value)}")
    return value


def function(policy: str, name: str, value: Any, signature: str) -> Callable[..., Any]:
    """A callable; ``signature`` documents what it is called with, for the error message."""
    if not callable(value):
        raise PolicyError(f"{policy}: {name} must be a callable {signature}, got {_got(value)}")
    return value


def names(policy: str, name: str, value: Any) -> frozenset[str] | None:
    """``None`` or a list of non-empty strings (a single string is taken as a one-element list)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple | set | frozenset):
        raise PolicyError(f"{policy}: {name} must be a list of names, got {_got(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise PolicyError(f"{policy}: {name}[{i}] must be a non-empty string, got {_got(item)}")
    return frozenset(value)
