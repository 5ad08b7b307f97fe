"""prune_context: the source document's reference check, to the letter of shared/DESIGN.md."""

from __future__ import annotations

import ast

import pytest

from policies import Context, Gate, PruneBoundaryViolation, prune_context, text_message
from tests.invariants import Scripted, snapshot
from tests.scenarios import history, parallel_batch, result

# u1: one user message; u3: an assistant call and its result; u5: a batch with two results
MESSAGES = [
    {"id": "m1", "unit_id": "u1", "role": "user", "closed": True},
    {"id": "m2", "unit_id": "u3", "role": "assistant", "closed": True},
    {"id": "m3", "unit_id": "u3", "role": "tool", "closed": True},
    {"id": "m4", "unit_id": "u4", "role": "user", "closed": True},
    {"id": "m5", "unit_id": "u5", "role": "assistant", "closed": True},
    {"id": "m6", "unit_id": "u5", "role": "tool", "closed": True},
    {"id": "m7", "unit_id": "u5", "role": "tool", "closed": False},
]


def test_it_is_a_runtime_error():
    assert issubclass(PruneBoundaryViolation, RuntimeError)


def test_a_closed_prune_set_comes_back_as_a_set():
    assert prune_context(MESSAGES, ["m2", "m3", "m1"], set(), set()) == {"m1", "m2", "m3"}
    assert prune_context(MESSAGES, [], set(), set()) == set()


def test_ids_matching_no_message_touch_no_unit_and_are_not_returned():
    assert prune_context(MESSAGES, {"m4", "ghost", "m999"}, set(), set()) == {"m4"}
    assert prune_context(MESSAGES, {"ghost"}, {"u5"}, {"m7"}) == set()


def test_check_1_an_open_message():
    with pytest.raises(PruneBoundaryViolation) as info:
        prune_context(MESSAGES, {"m7"}, set(), {"m7"})
    assert str(info.value) == "prune set contains open/streaming message 'm7'"


def test_check_2_a_split_unit():
    with pytest.raises(PruneBoundaryViolation) as info:
        prune_context(MESSAGES, {"m2"}, set(), set())
    assert str(info.value) == "prune set splits unit 'u3'; missing {'m3'}"


def test_check_3_a_unit_with_an_in_flight_call():
    with pytest.raises(PruneBoundaryViolation) as info:
        prune_context(MESSAGES, {"m2", "m3"}, {"u3"}, set())
    assert str(info.value) == "prune set contains unit 'u3' with an in-flight tool call"


def test_checks_run_in_order():
    # violates all three: the open message is reported first
    with pytest.raises(PruneBoundaryViolation, match="open/streaming message 'm7'"):
        prune_context(MESSAGES, {"m5", "m7"}, {"u5"}, {"m7"})
    # violates 2 and 3: the split is reported before the in-flight call
    with pytest.raises(PruneBoundaryViolation, match=r"^prune set splits unit 'u5'; missing \{'m\d'\}$"):
        prune_context(MESSAGES, {"m5", "m6"}, {"u5"}, set())
    # a whole unit that is in flight: check 3
    with pytest.raises(PruneBoundaryViolation, match="unit 'u5' with an in-flight tool call"):
        prune_context(MESSAGES, {"m5", "m6", "m7"}, {"u5"}, set())


def test_the_first_split_unit_in_message_order_is_named():
    with pytest.raises(PruneBoundaryViolation, match="splits unit 'u3'"):
        prune_context(MESSAGES, {"m6", "m2"}, set(), set())


def test_missing_lists_every_missing_member():
    with pytest.raises(PruneBoundaryViolation) as info:
        prune_context(MESSAGES, {"m5"}, set(), set())
    missing = str(info.value).split("missing ", 1)[1]
    assert ast.literal_eval(missing) == {"m6", "m7"}


def test_inputs_may_be_any_iterables_and_are_not_mutated():
    msgs = [dict(m) for m in MESSAGES]
    prune = ["m4"]
    assert prune_context(iter(msgs), iter(prune), iter(()), iter(())) == {"m4"}
    assert msgs == MESSAGES and prune == ["m4"]


def test_a_message_without_id_or_unit_is_named_by_index():
    with pytest.raises(ValueError, match=r"messages\[1\]: each message needs an 'id' and a 'unit_id'"):
        prune_context([MESSAGES[0], {"id": "m9"}], set(), set(), set())


def test_the_gate_and_the_reference_agree_on_a_live_context():
    """What the gate prunes is a set the reference check accepts and returns unchanged."""
    ctx = Context()
    history(ctx, turns=2)
    batch = parallel_batch(ctx)
    for call in ("call_weather", "call_hotel", "call_book"):
        ctx.append(result(call, "done"))
    ctx.append(text_message("", "user", "thanks, what next?"))  # the batch is no longer the live turn
    msgs = snapshot(ctx)
    d = Gate(Scripted(batch.id, ctx.messages[2].id), budget=1).check(ctx)
    assert len(d.pruned_ids) == 5
    assert prune_context(msgs, d.pruned_ids, set(), set()) == set(d.pruned_ids)
    with pytest.raises(PruneBoundaryViolation, match="splits unit"):
        prune_context(msgs, d.proposed_ids, set(), set())  # the raw proposal split the batch
