"""Real recorded traffic (../shared/traffic, or the sample in tests/data) replayed through the gate and through the naive runtime.

Each conversation is fed message by message with a budget check after every append, at a budget
far below its size. Before every assistant message (a model invocation) the request as it would
be sent is validated. Under the gate every request is valid for every registered policy; the
naive runtime, running the same policies on the same traffic, sends requests a provider rejects.
"""

from __future__ import annotations

import pytest

import policies
from policies import Context, Gate, Message, convert, validate
from policies.naive import NaiveRuntime
from tests.invariants import assert_consistent
from tests.traffic import cassette_bodies, tau_spread

BUDGET = 1200  # tokens; the τ-bench dialogues run to several thousand


def conversations() -> list[tuple[str, str, list[Message]]]:
    out = []
    for conv in tau_spread(40):  # 40 of the 200 dialogues (all of the sample's)
        msgs, _ = convert.from_openai({"messages": conv["traj"]})
        out.append((f"tau {conv['task_id']}/{conv['trial']}", "openai", msgs))
    for name, provider, body in cassette_bodies():
        if len(body.get("messages", [])) >= 4:
            load = convert.from_anthropic if provider == "anthropic" else convert.from_openai
            out.append((name, provider, load(body)[0]))
    return out


CONVERSATIONS = conversations()


def replay(runtime, msgs: list[Message], provider: str, *, strict: bool) -> tuple[int, int, Context]:
    """(model invocations, invalid requests) for one conversation."""
    ctx = Context(strict=strict)
    calls = invalid = 0
    for i, m in enumerate(msgs):
        if m.role == "assistant" and i > 0:
            calls += 1
            invalid += bool(validate(ctx.render(provider), provider))
        try:
            ctx.append(m.copy())
        except policies.StructureError:  # a strict context refuses what the naive runtime broke
            invalid += 1
            break
        runtime.check(ctx)
    return calls, invalid, ctx


@pytest.mark.parametrize("name", policies.available())
def test_every_request_is_valid_under_the_gate_on_real_traffic(name):
    total = 0
    for label, provider, msgs in CONVERSATIONS:
        gate = Gate(policies.get_policy(name), budget=BUDGET)
        calls, invalid, ctx = replay(gate, msgs, provider, strict=True)
        assert invalid == 0, f"{label}: {invalid} of {calls} requests invalid under the gate with {name}"
        assert_consistent(ctx)
        total += calls
    assert total > 5 * len(CONVERSATIONS)  # 549 calls in 61 conversations of the full traffic, 167 in 26 of the sample


class LastMessages:
    """A sliding window by message count (what many runtimes ship): keep the pinned messages and
    the newest ``keep``, evict the rest, message by message."""

    name = "last-messages"

    def __init__(self, keep: int = 5) -> None:  # odd: τ-bench turns come in pairs, an even window never cuts one
        self.keep = keep

    def propose(self, view: policies.ContextView) -> policies.Proposal:
        msgs = view.messages()
        pinned = {m for u in view.pinned for m in view.unit(u).message_ids}
        old = [m.id for m in msgs[: max(0, len(msgs) - self.keep)] if m.id not in pinned]
        return policies.Proposal(self.name, evictions=[policies.Eviction((mid,)) for mid in old])


def test_a_sliding_window_is_valid_under_the_gate_on_real_traffic():
    for label, provider, msgs in CONVERSATIONS:
        calls, invalid, ctx = replay(Gate(LastMessages(), budget=BUDGET), msgs, provider, strict=True)
        assert invalid == 0, f"{label}: {invalid} of {calls} requests invalid under the gate"
        assert_consistent(ctx)


def test_the_same_window_ungated_breaks_real_traffic():
    calls = invalid = 0
    for _label, provider, msgs in CONVERSATIONS:
        c, bad, _ = replay(NaiveRuntime(LastMessages(), budget=BUDGET), msgs, provider, strict=False)
        calls, invalid = calls + c, invalid + bad
    assert invalid > 0.05 * calls, f"only {invalid} of {calls} requests invalid without the gate"
