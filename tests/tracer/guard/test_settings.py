"""Guard settings are checked at construction, with one clear line, by the one function the gate uses."""

from __future__ import annotations

import pytest

from policies import Gate, SettingsError, limits_problem
from tests.invariants import Scripted
from tracer.guard import PruneGuard, ShadowGuard

BAD = [
    (dict(budget="3000"), r"PruneGuard: budget must be a positive token count \(a number\), got '3000' \(str\)"),
    (dict(budget=None), r"PruneGuard: budget must be a positive token count \(a number\), got None"),
    (dict(budget=0), r"PruneGuard: budget must be a positive token count \(finite\), got 0"),
    (dict(budget=-5), r"PruneGuard: budget must be a positive token count \(finite\), got -5"),
    (dict(budget=float("nan")), r"PruneGuard: budget must be a positive token count \(finite\), got nan"),
    (dict(budget=True), r"PruneGuard: budget must be a positive token count \(a number\), got True \(bool\)"),
    (dict(budget=100, hard_ceiling=50), r"PruneGuard: hard_ceiling \(50\) must be at least the budget \(100\)"),
    (dict(budget=100, hard_ceiling="200"), r"PruneGuard: hard_ceiling must be a positive token count"),
    (dict(budget=100, mode="cut"), r"PruneGuard: mode must be 'grow' or 'shrink', got 'cut'"),
    (dict(provider="gemini"), r"PruneGuard: provider must be one of anthropic, openai; got 'gemini'"),
]


@pytest.mark.parametrize("kwargs,msg", BAD)
def test_prune_guard_refuses_bad_settings_at_construction(rec, kwargs, msg):
    with pytest.raises(SettingsError, match=msg) as info:
        PruneGuard("recency", tracer_provider=rec.provider, **kwargs)
    assert "\n" not in str(info.value)
    assert rec.spans == [], "a refused guard records nothing"


@pytest.mark.parametrize("kwargs,msg", [(k, m.replace("PruneGuard", "ShadowGuard")) for k, m in BAD
                                         if "budget" in k and "hard_ceiling" not in k and "mode" not in k
                                         and k["budget"] is not None])
def test_shadow_guard_refuses_a_bad_budget(rec, kwargs, msg):
    with pytest.raises(SettingsError, match=msg):
        ShadowGuard(tracer_provider=rec.provider, **kwargs)


def test_shadow_guard_budget_is_optional(rec):
    assert ShadowGuard(tracer_provider=rec.provider).budget is None


def test_the_gate_and_the_guard_say_the_same_thing():
    with pytest.raises(SettingsError) as gate_err:
        Gate(Scripted(), budget=100, hard_ceiling=50)
    assert str(gate_err.value) == limits_problem(100, 50)


def test_good_settings_construct(rec):
    pg = PruneGuard("recency", budget=3000, hard_ceiling=3000, mode="shrink", tracer_provider=rec.provider)
    assert (pg.budget, pg.hard_ceiling, pg.errors) == (3000, 3000, 0)


def test_the_command_line_says_it_through_the_same_function(tmp_path):
    from tests.servers import run_prunegate

    done = run_prunegate("replay", "--store", str(tmp_path / "store"), "--policy", "recency",
                         "--budget", "100", "--hard-ceiling", "50")
    assert done.returncode == 2, done.stderr
    assert limits_problem(100, 50, names=("--budget", "--hard-ceiling")) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
