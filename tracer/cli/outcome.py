"""What a recording command tells the user at the end: the sessions it wrote, read back from the
store, and (non-zero exit) whatever is not there: spooled spans with the command that moves them in."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from tracer.cli import status
from tracer.store import Store, StoreError
from tracer.store.spool import Spool, spooled_line

EXIT_NOT_STORED = status.NOT_STORED


def check_recorded(command: str, store: Store, session_ids: Iterable[str | None]) -> int:
    """Read back ``session_ids`` from ``store``; print one line for what is missing and return
    :data:`EXIT_NOT_STORED`, or 0 when every session is there."""
    wanted = [s for s in session_ids if s]
    if not wanted:
        return 0
    try:
        with store.reader() as r:
            rows = r.query("SELECT DISTINCT session_id FROM spans WHERE list_contains(?::VARCHAR[], session_id)",
                           [wanted])
    except StoreError as exc:
        print(f"prunegate {command}: could not read the recorded sessions back: {exc}", file=sys.stderr)
        return EXIT_NOT_STORED
    missing = len(set(wanted) - {r["session_id"] for r in rows})
    spool = Spool.for_store(store.path)
    spooled = spool.pending_rows()
    if not missing and not spooled:
        return 0
    print(f"prunegate {command}: {missing} of {len(wanted)} recorded sessions are not in the store {store.path}"
          + (f"; {spooled_line(spooled, spool.path, store.path)}" if spooled else ""), file=sys.stderr)
    return EXIT_NOT_STORED
