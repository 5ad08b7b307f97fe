"""Text is valid Unicode at every door: a lone surrogate is replaced (U+FFFD) and counted on the
span that carried it, and a store that already holds one still reads (issue #26).

Every test writes through the real door (the command line's ``import``, ``annotate``, a
``PruneGuard`` on a store, the Python writer of span rows) and reads the store back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracer.cli import main
from tracer.guard import PruneGuard
from tracer.store import Store
from tracer.store.rows import rows_to_table
from tracer.store.schema import ARROW_SCHEMA
from tracer.store.segments import StoreLayout, new_segment_name
from tracer.store.text import scrub, scrub_text

ISSUE_LINE = '{"id":"s","model":"gpt-4o","messages":[{"role":"user","content":"\\ud800"}]}\n'
REPLACED = "prunegate.text.replaced"


def _attrs(store: Path, name: str) -> list[dict]:
    rows = Store(store).query("SELECT attributes FROM spans WHERE name = ?", [name])
    return [json.loads(r["attributes"]) for r in rows]


def test_scrub_replaces_each_lone_surrogate_and_keeps_pairs():
    assert scrub_text("a\ud800b\udfffc") == ("a\ufffdb\ufffdc", 2)
    assert scrub_text("plain") == ("plain", 0)
    value = {"k\udc80": ["ok", "\ud83d", {"n": 1}], "emoji": "\U0001f600"}
    out, n = scrub(value)
    assert n == 2 and out == {"k\ufffd": ["ok", "\ufffd", {"n": 1}], "emoji": "\U0001f600"}
    assert scrub(value["emoji"]) == ("\U0001f600", 0)


def test_the_issue_line_imports_and_every_command_reads_the_store(tmp_path, capsys):
    src = tmp_path / "s.jsonl"
    src.write_text(ISSUE_LINE)
    store = tmp_path / "S"
    assert main(["import", str(src), "--store", str(store)]) == 0
    for argv in (["sessions"], ["compact"], ["sessions"]):
        assert main([*argv, "--store", str(store)]) == 0, capsys.readouterr()
    sessions = Store(store).sessions()
    assert len(sessions) == 1
    (root,) = _attrs(store, "prunegate.session")
    assert root[REPLACED] == 1  # counted on the session
    (msg,) = Store(store).query("SELECT attributes FROM spans WHERE name = 'prunegate.message'")
    assert "\ufffd" in json.loads(msg["attributes"])["prunegate.message.content"]
    assert main(["replay", "--store", str(store), "--policy", "recency", "--budget", "100"]) == 0, capsys.readouterr()
    assert {s["source"] for s in Store(store).sessions()} == {"import", "replay"}


def _segment(store: Path, attributes_json: list[str], session: str) -> None:
    """A segment as a version before tracer.store.text wrote one: JSON text as given."""
    n = len(attributes_json)
    table = rows_to_table([{
        "trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}", "name": "prunegate.session" if i == 0 else "x",
        "start_time_ns": i, "end_time_ns": i + 1, "attributes": {"prunegate.session.id": session},
    } for i in range(n)])
    table = table.set_column(table.schema.get_field_index("attributes"), "attributes",
                             pa.array(attributes_json, pa.string()))
    layout = StoreLayout(store)
    layout.ensure()
    pq.write_table(table.cast(ARROW_SCHEMA), layout.segments / new_segment_name())


def test_a_bad_value_already_in_a_store_hides_nothing_and_compaction_repairs_it(tmp_path):
    store = tmp_path / "S"
    bad = '{"prunegate.session.id":"a","note":"\\ud800 x"}'  # as a version before tracer.store.text wrote it
    _segment(store, ['{"prunegate.session.id":"a"}', bad], "a")
    src = tmp_path / "ok.jsonl"
    src.write_text('{"id":"ok","model":"gpt-4o","messages":[{"role":"user","content":"fine"}]}\n')
    assert main(["import", str(src), "--store", str(store)]) == 0
    before = Store(store).count()
    assert before == 2 + 4 and len(Store(store).sessions()) == 2
    notes = [r["n"] for r in Store(store).query("SELECT attributes->>'note' AS n FROM spans WHERE name = 'x'")]
    assert notes == ["\ufffd x"]
    assert main(["compact", "--store", str(store)]) == 0
    assert Store(store).count() == before and len(Store(store).sessions()) == 2
    assert Store(store).query("SELECT attributes->>'note' AS n FROM spans WHERE name = 'x'") == [{"n": "\ufffd x"}]


def test_annotation_text_from_bad_argv_bytes_is_replaced_and_counted(tmp_path):
    src = tmp_path / "ok.jsonl"
    src.write_text('{"id":"ok","model":"gpt-4o","messages":[{"role":"user","content":"fine"}]}\n')
    store = tmp_path / "S"
    assert main(["import", str(src), "--store", str(store)]) == 0
    sid = Store(store).sessions()[0]["session_id"]
    note = b"bad \xff byte".decode("utf-8", "surrogateescape")  # what argv holds for a non-UTF-8 byte
    assert main(["annotate", sid, "--label", "bug", "--note", note, "--store", str(store)]) == 0
    (a,) = _attrs(store, "prunegate.annotation")
    assert a[REPLACED] == 1 and "bad \ufffd byte" in json.dumps(a, ensure_ascii=False)


def test_guard_with_a_surrogate_in_the_agents_messages_records_and_reads(tmp_path):
    store = tmp_path / "S"
    with PruneGuard("recency", budget=100_000, store=store, capture_content=True) as guard:
        body = {"model": "claude-x", "max_tokens": 64,
                "messages": [{"role": "user", "content": "hi \ud800 there"}]}
        sent = guard.gate(body)
        assert sent["messages"][0]["content"] == "hi \ufffd there"  # what goes to the provider is valid too
        assert guard.errors == 0 and guard.text_replaced == 1
    root = json.loads(Store(store).query("SELECT attributes FROM spans WHERE name = 'prunegate.session'")[0]["attributes"])
    assert root[REPLACED] == 1  # counted on the session
    rows = Store(store).query("SELECT attributes FROM spans WHERE attributes::VARCHAR LIKE '%hi \ufffd there%'")
    assert rows, "the message text was not stored"
    assert len(Store(store).sessions()) == 1
