"""The ``prunegate`` command's exit statuses, named once (every command returns one of these)."""

from __future__ import annotations

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
