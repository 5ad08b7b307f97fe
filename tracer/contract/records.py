"""The span record: the plain tuple prunegate's own sessions write instead of a span object.

Its shape is the contract between the wing that writes records (:mod:`tracer.spans.direct`) and the
one that converts them to Arrow (:func:`tracer.store.rows.records_to_table`, and the C accelerator
``tracer/store/_columns.c``), so it sits on the ground floor: the store reads records without
importing the spans wing or the OpenTelemetry SDK. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

# A span record is a plain tuple (cheap to make on the agent's thread, nothing to copy later):
RECORD_FIELDS = (
    "name", "span_id", "parent_id", "kind", "attributes", "clean", "start", "end", "status", "links",
    "events", "context", "meta",
)  # fmt: skip
# span_id, parent_id: ints (parent_id None for a root); kind: an OTel SpanKind member; attributes: a
# dict, already cleaned when ``clean`` is True, else as the caller gave it (``meta.clean_chunk``
# cleans it); status: an OTel Status; links: a tuple of OTel Link; events: a tuple of span events,
# each an OTel Event or a held event (below); context: a SpanContext giving the trace id, trace flags
# and trace state (the session's root); meta: a :class:`RecordMeta`, shared by every record of a provider.
R_NAME, R_SPAN, R_PARENT, R_KIND, R_ATTRS, R_CLEAN, R_START, R_END, R_STATUS, R_LINKS, R_EVENTS, R_CTX, R_META = \
    range(len(RECORD_FIELDS))

# A held event: a span event as a plain (name, time in ns, attributes) tuple, its attributes a dict
# already as the SDK stores them. What a session below ``full`` detail holds per message event and unit
# closure for its next check span (tracer.spans.session): one object where an OTel Event is two, on the
# agent's thread (docs/performance.md, round 9). Readers turn it into an Event where one is wanted.
HeldEvent = tuple[str, int, dict[str, Any]]
E_NAME: Final = 0
E_TIME: Final = 1
E_ATTRS: Final = 2


def event_parts(event: Any) -> tuple[str, int, Any]:
    """(name, time in ns, attributes) of a span event of a record: a held event or an OTel Event."""
    if type(event) is tuple:
        return event
    return event.name, event.timestamp, event.attributes


class RecordMeta(Protocol):
    """What every record of one provider shares (the spans wing's ``DirectWriter``): its resource,
    its instrumentation scope, and the attribute cleaning rule the store applies to records written
    with ``clean`` False (the SDK's own rule, which only the spans wing may import)."""

    resource: Any
    scope: Any

    def clean_chunk(self, dicts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]: ...


__all__ = ["E_ATTRS", "E_NAME", "E_TIME", "RECORD_FIELDS", "HeldEvent", "R_ATTRS", "R_CLEAN", "R_CTX", "R_END", "R_EVENTS", "R_KIND", "R_LINKS", "R_META",
           "R_NAME", "R_PARENT", "R_SPAN", "R_START", "R_STATUS", "RecordMeta", "event_parts"]
