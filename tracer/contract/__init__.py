"""The ground floor under the tracer's wings: what every wing shares, importing none of them.

``names.py`` is every span name and attribute key prunegate writes or reads (``prunegate.*`` and
the OpenTelemetry GenAI ``gen_ai.*`` keys; the contract of docs/spans.md); ``records.py`` is the
shape of a span record, which the spans wing writes and the store converts; ``settings.py`` names
every ``PRUNEGATE_*`` environment variable. Standard library only, imported as modules
(``from tracer.contract import names as sn``), so any wing, the store included, may stand on it
without an arrow climbing back up (``tests/tracer/test_floors.py``).
"""

from __future__ import annotations

from tracer.contract.records import RECORD_FIELDS, RecordMeta
from tracer.contract.settings import ENVIRONMENT

__all__ = ["ENVIRONMENT", "RECORD_FIELDS", "RecordMeta"]
