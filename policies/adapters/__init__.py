"""Adapters that run the trimmers people already use (LangChain's ``trim_messages``, ...) under the gate.

An adapter converts the context's messages to the trimmer's own types with an id mapping, calls
the trimmer unchanged, and turns what it dropped into an eviction proposal. See
docs/writing-a-policy.md for the pattern.
"""
