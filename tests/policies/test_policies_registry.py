"""Policies by name: built-ins with defaults, parameter errors, and a third-party entry point."""

from __future__ import annotations

import importlib
import sys
import tomllib
from pathlib import Path

import pytest

from policies import (
    Context,
    DecisionKind,
    Gate,
    Policy,
    PolicyError,
    available,
    get_policy,
    register,
    registry,
    text_message,
)
from policies.registry import BUILTINS, ENTRY_POINT_GROUP
from tests.invariants import assert_consistent
from tests.paths import REPO

EXAMPLE = REPO / "tests" / "example_policy"


def test_every_builtin_is_available_and_works_with_no_parameters():
    assert set(BUILTINS) <= set(available())
    assert {"recency", "salience", "similarity", "mask", "head_tail", "summarize", "tiered",
            "langchain_trim"} <= set(BUILTINS)
    for name in BUILTINS:
        policy = get_policy(name)
        assert isinstance(policy, Policy) and policy.name == name


@pytest.mark.parametrize(
    "name,params,message",
    [
        ("recency", {"target": 0}, "recency: target must be in (0, 1], got 0"),
        ("recency", {"target": "0.8"}, "recency: target must be a number in (0, 1], got '0.8' (str)"),
        ("recency", {"target": True}, "recency: target must be a number in (0, 1], got True (bool)"),
        ("salience", {"scorer": "age"}, "salience: scorer must be a callable (message, features) -> float"),
        ("salience", {"max_df": 2}, "salience: max_df must be in (0, 1], got 2"),
        ("similarity", {"embed": 3}, "similarity: embed must be a callable (texts) -> vectors, got 3 (int)"),
        ("mask", {"keep_last": -1}, "mask: keep_last must be >= 0, got -1"),
        ("mask", {"keep_last": 2.5}, "mask: keep_last must be an integer >= 0, got 2.5 (float)"),
        ("mask", {"tools": [""]}, "mask: tools[0] must be a non-empty string"),
        ("mask", {"tools": ["a"], "exclude_tools": ["a"]}, "'a' is both in tools and in exclude_tools"),
        ("mask", {"preview_chars": 10**6}, "mask: preview_chars must be in [0, 2000]"),
        ("head_tail", {"tail": 0}, "head_tail: tail must be >= 1, got 0"),
        ("head_tail", {"head": None}, "head_tail: head must be an integer >= 0, got None"),
        ("summarize", {"summarizer": "gpt-4o"}, "summarize: summarizer must be a callable (messages) -> str"),
        ("summarize", {"min_units": 0}, "summarize: min_units must be >= 1, got 0"),
        ("tiered", {"stages": ["mask", "drop"]}, "tiered: stages[] must be one of 'mask', 'summarize', 'evict'"),
        ("tiered", {"stages": "mask"}, "tiered: stages must be a non-empty list"),
        ("tiered", {"stages": ["mask", "mask"]}, "tiered: stages lists a stage twice"),
        ("langchain_trim", {"strategy": "middle"}, "langchain_trim: strategy must be one of 'last', 'first'"),
        ("langchain_trim", {"max_tokens": 0}, "langchain_trim: max_tokens must be >= 1, got 0"),
        ("langchain_trim", {"strategy": "first", "include_system": True}, "only apply to strategy 'last'"),
    ],
)
def test_bad_parameters_fail_at_construction_naming_policy_and_parameter(name, params, message):
    with pytest.raises(PolicyError) as err:
        get_policy(name, **params)
    assert message in str(err.value)


def test_unknown_names_and_parameters_get_suggestions():
    with pytest.raises(PolicyError, match=r"unknown policy 'recncy' \(did you mean 'recency'\?\); available: "):
        get_policy("recncy")
    with pytest.raises(PolicyError, match=r"policy 'mask' has no parameter 'keep' \(did you mean 'keep_last'\?\); "
                                          r"it takes: target, keep_last, preview_chars, tools, exclude_tools"):
        get_policy("mask", keep=2)


def test_a_required_parameter_and_a_factory_error_are_policy_errors(monkeypatch):
    class NeedsWindow:
        name = "needs_window"

        def __init__(self, window: int) -> None:
            if window > 10:
                raise ValueError("window too large")
            self.window = window

        def propose(self, view):  # pragma: no cover - never called
            raise AssertionError

    # registered for this test only: other tests run every name in available()
    monkeypatch.setattr(registry, "_registered", {})
    register("needs_window", NeedsWindow)
    with pytest.raises(PolicyError, match="policy 'needs_window' needs the parameter 'window'"):
        get_policy("needs_window")
    with pytest.raises(PolicyError, match="policy 'needs_window': window too large"):
        get_policy("needs_window", window=11)
    register("not_a_policy", lambda: object())
    with pytest.raises(PolicyError, match="did not produce a policy"):
        get_policy("not_a_policy")
    assert "needs_window" in available()


# --------------------------------------------------------------------------- third-party entry points
def install_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str | None = None) -> None:
    """What ``pip install tests/example_policy`` leaves behind, without pip or a network.

    The distribution's metadata (a ``.dist-info`` with ``entry_points.txt`` generated from the
    example's own pyproject.toml) goes to a temporary directory on ``sys.path``, beside the module.
    """
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][ENTRY_POINT_GROUP]
    if entry_points is None:
        entry_points = f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items())
    dist = tmp_path / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (dist / "entry_points.txt").write_text(entry_points)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _forget_example_module():
    yield
    sys.modules.pop("prunegate_example_policy", None)  # "uninstall": later tests see only the built-ins


def test_a_third_party_policy_is_found_through_its_entry_point(tmp_path, monkeypatch):
    assert "example_keep_last" not in available()
    install_example(tmp_path, monkeypatch)
    assert "example_keep_last" in available()
    policy = get_policy("example_keep_last", keep=2)
    assert type(policy).__module__ == "prunegate_example_policy" and policy.name == "example_keep_last"
    with pytest.raises(PolicyError, match="example_keep_last: keep must be an integer >= 0, got -1"):
        get_policy("example_keep_last", keep=-1)
    with pytest.raises(PolicyError, match="has no parameter 'window'"):
        get_policy("example_keep_last", window=3)

    ctx = Context()
    ctx.append(text_message("", "system", "sys"))
    ctx.append(text_message("", "user", "first"))
    for i in range(6):
        ctx.append(text_message("", "assistant", f"answer {i} " * 30))
    ctx.append(text_message("", "user", "last"))
    d = Gate(policy, budget=ctx.tokens - 1).check(ctx)
    assert d.kind == DecisionKind.PRUNED and d.policy == "example_keep_last"
    assert [m.plain_text() for m in ctx.messages][:2] == ["sys", "first"] and len(ctx) == 4
    assert_consistent(ctx)


def test_a_broken_entry_point_is_reported_by_name(tmp_path, monkeypatch):
    install_example(tmp_path, monkeypatch, f"[{ENTRY_POINT_GROUP}]\nbroken_policy = no_such_module_here:Policy\n")
    with pytest.raises(PolicyError, match=r"policy 'broken_policy' \(entry point no_such_module_here:Policy\) "
                                          r"failed to load: No module named 'no_such_module_here'"):
        get_policy("broken_policy")
