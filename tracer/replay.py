"""Deprecated: ReplaySpec, replay_session live in tracer.lab and tracer.lab.replay now (this path warns and re-exports; see tracer/_moved.py)."""

from tracer._moved import moved

__getattr__, __dir__ = moved(__name__)
