"""Recorded traffic in: files read into conversations, conversations recorded as sessions.

``importers.py`` reads every format (Anthropic/OpenAI bodies, OTLP JSON, Collector files, τ-bench,
VCR cassettes) into :class:`Conversation` objects and a :class:`Refusal` for what it cannot read;
``recorded.py`` records them in the store and loads them back; ``events.py`` turns a conversation
into the event stream a replay feeds the gate; ``otlp_json.py``, ``collector_files.py`` and
``genai_spans.py`` read spans; ``committer.py`` commits whole sessions (for ``import`` and for
``prunegate serve``, whose receiver and waiting conversations are in ``tracer.wire``). Import names
from here; they load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_surface

if TYPE_CHECKING:
    from tracer.traffic.committer import SessionCommitter
    from tracer.traffic.events import EventStream, build_events
    from tracer.traffic.importers import (
        FORMATS,
        Conversation,
        Refusal,
        conversation_from_body,
        read_file,
        read_paths,
        shipped_sessions_dir,
    )
    from tracer.traffic.otlp_json import import_otlp_json, read_otlp_json, write_otlp_json
    from tracer.traffic.recorded import (
        ImportReport,
        StoredSessions,
        close_provider,
        import_paths,
        iter_conversations,
        load_conversations,
        select_sessions,
        store_tracer_provider,
    )

__all__ = ["FORMATS", "Conversation", "EventStream", "ImportReport", "Refusal", "SessionCommitter",
           "StoredSessions", "build_events", "close_provider", "conversation_from_body",
           "import_otlp_json", "import_paths", "iter_conversations", "load_conversations",
           "read_file", "read_otlp_json", "read_paths", "select_sessions", "shipped_sessions_dir",
           "store_tracer_provider", "write_otlp_json"]

__getattr__, __dir__ = lazy_surface(__name__, {
    "tracer.traffic.committer": ["SessionCommitter"],
    "tracer.traffic.events": ["EventStream", "build_events"],
    "tracer.traffic.importers": ["FORMATS", "Conversation", "Refusal", "conversation_from_body", "read_file",
                                 "read_paths", "shipped_sessions_dir"],
    "tracer.traffic.otlp_json": ["import_otlp_json", "read_otlp_json", "write_otlp_json"],
    "tracer.traffic.recorded": ["ImportReport", "StoredSessions", "close_provider", "import_paths",
                                "iter_conversations", "load_conversations", "select_sessions",
                                "store_tracer_provider"],
})
