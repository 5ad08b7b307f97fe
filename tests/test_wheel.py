"""The distribution builds and installs as a user gets it: ``pip install .`` into a clean virtualenv,
then ``prunegate --help`` (and every command's ``--help``) run outside the repository, so nothing
comes from the checkout.

The build runs in pip's isolated build environment, so it uses the ``[build-system]`` requirements
of pyproject.toml (``setuptools>=77``, which the ``license = "MIT"`` form needs), fetched like any
user's build. The runtime dependencies are not installed (``--no-deps``): they are pip's business,
and ``prunegate --help`` and every command's ``--help`` must not need them (the command line imports
a command's module, and only that, when it runs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.paths import REPO
from tracer.cli import COMMANDS

SHIPPED = ("pyproject.toml", "setup.py", "README.md", "policies", "tracer", "dashboard")
pytestmark = pytest.mark.slow  # 183 s measured (pytest --durations, the shared 2-CPU machine under load)


def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python, prunegate = env_dir / "bin" / "python", env_dir / "bin" / "prunegate"
    pip_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}  # proxies kept
    source = tmp_path / "src"  # what a source checkout ships; built there, so no build/ lands in this one
    source.mkdir()
    for name in SHIPPED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            shutil.copy2(REPO / name, source / name)
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "-q", str(source)],
                             cwd=tmp_path, capture_output=True, text=True, env=pip_env, timeout=900)
    assert install.returncode == 0, install.stderr[-2000:]
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    for module in ("policies/gate.py", "tracer/contract/names.py", "tracer/wire/serve.py", "tracer/cli/__init__.py",
                   "dashboard/app.py", "dashboard/icon.png"):
        assert (site / module).is_file(), module
    assert not (site / "tests").exists()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    clean_env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH to the repo
    run = subprocess.run([str(prunegate), "--help"], cwd=outside, capture_output=True, text=True, env=clean_env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: prunegate")
    assert all(name in run.stdout for name in COMMANDS)
    where = subprocess.run([str(python), "-c", "import tracer; print(tracer.__file__)"], cwd=outside,
                           capture_output=True, text=True, env=clean_env, timeout=60)
    assert where.stdout.strip().startswith(str(site)), where.stdout  # the installed copy, not the checkout
    for name in COMMANDS:
        run = subprocess.run([str(prunegate), name, "--help"], cwd=outside, capture_output=True, text=True,
                             env=clean_env, timeout=120)
        assert run.returncode == 0, f"prunegate {name} --help: {run.stderr[-500:]}"
