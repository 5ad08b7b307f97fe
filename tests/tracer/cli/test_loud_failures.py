"""Failures inside prunegate's own wiring surface instead of being skipped."""

from __future__ import annotations

import sys

import pytest

from tracer.cli import main


def test_a_command_module_that_fails_to_import_fails_the_cli(monkeypatch):
    # None in sys.modules makes the import raise ModuleNotFoundError naming the module itself:
    # exactly the case the CLI used to skip silently, leaving the command out of --help.
    monkeypatch.setitem(sys.modules, "tracer.cli.sessions", None)
    with pytest.raises(ImportError, match="tracer.cli.sessions"):
        main(["sessions", "--help"])


def test_the_validators_are_part_of_the_policies_surface():
    import policies

    module = sys.modules["policies.validate"]  # the package attribute is the function, not the module
    assert {"Violation", "is_valid", "validate"} <= set(policies.__all__)
    assert (policies.Violation, policies.is_valid, policies.validate) == (module.Violation, module.is_valid,
                                                                        module.validate)
