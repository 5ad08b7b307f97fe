"""Deprecated: redact_patterns, Redactor live in tracer.spans.redact now (this path warns and re-exports; see tracer/_moved.py)."""

from tracer._moved import moved

__getattr__, __dir__ = moved(__name__)
