"""Every hostile input of issue #26, through the command a user runs: one line on stderr, a named
exit status (2: usage or cannot; 1: some input refused), never a traceback, and the store still
readable afterwards. In-process ``main([...])`` except where the fault needs its own process (a
process without CAP_DAC_OVERRIDE)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO, SESSIONS
from tracer.cli import main
from tracer.cli import status as st
from tracer.store import Store

SHIPPED = sorted(SESSIONS.glob("*.jsonl"))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A store of one shipped file, compacted, plus the hostile input files."""
    root = tmp_path_factory.mktemp("hostile")
    store = root / "S"
    assert main(["import", str(SHIPPED[0]), "--store", str(store)]) == 0
    assert main(["compact", "--store", str(store)]) == 0
    (root / "digits.jsonl").write_text('{"id": "n", "model": "gpt-4o", "max_tokens": ' + "9" * 5000
                                       + ', "messages": [{"role": "user", "content": "hi"}]}\n')
    (root / "surrogate.jsonl").write_text('{"id":"s","model":"gpt-4o","messages":[{"role":"user","content":"\\ud800"}]}\n')
    (root / "garbage.jsonl.gz").write_bytes(b"\x1f\x8b" + bytes(range(256)) * 8)
    (root / "garbage.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(256)) * 8)
    span = {"traceId": "ab" * 16, "spanId": "11" * 8, "name": "x", "startTimeUnixNano": str(2**64 - 1),
            "endTimeUnixNano": "1"}
    (root / "huge-time.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    with gzip.open(root / "bomb.jsonl.gz", "wb") as f:
        f.write(b'{"id": "bomb", "messages": [{"role": "user", "content": "' + b"a" * 3_000_000)
    return root


@pytest.fixture()
def store(base, tmp_path) -> Path:
    copy = tmp_path / "S"
    shutil.copytree(base / "S", copy)
    return copy


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


# (id, argv with {store} and {base}, environment, exit status, what the one line says)
CASES = [
    ("5000-digit integer: import", ["import", "{base}/digits.jsonl"], {}, st.FOUND_PROBLEMS, "4300 digits"),
    ("5000-digit integer: validate", ["validate", "{base}/digits.jsonl", "--provider", "openai"], {}, st.ERROR,
     "4300 digits"),
    ("garbage .gz", ["import", "{base}/garbage.jsonl.gz"], {}, st.FOUND_PROBLEMS, "cannot decompress"),
    ("garbage .zst", ["import", "{base}/garbage.jsonl.zst"], {}, st.FOUND_PROBLEMS, "cannot decompress"),
    ("huge OTLP time", ["import", "{base}/huge-time.json"], {}, st.FOUND_PROBLEMS, "out of range"),
    ("/dev/zero", ["import", "/dev/zero"], {}, st.FOUND_PROBLEMS, "not a regular file"),
    ("decompression bomb", ["import", "{base}/bomb.jsonl.gz"], {"PRUNEGATE_MAX_INPUT_BYTES": "1000000"},
     st.FOUND_PROBLEMS, "too large"),
    ("PRUNEGATE_MAX_INPUT_BYTES=abc", ["import", "{base}/surrogate.jsonl"], {"PRUNEGATE_MAX_INPUT_BYTES": "abc"},
     st.ERROR, "$PRUNEGATE_MAX_INPUT_BYTES must be a positive integer"),
    ("PRUNEGATE_MAX_FILE_BYTES=-1", ["import", "{base}/surrogate.jsonl"], {"PRUNEGATE_MAX_FILE_BYTES": "-1"},
     st.ERROR, "$PRUNEGATE_MAX_FILE_BYTES must be a positive integer"),
]


@pytest.mark.parametrize(("argv", "env", "want", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_hostile_input_is_one_line_and_a_named_status(base, store, monkeypatch, capsys, argv, env, want, says):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = [a.format(base=base, store=store) for a in argv]
    if args[0] in ("import", "sessions", "replay", "compact", "annotate", "export", "compare", "recover"):
        args += ["--store", str(store)]
    before = Store(store).count()
    capsys.readouterr()
    assert main(args) == want
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if says in line]
    assert err and "Traceback" not in captured.err + captured.out, captured.err
    for key in env:
        monkeypatch.delenv(key)
    assert Store(store).count() == before  # the store reads, and nothing of the refused input is in it


def _damage(store: Path) -> None:
    (store / "spans.duckdb").write_bytes(b"")


def _surrogate(store: Path) -> None:
    src = store.parent / "surrogate.jsonl"
    src.write_text('{"id":"s","model":"gpt-4o","messages":[{"role":"user","content":"\\ud800"}]}\n')
    assert main(["import", str(src), "--store", str(store)]) == 0


def _newer(store: Path) -> None:
    (store / "prunegate-store.json").write_text('{"format": "prunegate-store", "schema_version": 999}')


READERS = [["sessions"], ["replay", "--policy", "recency"], ["compare", "--policies", "recency,mask"],
           ["annotate", "--list"], ["export", "--otlp-endpoint", "http://127.0.0.1:9"]]


@pytest.mark.parametrize("argv", READERS, ids=[a[0] for a in READERS])
@pytest.mark.parametrize(("fault", "want", "says"), [
    (_damage, st.ERROR, "prunegate recover --store"),
    (_newer, st.ERROR, "store schema 999"),
], ids=["damaged spans.duckdb", "schema 999"])
def test_every_reader_on_a_bad_store_is_one_line(store, capsys, argv, fault, want, says):
    fault(store)
    capsys.readouterr()
    assert main([*argv, "--store", str(store)]) == want
    assert says in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("argv", [["sessions"], ["compact"], ["replay", "--policy", "recency"],
                                  ["annotate", "--list"]], ids=lambda a: a[0])
def test_a_lone_surrogate_in_the_store_breaks_no_command(store, capsys, argv):
    _surrogate(store)
    assert main([*argv, "--store", str(store)]) == st.SUCCESS, capsys.readouterr().err
    assert len(Store(store).sessions()) >= 2


SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None, reason="needs root and setpriv to drop CAP_DAC_OVERRIDE")
@pytest.mark.parametrize("argv", [["sessions"], ["import", str(SHIPPED[1])], ["replay", "--policy", "recency"],
                                  ["annotate", "--list"], ["compare", "--policies", "recency,mask"],
                                  ["export", "--otlp-endpoint", "http://127.0.0.1:9"]], ids=lambda a: a[0])
def test_a_store_this_process_may_not_read_is_one_line(store, argv):
    os.chmod(store, 0o000)
    try:
        run = subprocess.run([SETPRIV, "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-m",
                              "tracer.cli", *argv, "--store", str(store)], capture_output=True, text=True,
                             cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "PRUNEGATE_STORE": ""}, timeout=120)
    finally:
        os.chmod(store, 0o755)
    assert run.returncode == st.ERROR, run.stderr
    assert "permission denied" in one_line(run.stderr).lower()


def test_settings_and_engines_that_cannot_work_are_one_line(store, monkeypatch, capsys):
    monkeypatch.setenv("PRUNEGATE_S3_ENDPOINT", "not-a-url")
    assert main(["sessions", "--store", "s3://bucket/prefix"]) == st.ERROR
    assert "$PRUNEGATE_S3_ENDPOINT 'not-a-url' is not an endpoint URL" in one_line(capsys.readouterr().err)
    monkeypatch.delenv("PRUNEGATE_S3_ENDPOINT")
    pytest.importorskip("ray")
    assert main(["compare", "--store", str(store), "--engine", "ray", "--address", "ray://127.0.0.1:1",
                 "--policies", "recency,mask", "--no-trace"]) == st.ERROR
    assert "cannot start or reach the Ray cluster at ray://127.0.0.1:1" in one_line(capsys.readouterr().err)


def test_compare_on_one_session_prints_its_table(store, capsys):
    sid = Store(store).sessions()[0]["session_id"]
    assert main(["compare", "--store", str(store), "--session", sid, "--policies", "recency,mask", "--no-trace"]) == 0
    out = capsys.readouterr().out
    assert "[no CI: 1 session]" in out and "recency" in out


BAD_ARGS = [
    (["serve", "--port", "70000"], "between 1 and 65535"),
    (["serve", "--token", ""], "non-empty"),
    (["dashboard", "--host", "bogus.invalid"], "--host 'bogus.invalid'"),
    (["demo", "--workers", "0"], "positive integer"),
    (["demo", "--tau", "-1"], "non-negative integer"),
    (["compare", "--budget", "100,,200", "--policies", "recency"], "empty item"),
    (["import", str(SHIPPED[0]), "--otlp-endpoint", "not-a-url"], "expected an http(s) URL"),
    (["import", str(SHIPPED[0]), "--otlp-endpoint", "http://127.0.0.1:9", "--otlp-header", "bad"], "expected K=V"),
]


@pytest.mark.parametrize(("argv", "says"), BAD_ARGS, ids=[" ".join(a[:3]) for a, _ in BAD_ARGS])
def test_bad_arguments_are_refused_before_any_work(tmp_path, capsys, argv, says):
    store = tmp_path / "fresh"
    try:
        code = main([*argv, "--store", str(store)])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == st.ERROR
    assert says in one_line(capsys.readouterr().err)
    assert not store.exists()  # nothing imported, nothing served, nothing created


def test_annotate_list_shows_escapes_instead_of_obeying_them(store, capsys):
    sid = Store(store).sessions()[0]["session_id"]
    assert main(["annotate", sid, "--label", "bug", "--note", "\x1b[31mred\x1b[0m", "--store", str(store)]) == 0
    capsys.readouterr()
    assert main(["annotate", "--list", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mred" in out
