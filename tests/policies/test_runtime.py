"""One runtime interface for the gate and the naive runtime, built in one place."""

from __future__ import annotations

import re

import pytest

from policies import Context, Gate, MemorySpillStore, Observer, Runtime, build_runtime, text_message
from policies.naive import NaiveRuntime
from tests.invariants import Scripted
from tests.paths import REPO


class Events(Observer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict]] = []

    def on_message(self, ctx, message, event, **info) -> None:  # type: ignore[no-untyped-def]  # the Observer's signature
        self.seen.append((event, message.id, info))


def test_both_runtimes_implement_the_protocol() -> None:
    gate = build_runtime(Scripted(), 100, gated=True, hard_ceiling=200, mode="shrink", spill_store=MemorySpillStore())
    naive = build_runtime(Scripted(), 100, gated=False, hard_ceiling=200)
    assert isinstance(gate, Gate) and isinstance(gate, Runtime) and gate.gated
    assert (gate.budget, gate.hard_ceiling, gate.mode) == (100, 200, "shrink")
    assert isinstance(naive, NaiveRuntime) and isinstance(naive, Runtime) and not naive.gated
    assert naive.hard_ceiling is None


def test_runtimes_are_built_in_one_place() -> None:
    calls = []
    for pkg in ("tracer", "dashboard"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"\b(Gate|NaiveRuntime)\(", line) and not line.lstrip().startswith("#"):
                    calls.append(f"{path.relative_to(REPO)}:{n}")
    assert not calls


def test_nothing_outside_context_reaches_into_its_private_state() -> None:
    found = []
    for path in sorted((REPO / "policies").rglob("*.py")):
        if path.name == "context.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\b(ctx|context|self\.ctx|self\.context)\._[a-z]", line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found


def _long_history(ctx: Context) -> None:
    ctx.append(text_message("", "user", "question " * 30))
    ctx.append(text_message("", "assistant", "answer " * 30))
    ctx.append(text_message("", "user", "follow-up " * 30))


def test_overwrite_message_keeps_place_and_reports_a_rewrite() -> None:
    events = Events()
    ctx = Context(observer=events, strict=False)
    _long_history(ctx)
    target = ctx.messages[1]
    before = ctx.tokens
    old = ctx.overwrite_message(target.id, text_message("", "assistant", "short"), "test")
    new = ctx.message(target.id)
    assert old is target and new is not target
    assert (new.id, new.seq, new.closed) == (target.id, target.seq, target.closed)
    assert ctx.tokens == before - target.tokens + new.tokens
    assert ctx.unit_of(target.id).tokens == new.tokens
    assert events.seen[-1][:2] == ("rewrite", target.id) and events.seen[-1][2]["tokens_before"] == target.tokens


def test_insert_summary_places_it_where_the_removed_messages_were() -> None:
    events = Events()
    ctx = Context(observer=events, strict=False)
    _long_history(ctx)
    first = ctx.messages[0]
    ctx.remove_messages([first.id], "test")
    summary = ctx.insert_summary(text_message("", "user", "summary"), seq=first.seq, summary_of=["u0"])
    assert ctx.messages[0] is summary and ctx.unit_of(summary.id).summary
    assert events.seen[-1] == ("append", summary.id, {"summary_of": ["u0"]})


@pytest.mark.parametrize("gated", [True, False])
def test_a_check_through_the_protocol(gated: bool) -> None:
    ctx = Context(strict=gated)
    _long_history(ctx)
    target = ctx.messages[1]
    runtime: Runtime = build_runtime(Scripted(target.id), ctx.tokens - target.tokens, gated=gated)
    d = runtime.check(ctx)
    assert runtime.checks == 1 and runtime.gated is gated
    assert str(d.kind) == "pruned" and d.pruned_ids == [target.id] and target.id not in ctx
