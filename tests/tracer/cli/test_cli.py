"""The ``prunegate`` command line: a lazy command table, options and the store path defined once,
named exit statuses, one line per error, and a demo that calls functions instead of the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from policies import PolicyError, PruneBoundaryViolation
from policies.errors import PrunegateError
from tests.paths import REPO, SESSIONS
from tracer import errors
from tracer.cli import COMMANDS, main, status
from tracer.contract.settings import ENVIRONMENT, STORE_ENV
from tracer.store import Store, resolve_store

CLI = REPO / "tracer" / "cli"


def test_help_imports_no_command_module_and_no_pyarrow() -> None:
    code = ("import sys\nfrom tracer.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "from tracer.cli import COMMANDS\n"
            "loaded = sorted(i.module for i in COMMANDS.values() if i.module in sys.modules)\n"
            "assert not loaded, loaded\nassert 'pyarrow' not in sys.modules\nassert 'duckdb' not in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for var in ENVIRONMENT:
        assert var in run.stdout  # every PRUNEGATE_* variable is listed under "environment"


def test_help_lists_every_command_from_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert re.search(rf"^\s+{name}\s", out, re.M), name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_module_in_the_table_registers_its_parser(name: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert f"usage: prunegate {name}" in capsys.readouterr().out


def test_store_and_json_options_are_declared_once() -> None:
    """``--store``/``--json`` are written out in options.py only; commands call add_store/add_json."""
    for path in sorted(CLI.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "options.py":
            assert '"--store"' not in text and '"--json"' not in text, path.name


def test_prunegate_environment_variables_are_named_in_the_settings_module_only() -> None:
    offenders = []
    for pkg in ("policies", "tracer", "dashboard"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            if path.name == "settings.py" and path.parent.name == "contract":
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"""['"]PRUNEGATE_[A-Z_]+['"]""", line):
                    offenders.append(f"{path.relative_to(REPO)}:{n}")
    assert not offenders


def test_resolve_store_is_the_one_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "env-store"))
    assert resolve_store("given") == Path("given")
    assert resolve_store(None) == tmp_path / "env-store" == Store().path
    monkeypatch.delenv(STORE_ENV)
    monkeypatch.chdir(tmp_path)
    assert resolve_store(None) == tmp_path / "prunegate-store" == Store().path


def test_the_store_option_and_the_environment_reach_the_same_store(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    body = SESSIONS / "anthropic-parallel.jsonl"
    assert main(["import", str(body), "--store", str(tmp_path / "a")]) == status.SUCCESS
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "b"))
    assert main(["import", str(body)]) == status.SUCCESS
    capsys.readouterr()
    a, b = Store(tmp_path / "a").sessions(), Store(tmp_path / "b").sessions()
    assert a and len(a) == len(b)


def test_an_error_is_one_line_and_a_named_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing"
    assert main(["sessions", "--store", str(missing)]) == status.ERROR
    assert capsys.readouterr().err == f"prunegate sessions: no store at {missing}\n"
    assert main(["replay", "--policy", "no-such-policy", "--store", str(missing)]) == status.ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("prunegate replay: ") and "no-such-policy" in err
    assert main(["compact", "--store", str(missing)]) == status.ERROR
    assert capsys.readouterr().err == f"prunegate compact: no store at {missing}\n"


def test_a_damaged_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    (store / "segments").mkdir(parents=True)
    (store / "spans.duckdb").write_bytes(b"this is not a database")
    assert main(["sessions", "--store", str(store)]) == status.ERROR
    err = capsys.readouterr().err
    assert err.startswith("prunegate sessions: ") and err.count("\n") == 1 and "Traceback" not in err


def test_tracer_errors_have_one_root() -> None:
    classes = [errors.StoreError, errors.OtlpJsonError, errors.RedactionFailed, errors.ExportFailed,
               errors.InputError, errors.CommandError]
    for cls in classes:
        assert issubclass(cls, errors.TracerError) and issubclass(cls, PrunegateError), cls
    assert issubclass(errors.StoreError, RuntimeError) and issubclass(errors.OtlpJsonError, ValueError)
    assert issubclass(PruneBoundaryViolation, PrunegateError) and issubclass(PruneBoundaryViolation, RuntimeError)
    assert issubclass(PolicyError, PrunegateError)
    # the import paths the docs and callers use still work
    from tracer.store import StoreError
    from tracer.traffic.otlp_json import OtlpJsonError

    assert StoreError is errors.StoreError and OtlpJsonError is errors.OtlpJsonError


def test_no_error_class_is_defined_outside_the_errors_modules() -> None:
    found = []
    for pkg in ("tracer", "dashboard"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            if path == REPO / "tracer" / "errors.py":
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = re.match(r"class (\w+)\((?:\w+\.)?(\w*(?:Error|Exception|Failed))\b", line)
                if m and not m.group(1).startswith("_"):
                    found.append(f"{path.relative_to(REPO)}:{n}: {line}")
    assert not found


def test_demo_builds_the_store_by_calling_functions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No re-entry into the command line: the demo's steps are function calls, and what it built is in the store."""
    source = (CLI / "demo.py").read_text(encoding="utf-8")
    assert "import main" not in source and "cli(" not in source
    store = tmp_path / "demo"
    rc = main(["demo", "--store", str(store), "--no-serve", "--tau", "0", "--policies", "recency", "--workers", "1"])
    assert rc == status.SUCCESS, capsys.readouterr().err
    sessions = Store(store).sessions()
    sources = {s["source"] for s in sessions}
    assert sources == {"import", "replay"}
    imported = [s for s in sessions if s["source"] == "import"]
    replays = [s for s in sessions if s["source"] == "replay"]
    assert len(replays) == 2 * len(imported)  # recency, gated and ungated, per imported session
    assert (store / ".demo-built").exists() and not Store(store).pending_segments()
