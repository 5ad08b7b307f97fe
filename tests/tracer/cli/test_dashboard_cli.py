"""``prunegate dashboard``: the command line, and a real server on 127.0.0.1 started and stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard_fixtures import scripted_store
from tests.paths import REPO
from tests.servers import free_port, wait_for_http
from tracer.cli import main
from tracer.cli.launch import dashboard_command


def test_the_command_neither_imports_nor_searches_for_the_dashboard() -> None:
    code = ("import sys, importlib.util, tracer.cli as c; "
            "importlib.util.find_spec = None; "  # the command may not look the package up either
            "c.build_parser('dashboard'); import tracer.cli.launch as d; d.dashboard_command('127.0.0.1', 1); "
            "assert not [m for m in sys.modules if m == 'dashboard' or m.startswith('dashboard.')]")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_python_m_dashboard_runs_the_app_file() -> None:
    from dashboard.__main__ import APP

    assert APP == REPO / "dashboard" / "app.py"


def test_the_server_runs_without_a_file_watcher_or_a_collection_per_run_unless_told() -> None:
    from dashboard.__main__ import with_defaults

    gc_off = ["--runner.postScriptGC", "false", "--runner.magicEnabled", "false"]
    assert with_defaults(["--server.port", "8599"], {}) == ["--server.port", "8599",
                                                            "--server.fileWatcherType", "none", *gc_off]
    assert with_defaults(["--server.fileWatcherType", "poll"], {}) == ["--server.fileWatcherType", "poll", *gc_off]
    assert with_defaults(["--server.fileWatcherType=auto"], {}) == ["--server.fileWatcherType=auto", *gc_off]
    assert with_defaults([], {"STREAMLIT_SERVER_FILE_WATCHER_TYPE": "auto"}) == gc_off
    assert with_defaults(["--runner.postScriptGC=true"], {"STREAMLIT_SERVER_FILE_WATCHER_TYPE": "auto"}) == [
        "--runner.postScriptGC=true", "--runner.magicEnabled", "false"]
    assert with_defaults([], {"STREAMLIT_RUNNER_POST_SCRIPT_GC": "true", "STREAMLIT_RUNNER_MAGIC_ENABLED": "true"}) == [
        "--server.fileWatcherType", "none"]


def test_the_server_defaults_are_options_streamlit_has() -> None:
    """A misspelt option would stop the server at start; the values are the ones Streamlit parses."""
    from streamlit import config

    from dashboard.__main__ import DEFAULTS

    options = config.get_config_options()
    assert options["server.fileWatcherType"].default_val == "auto"
    assert options["runner.postScriptGC"].default_val is True  # the collection per run this turns off
    assert options["runner.magicEnabled"].default_val is True
    assert {o.removeprefix("--") for o in DEFAULTS} <= set(options)


def test_dashboard_command_line() -> None:
    cmd = dashboard_command("127.0.0.1", 8599)
    assert cmd[:3] == [sys.executable, "-m", "dashboard"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert flags == {"--server.address": "127.0.0.1", "--server.port": "8599", "--server.headless": "true",
                     "--browser.gatherUsageStats": "false", "--client.toolbarMode": "viewer"}


@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_bad_port_is_refused(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["dashboard", "--port", port])
    assert exc.value.code == 2
    assert "--port must be" in capsys.readouterr().err


def test_store_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_dir = tmp_path / "spans.txt"
    not_a_dir.write_text("x")
    with pytest.raises(SystemExit) as exc:  # a usage error, like every subcommand's: one line, exit 2
        main(["dashboard", "--store", str(not_a_dir)])
    assert exc.value.code == 2
    assert f"argument --store: {not_a_dir} is not a directory" in capsys.readouterr().err


def test_real_server_serves_the_store_and_stops_with_sigterm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    scripted_store(store)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "dashboard", "--store", str(store), "--port",
                             str(port)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base + "/_stcore/health", proc, "the dashboard", seconds=60, expect=b"ok",
                      output=lambda: proc.stdout.read().decode() if proc.stdout else "no output")
        with urllib.request.urlopen(base + "/", timeout=5) as resp:
            assert resp.status == 200 and b"<html" in resp.read().lower()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert f"serving {store} on http://127.0.0.1:{port}" in out
    assert code in (0, -signal.SIGTERM), out  # not 250: a cache warm-up inside DuckDB aborted the exit
    assert "No runtime found" not in out  # Streamlit's notice about the warm-up's caches is not shown
    with pytest.raises(OSError):  # streamlit went down with it: nothing listens any more
        urllib.request.urlopen(base + "/_stcore/health", timeout=2)


def test_missing_store_is_announced_not_fatal(tmp_path: Path) -> None:
    # the server starts on a store that does not exist yet (sessions appear as they are recorded)
    port = free_port()
    missing = tmp_path / "later"
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "dashboard", "--store", str(missing), "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/_stcore/health", proc, "the dashboard", seconds=60, expect=b"ok")
        assert not missing.exists()  # serving it creates nothing
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert f"{missing} does not exist yet" in out


def _serve_once(store: Path, *extra: str) -> str:
    """Start ``prunegate dashboard`` on ``store``, wait until it answers, stop it; its output."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "dashboard", "--store", str(store), "--port",
                             str(port), *extra], cwd=store.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/_stcore/health", proc, "the dashboard", seconds=120,
                      expect=b"ok", output=lambda: proc.stdout.read().decode() if proc.stdout else "no output")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    return proc.stdout.read().decode() if proc.stdout else ""


def _many_segments(store: Path) -> int:
    from tests.traffic import CASSETTES, TAU
    from tracer.store import Store
    from tracer.traffic import import_paths

    report = import_paths([TAU, CASSETTES], store, batch_spans=20)  # a segment per session
    assert report.complete
    pending = len(Store(store).pending_segments())
    assert pending >= 16
    return report.spans


def test_a_store_of_many_segments_is_compacted_before_it_is_served(tmp_path: Path) -> None:
    from tracer.store import Store

    store = tmp_path / "store"
    spans = _many_segments(store)
    out = _serve_once(store)
    assert "compacting" in out and "compacted" in out, out
    st = Store(store)
    assert st.pending_segments() == []  # read back: every span is in spans.duckdb, once
    assert st.query("SELECT count(*) AS n, count(DISTINCT span_id) AS d FROM spans")[0] == {"n": spans, "d": spans}


def test_no_compact_serves_the_segments_as_they_are(tmp_path: Path) -> None:
    from tracer.store import Store

    store = tmp_path / "store"
    _many_segments(store)
    before = len(Store(store).pending_segments())
    out = _serve_once(store, "--no-compact")
    assert "compacting" not in out, out
    assert len(Store(store).pending_segments()) == before
