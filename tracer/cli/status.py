"""The ``prunegate`` command's exit statuses, named once (every command returns one of these), and
:func:`failed`, the one place an expected failure becomes one line and a status."""

from __future__ import annotations

import sys

from policies.errors import PrunegateError

SUCCESS = 0
"""The command did what it was asked and found nothing wrong."""

FOUND_PROBLEMS = 1
"""The command ran to the end but some input was invalid or refused (``validate``, ``import``)."""

ERROR = 2
"""The command could not do what it was asked: bad arguments, unreadable input, no store (argparse's 2 too)."""

NOT_STORED = 3
"""Some of what the command recorded did not reach the store, or the store was busy (``compact``):
nothing is lost; the line printed says where it is and which command moves it in (``recover``)."""

BUSY = NOT_STORED


def failed(command: str, exc: PrunegateError) -> int:
    """An expected failure of ``prunegate <command>`` as one line on stderr, and its exit status.

    Every command raises instead of printing and returning a number: a :class:`~tracer.errors.UsageError`
    reads as argparse's usage errors (``prunegate <command>: error: ...``, :data:`ERROR`); any other
    :class:`~policies.errors.PrunegateError` (a :class:`~tracer.errors.CommandError`, a store, policy,
    price or settings error) as ``prunegate <command>: ...`` with the error's ``exit_status`` when it
    names one (:data:`FOUND_PROBLEMS` when some input was refused), else :data:`ERROR` (a usage
    problem, or the command could not do what it was asked). No traceback: the text says where and why.
    """
    from tracer.errors import UsageError

    text = " ".join(str(exc).split("\n")) or type(exc).__name__
    print(f"prunegate {command}: {'error: ' if isinstance(exc, UsageError) else ''}{text}", file=sys.stderr)
    code = getattr(exc, "exit_status", None)
    return code if isinstance(code, int) else ERROR
