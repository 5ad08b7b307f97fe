"""Import reads with bounded memory: a per-file limit on bytes read and decompressed, a per-line
limit, devices refused (issue #26). Peak RSS comes from the kernel (``os.wait4``) for a real
``prunegate import`` process; what was stored is read back from the store."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO
from tracer.cli import main
from tracer.store import Store


def _body(i: int, size: int = 100) -> str:
    return json.dumps({"id": f"c{i}", "model": "gpt-4o", "messages": [
        {"role": "user", "content": f"{i} " + "x" * size}, {"role": "assistant", "content": "ok"}]}) + "\n"


def _sessions(store: Path) -> int:
    return len(Store(store).sessions()) if store.exists() else 0


def _import(src: Path, store: Path, **env: str) -> tuple[int, float, dict, str]:
    """A real import process: exit status, peak RSS in MB, its --json report, stderr."""
    # The import runs as the child of a small wrapper interpreter: a child spawned straight from this
    # (long-lived, large) pytest process inherits its memory high-water mark through vfork+exec, so
    # its ru_maxrss would report pytest's size, not the import's.
    rss_file = store.parent / f"{store.name}.maxrss"
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(rss_file), sys.executable, "-m", "tracer.cli",
                             "import", "--json", str(src), "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), "PRUNEGATE_STORE": "", **env})
    out, err = proc.communicate()
    return proc.returncode, int(rss_file.read_text()) / 1024, json.loads(out) if out.strip() else {}, err.decode()


_WRAPPER = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[2:]); _, s, u = os.wait4(p.pid, 0); "
            "open(sys.argv[1], 'w').write(str(u.ru_maxrss)); sys.exit(os.waitstatus_to_exitcode(s))")


def test_dev_zero_is_refused_in_one_line(tmp_path, capsys):
    store = tmp_path / "S"
    assert main(["import", "/dev/zero", "--store", str(store)]) == 1
    err = capsys.readouterr().err
    assert "/dev/zero: not a regular file (a device)" in err and "Traceback" not in err
    assert _sessions(store) == 0


def test_the_per_file_limit_counts_the_whole_file_not_one_line(tmp_path, monkeypatch, capsys):
    src = tmp_path / "many.jsonl"
    src.write_text("".join(_body(i, 50_000) for i in range(6)))  # 6 lines of ~50 KB: 300 KB
    monkeypatch.setenv("PRUNEGATE_MAX_FILE_BYTES", "200000")
    assert main(["import", str(src), "--store", str(tmp_path / "S")]) == 1
    assert "300,726 bytes, over the per-file limit of 200,000 ($PRUNEGATE_MAX_FILE_BYTES)" in capsys.readouterr().err
    assert _sessions(tmp_path / "S") == 0
    monkeypatch.setenv("PRUNEGATE_MAX_FILE_BYTES", "1000000")
    monkeypatch.setenv("PRUNEGATE_MAX_INPUT_BYTES", "100000")  # per line: every line fits, the file does not
    assert main(["import", str(src), "--store", str(tmp_path / "S")]) == 0
    assert _sessions(tmp_path / "S") == 6


def test_a_decompression_bomb_is_refused_with_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as f:  # ~200 KB holding one 200 MB line
        f.write(b'{"id": "bomb", "messages": [{"role": "user", "content": "')
        for _ in range(200):
            f.write(b"a" * 1_000_000)
    assert bomb.stat().st_size < 2_000_000
    rc, rss, report, err = _import(bomb, tmp_path / "S", PRUNEGATE_MAX_INPUT_BYTES="16000000")
    assert rc == 1 and "Traceback" not in err
    (refused,) = report["refused"]
    assert refused["file"] == str(bomb) and "too large: a line over 16,000,000 bytes" in refused["reason"]
    assert rss < 260, f"peak RSS {rss:.0f} MB for a refused 200 MB line"
    assert _sessions(tmp_path / "S") == 0


def test_decompressed_bytes_count_against_the_per_file_limit(tmp_path):
    packed = tmp_path / "lines.jsonl.gz"
    with gzip.open(packed, "wb", compresslevel=1) as f:
        for i in range(400):
            f.write(_body(i, 20_000).encode())  # 8 MB once inflated
    rc, _, report, err = _import(packed, tmp_path / "S", PRUNEGATE_MAX_FILE_BYTES="1000000")
    assert rc == 1 and "Traceback" not in err
    assert any("decompressed over 1,000,000 bytes" in r["reason"] for r in report["refused"])
    assert _sessions(tmp_path / "S") == 0


def test_a_garbage_gz_is_one_refusal(tmp_path, capsys):
    junk = tmp_path / "junk.jsonl.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(3000))
    assert main(["import", str(junk), "--store", str(tmp_path / "S")]) == 1
    err = capsys.readouterr().err
    assert f"{junk}" in err and "cannot decompress" in err and "Traceback" not in err
