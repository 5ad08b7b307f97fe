"""Stateful property test of the gate over random interleavings of a live agent's traffic.

The machine plays an agent: user and assistant turns, parallel batches of 1 to 12 calls whose
results arrive one at a time in random order, streaming results and streaming assistant messages
(open, deltas, close), on-demand re-injection, and a budget check after every write. The policy is
either a random-proposal policy (random message ids, rewrites that keep or break structure, good
and bad summaries, the odd exception) or one of the registered built-ins.

After every step the machine checks, against its own record of what it sent:
- the request as it would be sent at the next model invocation validates for both providers. An
  in-flight unit (a pending call, an open stream) is legitimately unfinished: it must be whole and
  trailing, and the request is validated without it (at a commit boundary that is the whole context);
- no unit is partially present (each turn or batch the machine built is all there or all gone) and
  the context's unit index equals the machine's grouping;
- no open message was touched (same object, same text, still open); no pending unit was evicted;
- the token accounting and the incremental index are consistent (tests/invariants.py);
- every prune is a set the reference check (prune_context) accepts and returns unchanged, and
  nothing is pruned, rewritten or summarized while a call is in flight.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from functools import cache

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import policies
from policies import (
    Block,
    Context,
    DecisionKind,
    Eviction,
    Gate,
    HardCeilingExceeded,
    MemorySpillStore,
    Message,
    Observer,
    PolicyError,
    Proposal,
    Rewrite,
    StructureError,
    Summary,
    convert,
    prune_context,
    text_message,
    tool_result,
    tool_use,
    validate,
)
from policies.messages import TEXT, TOOL_RESULT
from tests.invariants import assert_consistent, snapshot

RANDOM_POLICY = "random"
MIN_RANDOM_STEPS = 10_000
STEPS: Counter[str] = Counter()  # budget checks executed, per policy
SEEN: dict[str, Counter[str]] = defaultdict(Counter)  # decision paths taken, per policy


def _paths(d: policies.Decision) -> list[str]:
    out = [f"{d.kind}:{d.reason.split(';')[0]}" if d.kind in ("deferred", "spilled") else str(d.kind)]
    out += [name for name, hit in (("grown", d.grown_units), ("shrunk", d.shrunk_units), ("skipped", d.skipped_units),
                                    ("rewritten", d.rewritten_ids), ("summarized", d.summarized_units),
                                    ("spilled", d.spilled_units)) if hit]
    return out

WORDS = "flight hotel lisbon price seat date refund baggage museum tram pastel fado river tile".split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


class RandomProposals:
    """Proposes anything: random message ids (live, gone, unknown), rewrites that keep or break
    structure, summaries of random units (pinned, in flight, unknown, duplicated), and sometimes
    raises. The gate must turn all of it into whole-unit operations or nothing."""

    name = RANDOM_POLICY

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: list[str] = []

    def propose(self, view: policies.ContextView) -> Proposal:
        rng = self.rng
        if rng.random() < 0.03:
            raise RuntimeError("random policy gave up")
        ids = [m.id for m in view.messages()]
        self.seen = (self.seen + ids)[-200:]
        units = [u.id for u in view.units()]
        p = Proposal(self.name)
        pool = ids + rng.sample(self.seen, min(3, len(self.seen))) + ["ghost"]
        for mid in rng.sample(pool, rng.randint(0, min(8, len(pool)))):
            p.evictions.append(Eviction((mid,), score=rng.random(), reason="random"))
        multi = [u for u in view.units() if len(u.message_ids) > 1]
        if multi and rng.random() < 0.3:  # part of a batch: the gate must grow or shrink it
            part = rng.choice(multi).message_ids
            p.evictions.append(Eviction(tuple(rng.sample(part, rng.randint(1, len(part) - 1))), reason="part"))
        for _ in range(rng.choice((0, 0, 1, 2))):
            m = view.message(rng.choice(ids))
            p.rewrites.append(Rewrite(m.id, self._rewrite(m), reason="random"))
        if units and rng.random() < 0.3:
            picked = rng.sample(units, rng.randint(1, min(3, len(units))))
            if rng.random() < 0.1:
                picked.append(picked[0])
            if rng.random() < 0.05:
                picked.append("u-ghost")
            summary = text_message("", rng.choice(("user", "assistant")), "summary: " + words(rng, rng.randint(1, 8)))
            if rng.random() < 0.05:
                summary.blocks.append(tool_use(f"sum{rng.random()}", "f", {}))  # a summary may not carry calls
            p.summaries.append(Summary(tuple(picked), summary, reason="random"))
        return p

    def _rewrite(self, m: Message) -> Message:
        rng, new = self.rng, m.copy()
        r = rng.random()
        if r < 0.08 and new.call_ids:
            next(b for b in new.blocks if b.call_id).id = "renamed"
        elif r < 0.16 and new.answered_ids:
            next(b for b in new.blocks if b.answers).tool_use_id = "renamed"
        elif r < 0.2:
            new.role = "user" if new.role != "user" else "assistant"
        else:
            for b in new.blocks:
                if b.type == TEXT and b.text:
                    b.text = b.text[: rng.randint(0, len(b.text))]
                elif b.type == TOOL_RESULT and isinstance(b.content, str):
                    b.content = b.content[: rng.randint(0, len(b.content))] + " [elided]"
        return new


class Recorder(Observer):
    def __init__(self) -> None:
        self.last = None

    def on_decision(self, ctx, decision):
        self.last = decision


class GateMachine(RuleBasedStateMachine):
    policy_name = RANDOM_POLICY
    mode = "grow"
    ceiling: int | None = None  # hard ceiling as a multiple of the budget
    spill = False

    def __init__(self) -> None:
        super().__init__()
        self.ctx: Context | None = None

    # ------------------------------------------------------------------ setup
    @initialize(
        seed=st.integers(0, 2**32 - 1),
        budget=st.integers(150, 900),
    )
    def setup(self, seed, budget):
        self.rng = random.Random(seed)
        if self.policy_name == RANDOM_POLICY:
            policy = RandomProposals(self.rng)
        else:
            policy = policies.get_policy(self.policy_name)
        self.store = MemorySpillStore() if self.spill else None
        self.rec = Recorder()
        hard = None if self.ceiling is None else budget * self.ceiling
        self.gate = Gate(policy, budget, hard, mode=self.mode, spill_store=self.store, observer=self.rec)
        self.ctx = Context(session_id="prop")
        self.groups: list[list[str]] = []  # what the machine built as one unit: a turn, or a batch and its results
        self.waiting: dict[str, int] = {}  # call id -> group, no result started yet
        self.streams: dict[str, tuple[Message, str, str | None]] = {}  # open id -> (object, text so far, call id)
        self.done_calls: list[str] = []
        self.next_call = 0
        self._group(self.ctx.append(text_message("", "system", "You are a travel agent.")))
        self._group(self.ctx.append(text_message("", "user", "Plan my trip: " + words(self.rng, 12))))

    def _group(self, msg: Message, group: int | None = None) -> int:
        if group is None:
            group = len(self.groups)
            self.groups.append([])
        self.groups[group].append(msg.id)
        return group

    def at_boundary(self) -> bool:
        return self.ctx is not None and not self.waiting and not self.streams

    def has_waiting(self) -> bool:
        return self.ctx is not None and bool(self.waiting)

    def has_streams(self) -> bool:
        return self.ctx is not None and bool(self.streams)

    # ------------------------------------------------------------------ traffic
    @precondition(at_boundary)
    @rule(n=st.integers(1, 60))
    def user_turn(self, n):
        self._group(self.ctx.append(text_message("", "user", words(self.rng, n))))
        self.check()

    @precondition(at_boundary)
    @rule(n=st.integers(1, 80))
    def assistant_turn(self, n):
        self._group(self.ctx.append(text_message("", "assistant", words(self.rng, n))))
        self.check()

    @precondition(at_boundary)
    @rule(n=st.integers(1, 12), reuse=st.integers(0, 3), text=st.booleans())
    def parallel_batch(self, n, reuse, text):
        ids: list[str] = []
        reusable = [c for c in dict.fromkeys(reversed(self.done_calls))]  # completed pairs: ids may come back
        for _ in range(n):
            if reuse and reusable:
                ids.append(reusable.pop(self.rng.randrange(len(reusable))))
                reuse -= 1
            else:
                ids.append(f"call_{self.next_call}")
                self.next_call += 1
        blocks = [Block(TEXT, text=words(self.rng, 5))] if text else []
        blocks += [tool_use(c, self.rng.choice(WORDS), {"q": words(self.rng, 3)}) for c in ids]
        msg = self.ctx.append(Message("", "assistant", blocks))
        group = self._group(msg)
        for c in ids:
            self.waiting[c] = group
        self.check()

    def _pick_waiting(self, pick: int) -> tuple[str, int]:
        call = sorted(self.waiting)[pick % len(self.waiting)]
        return call, self.waiting.pop(call)

    @precondition(has_waiting)
    @rule(pick=st.integers(0, 2**16), n=st.integers(0, 80))
    def deliver_result(self, pick, n):
        call, group = self._pick_waiting(pick)
        msg = self.ctx.append(Message("", "tool", [tool_result(call, words(self.rng, n))]))
        self._group(msg, group)
        self.done_calls.append(call)
        self.check()

    @precondition(has_waiting)
    @rule(pick=st.integers(0, 2**16))
    def open_result_stream(self, pick):
        call, group = self._pick_waiting(pick)
        msg = self.ctx.open("tool", blocks=[Block(TOOL_RESULT, tool_use_id=call, content="")])
        self._group(msg, group)
        self.streams[msg.id] = (msg, "", call)
        self.check()

    def may_stream_assistant(self) -> bool:
        """At a boundary, or beside other assistant streams (parallel generations): then only the
        newest is the pinned live turn, and the older ones are open yet unpinned."""
        return self.ctx is not None and not self.waiting and all(c is None for _, _, c in self.streams.values())

    @precondition(may_stream_assistant)
    @rule()
    def open_assistant_stream(self):
        msg = self.ctx.open("assistant", text="")
        self._group(msg)
        self.streams[msg.id] = (msg, "", None)
        self.check()

    @precondition(has_streams)
    @rule(pick=st.integers(0, 2**16), n=st.integers(1, 30))
    def stream_delta(self, pick, n):
        mid = sorted(self.streams)[pick % len(self.streams)]
        obj, text, call = self.streams[mid]
        delta = words(self.rng, n) + "\n"
        self.ctx.append_delta(mid, delta)
        self.streams[mid] = (obj, text + delta, call)
        self.check()

    @precondition(has_streams)
    @rule(pick=st.integers(0, 2**16))
    def close_stream(self, pick):
        mid = sorted(self.streams)[pick % len(self.streams)]
        if self.streams[mid][2] is None:  # parallel assistant streams finish oldest first: the
            mid = next(iter(self.streams))  # open ones stay at the end of the context
        _, _, call = self.streams.pop(mid)
        self.ctx.close(mid)
        if call is not None:
            self.done_calls.append(call)
        self.check()

    @precondition(lambda self: self.ctx is not None and bool(self.ctx.spilled))
    @rule(pick=st.integers(0, 2**16), how=st.sampled_from(["unit", "message", "call"]))
    def reinject_on_demand(self, pick, how):
        record = list(self.ctx.spilled.values())[pick % len(self.ctx.spilled)]
        key = {"unit": record.unit_id, "message": record.message_ids[-1], "call": None}[how]
        key = key or (record.call_ids[0] if record.call_ids else record.unit_id)
        members = list(record.message_ids)
        try:
            d = self.gate.reinject(self.ctx, key)
        except StructureError as exc:  # ids live again, or a reused call id: refused whole, nothing changed
            assert "again" in str(exc) or "several spilled units" in str(exc), exc
            assert record.unit_id in self.ctx.spilled
            assert not any(m in self.ctx for m in members)
            return
        assert d.reinjected_units == [record.unit_id], (d.reinjected_units, record)
        assert all(m in self.ctx for m in members), (members, [m.id for m in self.ctx.messages])
        SEEN[self.policy_name]["reinjected:on_demand"] += 1

    # ------------------------------------------------------------------ the budget check
    def check(self) -> None:
        STEPS[self.policy_name] += 1
        ctx, gate = self.ctx, self.gate
        before = snapshot(ctx)
        members = {uid: list(u.message_ids) for uid, u in ctx.units.items()}
        pending_units = set(ctx.pending.values())
        open_ids = set(ctx.open_ids)
        in_flight = {uid for uid, u in ctx.units.items() if not u.closed}
        pins = ctx.pinned_unit_ids()
        pinned_text = {m: ctx.message(m).plain_text() for u in pins for m in members[u]}
        tokens = ctx.tokens
        over = tokens > gate.budget
        try:
            d = gate.check(ctx)
        except HardCeilingExceeded as exc:
            d = exc.decision
            assert d is not None and d.kind == DecisionKind.FAILED and str(exc) == d.error
        assert self.rec.last is d, "the observer saw every decision, failures included, before the raise"
        SEEN[self.policy_name].update(_paths(d))

        assert d.tokens_before == tokens and d.tokens_after == ctx.tokens and d.budget_met == (ctx.tokens <= gate.budget)
        if not over:
            assert d.kind in (DecisionKind.WITHIN_BUDGET, DecisionKind.REINJECTED)
        touched_units = set(d.pruned_units) | set(d.summarized_units) | set(d.spilled_units)
        touched_units |= {next(u for u, ms in members.items() if mid in ms) for mid in d.rewritten_ids}
        assert not touched_units & pins, f"pinned units touched: {touched_units & pins}"
        assert not touched_units & in_flight, f"in-flight units touched: {touched_units & in_flight}"
        for uid in set(d.pruned_units) | set(d.summarized_units):
            assert not any(m in ctx for m in members[uid]), f"unit {uid} only partly removed"
        for uid in d.spilled_units:  # may include the summary this very decision wrote
            record = ctx.spilled[uid]
            assert record.message_ids == members.get(uid, [d.summary_id]), f"spilled unit {uid} is not whole"
            assert not any(m in ctx for m in record.message_ids), f"unit {uid} only partly spilled"
        if d.pruned_ids:
            assert sorted(d.pruned_ids) == sorted(m for u in d.pruned_units for m in members[u])
            assert prune_context(before, d.pruned_ids, pending_units, open_ids) == set(d.pruned_ids)
        if pending_units and over or d.kind == DecisionKind.DEFERRED:
            assert not (d.pruned_ids or d.rewritten_ids or d.summarized_units), "pruned while deferring"
        if pending_units and over:
            assert d.kind in (DecisionKind.DEFERRED, DecisionKind.SPILLED, DecisionKind.FAILED)
            assert d.reason.startswith("pending_calls")
        for mid, text in pinned_text.items():
            assert mid in ctx and ctx.message(mid).plain_text() == text, f"pinned message {mid} changed"

    # ------------------------------------------------------------------ what holds after every step
    @invariant()
    def context_is_sound(self):
        if self.ctx is None:
            return
        ctx = self.ctx
        assert_consistent(ctx)

        expected_pending = set(self.waiting) | {c for _, _, c in self.streams.values() if c is not None}
        assert set(ctx.pending) == expected_pending, "the context and the agent disagree on calls in flight"
        assert ctx.open_ids == set(self.streams)
        for mid, (obj, text, _call) in self.streams.items():
            assert ctx.message(mid) is obj and not obj.closed, f"open message {mid} was replaced or closed"
            got = obj.blocks[0].content if obj.role == "tool" else obj.plain_text()
            assert got == text, f"open message {mid} was touched"

        for group in self.groups:
            present = [m for m in group if m in ctx]
            if present:
                assert present == group, f"unit partially present: {present} of {group}"
                uids = {ctx.unit_id_of(m) for m in group}
                assert len(uids) == 1 and sorted(ctx.units[uids.pop()].message_ids) == sorted(group)
        for call, group in self.waiting.items():
            assert all(m in ctx for m in self.groups[group]), f"unit waiting for {call} was evicted"

        # in-flight units are whole (above) and trailing; the request at the next model call is the rest
        in_flight = [not ctx.unit_of(m.id).closed for m in ctx.iter_messages()]
        assert in_flight == sorted(in_flight), "an in-flight unit is not at the end of the context"
        settled = [m for m, live in zip(ctx.messages, in_flight, strict=True) if not live]
        assert validate(convert.to_anthropic(settled, ctx.request_extra), "anthropic") == []
        assert validate(convert.to_openai(settled, ctx.request_extra), "openai") == []
        if ctx.at_commit_boundary:
            assert validate(ctx.to_anthropic(), "anthropic") == []
            assert validate(ctx.to_openai(), "openai") == []


def machine_settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,  # CI is deterministic
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


# (mode, hard ceiling as a multiple of the budget, spill store): fixed per run, so every path is
# exercised by construction rather than by the luck of the draw
CONFIGS = {
    "grow": ("grow", None, False),
    "shrink": ("shrink", None, False),
    "grow-spill": ("grow", 2, True),
    "shrink-spill": ("shrink", 2, True),
    "grow-ceiling": ("grow", 3, False),
    "spill-at-budget": ("grow", 1, True),  # every deferral over budget spills; re-injection when it fits
}


@cache
def random_run(config: str) -> tuple[int, Counter[str]]:
    """(budget checks, decision paths taken) of the random policy's run in one config; each config
    runs once per session, whichever test asks first (the runs are derandomized, so equal)."""
    steps, seen = STEPS[RANDOM_POLICY], Counter(SEEN[RANDOM_POLICY])
    run_state_machine_as_test(machine_for(RANDOM_POLICY, config), settings=machine_settings(examples=26, steps=120))
    return STEPS[RANDOM_POLICY] - steps, SEEN[RANDOM_POLICY] - seen


def machine_for(policy: str, config: str) -> type[GateMachine]:
    mode, ceiling, spill = CONFIGS[config]
    attrs = {"policy_name": policy, "mode": mode, "ceiling": ceiling, "spill": spill}
    return type(f"GateMachine_{policy}_{config}", (GateMachine,), attrs)


@pytest.mark.slow
@pytest.mark.parametrize("config", list(CONFIGS))
def test_random_proposals_never_break_structure_under_the_gate(config):
    steps, _ = random_run(config)
    assert steps >= 1500, "the machine ran far fewer steps than configured"


BUILTINS = [name for name in policies.available() if name != RANDOM_POLICY]
BUILTIN_NAMES = set(policies.registry.BUILTINS)


@pytest.mark.parametrize("config", ["grow", "shrink-spill"])
@pytest.mark.parametrize("name", BUILTINS)
def test_every_registered_policy_is_safe_under_the_gate(name, config):
    try:
        policies.get_policy(name)
    except (PolicyError, ImportError) as exc:  # a third-party plugin that needs parameters or an extra
        if name in BUILTIN_NAMES:
            raise  # every built-in (langchain_trim included: the test extra installs it) must build
        pytest.skip(f"third-party policy {name!r} cannot be built with its defaults here: {exc}")
    before = STEPS[name]
    run_state_machine_as_test(machine_for(name, config), settings=machine_settings(examples=8, steps=60))
    assert STEPS[name] - before >= 150, f"only {STEPS[name] - before} steps ran for {name}"


@pytest.mark.slow
def test_the_random_policy_runs_take_every_decision_path():
    """Over all configs: the random policy's total of checks, and the paths they took (runs any
    config that no test ran yet, so it does not depend on test order or selection)."""
    runs = [random_run(config) for config in CONFIGS]
    total = sum(steps for steps, _ in runs)
    seen = sum((paths for _, paths in runs), Counter())
    print(f"\nrandom policy: {total} budget checks, paths: {dict(sorted(seen.items()))}")
    assert total >= MIN_RANDOM_STEPS, f"only {total} budget checks ran with the random policy"
    for path in ("within_budget", "pruned", "deferred:pending_calls", "deferred:open_messages", "deferred:no_safe_prune",
                 "deferred:policy_error", "spilled:pending_calls", "failed", "reinjected", "grown", "shrunk",
                 "skipped", "rewritten", "summarized", "reinjected:on_demand"):
        assert seen[path] >= 3, f"the machine hardly exercised {path!r}: {seen[path]} times"
