"""Consistency checks of a Context's incremental index, shared by the gate and context tests.

The index (units, pending calls, open messages, token totals) is kept incrementally; these checks
recompute all of it from the messages and compare, so any drift fails the test that caused it.
"""

from __future__ import annotations

from policies import Context, ContextView, Eviction, Message, Policy, Proposal


def assert_consistent(ctx: Context, *, gated: bool = True) -> None:
    """Recompute the index from the messages and compare with what the context keeps."""
    msgs = ctx.messages
    counted = sum(m.tokens for m in msgs)
    assert ctx.tokens == counted, f"ctx.tokens {ctx.tokens} != sum of message tokens {counted}"
    assert ctx.tokens == sum(u.tokens for u in ctx.units.values()), "ctx.tokens != sum of unit tokens"
    for m in msgs:
        assert m.tokens == ctx.counter.count(m), f"message {m.id}: stale token count"
    seqs = [m.seq for m in msgs]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "messages not in strict seq order"

    members: list[str] = []
    for uid, unit in ctx.units.items():
        assert unit.id == uid
        assert unit.message_ids, f"unit {uid} is empty"
        members.extend(unit.message_ids)
        unit_msgs = [ctx.message(mid) for mid in unit.message_ids]
        assert unit.tokens == sum(m.tokens for m in unit_msgs), f"unit {uid}: token total drifted"
        assert [m.seq for m in unit_msgs] == sorted(m.seq for m in unit_msgs), f"unit {uid}: members out of order"
        for mid in unit.message_ids:
            assert ctx.unit_id_of(mid) == uid
        assert unit.open_ids == {m.id for m in unit_msgs if not m.closed}, f"unit {uid}: open set drifted"
        if gated:
            assert not unit.partial and not unit.orphan, f"unit {uid} is partial/orphaned under the gate"
            assert unit.first_seq == unit_msgs[0].seq and unit.last_seq >= unit_msgs[-1].seq, f"unit {uid}: seq span"
            issued = {c for m in unit_msgs for c in m.call_ids}
            assert unit.call_ids >= issued, f"unit {uid}: call ids drifted"
    assert sorted(members) == sorted(m.id for m in msgs), "a message is in no unit or in two"
    firsts = [u.first_seq for u in ctx.units.values()]
    assert firsts == sorted(firsts), "units are not kept oldest first"

    assert ctx.open_ids == {m.id for m in msgs if not m.closed}, "ctx.open_ids drifted"
    unit_pending = {c: uid for uid, u in ctx.units.items() for c in u.pending}
    assert unit_pending == ctx.pending, f"pending drifted: units say {unit_pending}, ctx says {ctx.pending}"
    if gated:
        answered_closed = {c for m in msgs if m.closed for c in m.answered_ids}
        for call_id, uid in ctx.pending.items():
            owner = ctx.unit_of_call(call_id)
            assert owner is not None and owner.id == uid, f"pending call {call_id} has no owner unit"
            unit_msgs = [ctx.message(mid) for mid in owner.message_ids]
            assert any(call_id in m.call_ids for m in unit_msgs), f"pending call {call_id}: issuer not in its unit"
            assert not any(m.closed and call_id in m.answered_ids for m in unit_msgs), f"{call_id} answered yet pending"
        for uid, u in ctx.units.items():
            for call_id in u.call_ids - set(u.pending):
                if ctx.unit_of_call(call_id) is u:
                    assert call_id in answered_closed, f"unit {uid}: call {call_id} neither pending nor answered"


def snapshot(ctx: Context) -> list[dict]:
    """The context as the reference check's input: dicts with id, unit_id, role, closed."""
    return [{"id": m.id, "unit_id": ctx.unit_id_of(m.id), "role": m.role, "closed": m.closed} for m in ctx.messages]


class Scripted:
    """Proposes exactly the message ids it is told to (a stand-in for any policy's choice)."""

    def __init__(self, *ids: str, name: str = "scripted") -> None:
        self.ids = list(ids)
        self.name = name
        self.calls = 0

    def propose(self, view: ContextView) -> Proposal:
        self.calls += 1
        return Proposal(self.name, evictions=[Eviction((mid,), reason="scripted") for mid in self.ids])


class Salience:
    """A salience-like scorer: evicts the lowest-scored messages until the excess is freed.

    Like the scorers of the source document it looks at messages, not structure, and it does not
    know about pins: ``low`` are the ids it ranks least salient; the rest rank by age (older lower).
    """

    name = "salience-test"

    def __init__(self, *low: str) -> None:
        self.low = set(low)

    def score(self, m: Message) -> float:
        return 0.0 if m.id in self.low else 1.0 + m.seq / 1e6

    def propose(self, view: ContextView) -> Proposal:
        need = view.excess
        proposal = Proposal(self.name)
        for m in sorted(view.messages(), key=self.score):
            if need <= 0:
                break
            proposal.evictions.append(Eviction((m.id,), score=self.score(m), reason="least salient"))
            need -= m.tokens
        return proposal


assert isinstance(Scripted(), Policy) and isinstance(Salience(), Policy)
