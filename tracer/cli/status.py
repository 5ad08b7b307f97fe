"""The ``prunegate`` command's exit statuses, named once (every command returns one of these)."""

from __future__ import annotations

SUCCESS = 0
"""The command did what it was asked and found nothing wrong."""

FOUND_PROBLEMS = 1
"""The command ran to the end but some input was invalid or refused (``validate``, ``import``)."""

ERROR = 2
"""The command could not do what it was asked: bad arguments, unreadable input, no store (argparse's 2 too)."""

BUSY = 3
"""The store was busy (``compact``): nothing lost, run it again."""
