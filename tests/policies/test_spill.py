"""Spill stores and re-injection: durable before removal, exact messages back in place."""

from __future__ import annotations

import json

import pytest

from policies import (
    Block,
    Context,
    DecisionKind,
    DirectorySpillStore,
    Gate,
    MemorySpillStore,
    Message,
    Observer,
    StructureError,
    text_message,
    tool_result,
    tool_use,
)
from tests.invariants import Scripted, assert_consistent
from tests.scenarios import history, parallel_batch, result


def rich_messages() -> list[Message]:
    return [
        Message("a1", "assistant", [
            Block("thinking", text="hmm", extra={"signature": "sig=="}),
            Block("text", text="calling", extra={"cache_control": {"type": "ephemeral"}}),
            tool_use("c1", "lookup", {"q": ["x", 1, None]}),
        ], extra={"name": "bot"}, form="list", seq=7, tokens=3, origin="anthropic"),
        Message("r1", "user", [tool_result("c1", [{"type": "text", "text": "found"}], is_error=False)], seq=8),
    ]


@pytest.fixture(params=["memory", "directory"])
def store(request, tmp_path):
    return MemorySpillStore() if request.param == "memory" else DirectorySpillStore(tmp_path / "spill")


def test_stores_give_back_exactly_what_they_were_given(store):
    msgs = rich_messages()
    store.put("k1", msgs)
    assert store.get("k1") == msgs and len(store) == 1
    store.delete("k1")
    store.delete("k1")  # deleting twice is harmless
    assert len(store) == 0


def test_directory_store_refuses_keys_that_are_not_plain_file_names(tmp_path):
    store = DirectorySpillStore(tmp_path)
    for key in ("", "../x", ".hidden", "a/b"):
        with pytest.raises(StructureError, match="not a plain file name"):
            store.put(key, [])


def test_a_corrupt_spill_file_is_named_in_the_error(tmp_path):
    store = DirectorySpillStore(tmp_path)
    (tmp_path / "k.json").write_text("[{")
    with pytest.raises(StructureError, match=r"k\.json: spilled unit is not valid JSON"):
        store.get("k")


def over_ceiling(ctx: Context) -> int:
    """A hard ceiling the context is just over while its batch is in flight."""
    return ctx.tokens - 1


def spilling_setup() -> tuple[Context, list[Message]]:
    ctx = Context(session_id="s/1")
    history(ctx, turns=2)
    parallel_batch(ctx)
    ctx.append(result("call_weather", "sunny"))
    return ctx, [m.copy() for m in ctx.messages]


def test_spill_writes_the_file_before_the_unit_leaves_the_context(tmp_path):
    ctx, _ = spilling_setup()
    store = DirectorySpillStore(tmp_path)
    seen = []

    class CheckDisk(Observer):
        def on_message(self, c, message, event, **info):
            if event == "remove" and str(info.get("cause", "")).startswith("spilled:"):
                key = info["cause"].split(":", 1)[1]
                on_disk = json.loads((tmp_path / f"{key}.json").read_text())
                seen.append((message.id, [m["id"] for m in on_disk]))

    ctx.observer = CheckDisk()
    d = Gate(Scripted(), budget=50, hard_ceiling=over_ceiling(ctx), spill_store=store).check(ctx)
    assert d.kind == DecisionKind.SPILLED and seen
    for mid, on_disk in seen:
        assert mid in on_disk  # the removed message was already durable
    assert "/" not in "".join(p.name for p in tmp_path.iterdir())
    assert not list(tmp_path.glob(".spill-*"))  # no temporary file left behind


def test_a_failed_spill_write_leaves_the_unit_in_the_context(tmp_path):
    ctx = Context()
    history(ctx, turns=0)
    odd = ctx.append(Message("", "assistant", [Block("text", text="x" * 400, extra={"not_json": {1, 2}})]))
    ctx.append(text_message("", "user", "go on"))
    parallel_batch(ctx)
    store = DirectorySpillStore(tmp_path)
    gate = Gate(Scripted(), budget=20, hard_ceiling=over_ceiling(ctx), spill_store=store)
    # the oldest closed unpinned unit is `odd`, whose content cannot be serialised
    assert next(u for u in ctx.units.values() if u.id not in ctx.pinned_unit_ids()).message_ids == [odd.id]
    with pytest.raises(TypeError):
        gate.check(ctx)
    assert odd.id in ctx and not ctx.spilled and len(store) == 0
    assert not list(tmp_path.glob(".spill-*"))
    assert_consistent(ctx)


@pytest.mark.parametrize("how", ["unit", "message", "call"])
def test_reinjection_on_demand_restores_the_exact_messages_in_place(tmp_path, how):
    ctx = Context()
    history(ctx, turns=1)
    a = ctx.append(Message("", "assistant", [Block("text", text="looking up"), tool_use("old_call", "f", {"k": 1})]))
    r = ctx.append(Message("", "tool", [tool_result("old_call", "old data " * 20)]))
    ctx.append(text_message("", "user", "and now the batch"))
    parallel_batch(ctx)
    order = [m.id for m in ctx.messages]
    originals = {m.id: m.copy() for m in ctx.messages}
    store = DirectorySpillStore(tmp_path)
    step0, okc0 = ctx.messages[2], ctx.messages[3]
    gate = Gate(Scripted(), budget=20, hard_ceiling=ctx.tokens - step0.tokens - okc0.tokens - 1, spill_store=store)
    d = gate.check(ctx)
    assert len(d.spilled_units) == 3
    uid = next(u for u in d.spilled_units if u in ctx.spilled and a.id in ctx.spilled[u].message_ids)
    assert a.id not in ctx and r.id not in ctx
    key = {"unit": uid, "message": r.id, "call": "old_call"}[how]
    file = tmp_path / f"{ctx.spilled[uid].key}.json"
    assert file.exists()
    back = gate.reinject(ctx, key)
    assert back.kind == DecisionKind.REINJECTED and back.reinjected_units == [uid]
    assert ctx.unit_of(a.id).id == uid and ctx.unit_of(r.id).id == uid
    assert [m.id for m in ctx.messages] == [m for m in order if m in ctx]  # in place
    for mid in (a.id, r.id):
        assert ctx.message(mid) == originals[mid]  # exact, field by field
    assert not file.exists() and uid not in ctx.spilled and len(store) == 2
    assert_consistent(ctx)


def test_reinjection_of_something_never_spilled_is_an_error():
    ctx = Context()
    history(ctx, turns=1)
    with pytest.raises(StructureError, match="nothing spilled under 'u1'"):
        Gate(Scripted(), budget=10, spill_store=MemorySpillStore()).reinject(ctx, "u1")


def test_spilled_units_come_back_by_themselves_when_they_fit():
    ctx, originals = spilling_setup()
    store = MemorySpillStore()
    gate = Gate(Scripted(), budget=ctx.tokens - 1, hard_ceiling=ctx.tokens - 1, spill_store=store)
    d = gate.check(ctx)
    assert d.kind == DecisionKind.SPILLED
    spilled = list(d.spilled_units)
    # the batch completes and the budget grows (a bigger model, say): everything spilled fits again
    ctx.append(result("call_hotel", "h"))
    ctx.append(result("call_book", "b"))
    gate.budget = ctx.tokens + sum(ctx.spilled[u].tokens for u in spilled)
    d = gate.check(ctx)
    assert d.kind == DecisionKind.REINJECTED and sorted(d.reinjected_units) == sorted(spilled)
    assert not ctx.spilled and len(store) == 0
    assert [m for m in ctx.messages if m.id in {o.id for o in originals}] == originals
    assert_consistent(ctx)


def test_no_reinjection_while_a_call_is_in_flight():
    ctx, _ = spilling_setup()
    gate = Gate(Scripted(), budget=ctx.tokens - 1, hard_ceiling=ctx.tokens - 1, spill_store=MemorySpillStore())
    gate.check(ctx)
    gate.budget = 10**6
    d = gate.check(ctx)
    assert d.kind == DecisionKind.WITHIN_BUDGET and ctx.spilled  # waits for the commit boundary


def test_a_spilled_summary_comes_back_as_a_summary():
    ctx = Context()
    history(ctx, turns=2)
    uid = ctx.unit_id_of(ctx.messages[2].id)
    ctx.replace_units([uid], text_message("s", "assistant", "summary"), cause="s")
    sid = ctx.unit_id_of("s")
    saved = [ctx.message("s").copy()]
    ctx.spill_unit(sid, "k")
    ctx.restore_unit(sid, saved)
    assert ctx.unit_of("s").kind == "summary" and ctx.messages[2].id == "s"
    assert_consistent(ctx)


def test_restore_refuses_a_clash_and_changes_nothing():
    ctx = Context()
    history(ctx, turns=2)
    a = ctx.append(Message("", "assistant", [tool_use("c1", "f", {})]))
    ctx.append(result("c1", "x"))
    ctx.append(text_message("", "user", "more"))
    uid = ctx.unit_id_of(a.id)
    saved = [ctx.message(m).copy() for m in ctx.units[uid].message_ids]
    ctx.spill_unit(uid, "k")
    ctx.append(Message("", "assistant", [tool_use("c1", "f", {})]))  # the id is reused and in flight
    n = len(ctx)
    with pytest.raises(StructureError, match="tool call id 'c1' is in flight again"):
        ctx.restore_unit(uid, saved)
    assert len(ctx) == n and uid in ctx.spilled
    assert_consistent(ctx)
    with pytest.raises(StructureError, match="other messages than were spilled"):
        ctx.restore_unit(uid, saved[:1])


def test_a_reused_call_id_naming_two_spilled_units_is_refused_not_guessed():
    ctx = Context()
    history(ctx, turns=0)
    units = []
    for i in range(2):
        a = ctx.append(Message("", "assistant", [tool_use("call_1", "f", {"turn": i})]))  # the id comes back
        ctx.append(result("call_1", f"answer {i}"))
        ctx.append(text_message("", "user", f"next {i}"))
        units.append(ctx.unit_id_of(a.id))
    gate = Gate(Scripted(), budget=10, spill_store=MemorySpillStore())
    for uid in units:
        gate._spill(ctx, uid)
    with pytest.raises(StructureError, match=rf"'call_1' names several spilled units \({units[0]}, {units[1]}\)"):
        gate.reinject(ctx, "call_1")
    assert gate.reinject(ctx, units[1]).reinjected_units == [units[1]]
    assert gate.reinject(ctx, "call_1").reinjected_units == [units[0]]  # now unambiguous
    assert_consistent(ctx)
