"""Each tracer wing declares its public surface in ``__all__`` (STYLE.md section 4): every name
resolves, none is shadowed by a submodule of the same name, and importing a wing stays cheap."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

from tests.paths import REPO

WINGS = ["tracer", "tracer.cli", "tracer.contract", "tracer.guard", "tracer.lab", "tracer.queries", "tracer.spans",
         "tracer.store", "tracer.traffic", "tracer.wire"]
LAZY = ["tracer", "tracer.guard", "tracer.lab", "tracer.spans", "tracer.traffic", "tracer.wire"]


@pytest.mark.parametrize("wing", WINGS)
def test_every_public_name_resolves_and_none_is_a_submodule(wing: str) -> None:
    package = importlib.import_module(wing)
    names = package.__all__
    assert names and len(names) == len(set(names)), f"{wing}.__all__ is empty or repeats a name"
    submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    assert not set(names) & submodules, f"{wing} exports a name that a submodule import would replace"
    for name in names:
        value = getattr(package, name)
        assert not isinstance(value, type(sys)), f"{wing}.{name} is a module, not a public name"
        if wing in LAZY:  # loaded on first use (tracer/_lazy.py), listed by dir() before that
            assert name in dir(package)


def test_importing_the_lazy_wings_loads_neither_the_sdk_nor_duckdb() -> None:
    code = ("import sys; import " + ", ".join(LAZY) + "; "
            "print(sorted(m for m in ('opentelemetry.sdk', 'duckdb', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
