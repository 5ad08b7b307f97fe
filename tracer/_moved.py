"""Old import paths that earlier docs and users' code named, kept working with a DeprecationWarning.

Each old module (``tracer/instrument.py``, ...) is a few lines: :func:`moved` gives it a PEP 562
``__getattr__`` that warns (pointing at the caller's import line) and returns the name from where it
lives now. :data:`MOVED` lists every one, so a test can check that each still resolves.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

MOVED: dict[str, dict[str, Sequence[str]]] = {
    "tracer.instrument": {"tracer.guard": ["PruneGuard", "assistant_message", "tool_calls", "tool_results_message"]},
    "tracer.shadow": {"tracer.guard": ["ShadowGuard", "ShadowReport"]},
    "tracer.session": {"tracer.spans.session": ["TracedSession", "SessionConfig"]},
    "tracer.observer": {"tracer.spans.observer": ["SpanObserver"]},
    "tracer.setup": {"tracer.spans.setup": ["setup_tracing"]},
    "tracer.redact": {"tracer.spans.redact": ["redact_patterns", "Redactor"]},
    "tracer.pipeline": {"tracer.spans.pipeline": ["ReliableSpanProcessor"]},
    "tracer.store_sink": {"tracer.store.sink": ["StoreSink"]},
    "tracer.recorded": {"tracer.traffic.recorded": ["import_paths", "load_conversations"],
                        "tracer.queries.listing": ["list_sessions"]},
    "tracer.replay": {"tracer.lab": ["ReplaySpec"], "tracer.lab.replay": ["replay_session"]},
    "tracer.compare": {"tracer.lab.compare": ["compare", "run_replays", "aggregate", "paired_differences"]},
}


def moved(old: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the old module ``old`` (a key of :data:`MOVED`)."""
    where: Mapping[str, str] = {name: new for new, names in MOVED[old].items() for name in names}

    def __getattr__(name: str) -> Any:
        new = where.get(name)
        if new is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old} is deprecated; import {name} from {new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__
