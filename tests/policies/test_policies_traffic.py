"""Every policy on real τ-bench traffic: ungated trimmers produce invalid requests, gated ones never do.

The replay is bench/bench_policies.py's: each conversation goes message by message into a
``Context(strict=False)`` with a budget check after every append, and the OpenAI body is
validated before every assistant message (a model call). Budget: the system prompt plus half of
the rest of the conversation's final size.
"""

from __future__ import annotations

import pytest

from bench.bench_policies import Run, budget_for, replay
from policies import available
from tests.traffic import tau_conversations


def run(name: str | None, gated: bool, conversations: int) -> Run:
    out = Run()
    for conv in tau_conversations()[:conversations]:
        replay(conv["traj"], name, gated, budget_for(conv["traj"]), out)
    return out


def test_langchain_trim_messages_alone_breaks_requests_and_under_the_gate_never():
    naive = run("langchain_trim", gated=False, conversations=40)
    assert naive.invalid_calls > 0 and naive.invalid_sessions > 0
    assert set(naive.codes) <= {"orphan_tool_result", "missing_tool_result"}
    gated = run("langchain_trim", gated=True, conversations=40)
    assert gated.invalid_calls == 0 and gated.prunes > 0 and gated.errors == 0


def test_salience_ungated_orphans_results_on_real_traffic():
    naive = run("salience", gated=False, conversations=30)
    assert naive.codes.get("orphan_tool_result", 0) > 0  # it evicted calls and kept their results
    gated = run("salience", gated=True, conversations=30)
    assert gated.invalid_calls == 0 and gated.prunes > 0


@pytest.mark.parametrize("name", available())
def test_every_policy_under_the_gate_prunes_real_traffic_into_valid_requests(name):
    baseline = run(None, gated=True, conversations=20)
    gated = run(name, gated=True, conversations=20)
    assert gated.crashes == 0 and gated.errors == 0
    assert gated.invalid_calls == 0, gated.codes
    assert gated.prunes > 0 and gated.tokens_at_calls < baseline.tokens_at_calls
