"""Deprecated: import_paths, load_conversations, list_sessions live in tracer.traffic.recorded and tracer.queries.listing now (this path warns and re-exports; see tracer/_moved.py)."""

from tracer._moved import moved

__getattr__, __dir__ = moved(__name__)
