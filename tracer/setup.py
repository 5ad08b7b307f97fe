"""Deprecated: setup_tracing live in tracer.spans.setup now (this path warns and re-exports; see tracer/_moved.py)."""

from tracer._moved import moved

__getattr__, __dir__ = moved(__name__)
