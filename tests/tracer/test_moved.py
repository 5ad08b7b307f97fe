"""Import paths earlier docs named still work, with a DeprecationWarning naming the new home."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.paths import REPO
from tracer._moved import MOVED

PAIRS = [(old, new, name) for old, targets in MOVED.items() for new, names in targets.items() for name in names]


@pytest.mark.parametrize("old,new,name", PAIRS)
def test_an_old_path_warns_and_gives_the_same_object(old, new, name):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated; import {name} from {new}"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)


def test_the_warning_points_at_the_users_import_line():
    code = "import warnings; warnings.simplefilter('error')\nfrom tracer.instrument import PruneGuard\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert 'File "<string>", line 2' in done.stderr
    assert "DeprecationWarning: tracer.instrument is deprecated; import PruneGuard from tracer.guard" in done.stderr


def test_an_unknown_name_on_an_old_path_is_an_import_error():
    with pytest.raises(ImportError):
        exec("from tracer.instrument import NoSuchThing", {})
