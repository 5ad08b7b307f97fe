"""Replay sessions traced with the code of a checkout and print every stored span, for a diff.

    .venv/bin/python scripts/span_dump.py CHECKOUT TRAFFIC SESSIONS BUDGET > spans.txt

CHECKOUT is a source tree (``.`` or an old one, e.g. ``git archive main | tar -x -C /tmp/old``);
TRAFFIC a file or directory ``prunegate import`` reads. The first SESSIONS conversations are
replayed under recency, salience and head_tail, gated and ungated, with BUDGET tokens, streamed
tool results and content capture, into a temporary store. Each span is printed as one JSON line:
name, parent's name, kind, status code and message, attributes (without the ids and durations that
differ from run to run), events, link count, service name, scope, whether it has a session id, seq.
Lines are sorted: two checkouts that record the same spans print the same file (docs/performance.md).
"""

import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = sys.argv[1]
sys.path.insert(0, ROOT)
from tracer.lab.compare import arms, parse_policies, run_replays  # noqa: E402
from tracer.store import Store  # noqa: E402
from tracer.traffic.importers import Conversation, read_paths  # noqa: E402

data = Path(sys.argv[2])
convs = [c for c in read_paths([data]) if isinstance(c, Conversation)][: int(sys.argv[3])]
specs = arms(parse_policies("recency,salience,head_tail"), "both", budget=int(sys.argv[4]), stream_results=2)
with tempfile.TemporaryDirectory() as tmp:
    run_replays(convs, specs, workers=1, store_path=Path(tmp) / "s", capture_content=True)
    store = Store(Path(tmp) / "s")
    with store.reader() as r:
        rows = r.query("SELECT span_id, parent_span_id, name, kind, status_code, status_message, attributes, events, links, resource, scope_name, session_id, seq FROM spans WHERE name <> 'prunegate.tracer.stats'")
names = {row["span_id"]: row["name"] for row in rows}
out = []
for row in rows:
    attrs = json.loads(row["attributes"])
    for key in ("prunegate.session.id", "session.id", "gen_ai.conversation.id", "prunegate.replay.seconds"):
        attrs.pop(key, None)
    for key in [k for k in attrs if "span_id" in k or "trace_id" in k]:
        attrs.pop(key)
    out.append(json.dumps([row["name"], names.get(row["parent_span_id"]), row["kind"], row["status_code"],
                           row["status_message"], json.loads(re.sub(r"replay-[0-9a-f]{16}", "replay-?", json.dumps(attrs))), json.loads(row["events"]), len(json.loads(row["links"])),
                           json.loads(row["resource"]).get("service.name"), row["scope_name"],
                           row["session_id"] is not None, row["seq"]], sort_keys=True))
for line in sorted(out):
    print(line)
