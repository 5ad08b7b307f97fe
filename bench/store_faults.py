"""Figures for the store's promise on real traffic: each fault, then sessions/spans read back.

    sudo .venv/bin/python bench/store_faults.py [INPUT]   # default ../shared/traffic τ-bench file

Needs root (a size-limited tmpfs and a read-only bind mount). Every count is read back from the
store (``SELECT session_id, count(*) FROM spans``), never taken from a command's own report.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sources import TAU_FILE  # noqa: E402
from tracer.store import Store  # noqa: E402


def cli(*args: str, env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracer.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, **kw)


def counts(store: Path) -> dict[str, int]:
    rows = Store(store).query("SELECT session_id, count(*) AS n FROM spans WHERE session_id IS NOT NULL GROUP BY 1")
    return {r["session_id"]: int(r["n"]) for r in rows}


def show(label: str, store: Path, ref: dict[str, int], rc: int | None = None) -> None:
    got = counts(store)
    exact = sum(1 for s, n in got.items() if ref.get(s) == n)
    print(f"  {label:<44} rc={rc if rc is not None else '-':<3} sessions {len(got):>4}  spans {sum(got.values()):>6}"
          f"  (exact per session: {exact}/{len(ref)})")


def spool_line(stderr: str) -> str:
    return next((line for line in stderr.splitlines() if "spool" in line), "").strip()


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else TAU_FILE
    work = Path(tempfile.mkdtemp(prefix="store-faults-"))
    env = {"PRUNEGATE_SPOOL_DIR": str(work / "spool")}
    ref_store = work / "ref"
    rc = cli("import", str(src), "--store", str(ref_store), env=env).returncode
    ref = counts(ref_store)
    print(f"input {src}: {len(ref)} sessions, {sum(ref.values())} spans (healthy import, rc={rc})")

    print("1. disk full (tmpfs of 2 MiB)")
    mnt = work / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        store = mnt / "store"
        run = cli("import", str(src), "--store", str(store), env=env)
        show("import onto the full disk", store, ref, run.returncode)
        print("   ", spool_line(run.stderr))
        moved = work / "moved"  # "free space": copy the store to a roomy disk, then recover
        shutil.copytree(store, moved)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)
    spool = next((work / "spool").iterdir())
    run = cli("recover", "--store", str(moved), "--spool-dir", str(spool), env=env)
    show("after prunegate recover", moved, ref, run.returncode)
    run = cli("import", str(src), "--store", str(moved), env=env)
    show("import again", moved, ref, run.returncode)
    shutil.rmtree(work / "spool")

    print("2. read-only store (read-only bind mount), imported twice")
    store, view = work / "rw", work / "ro"
    store.mkdir()
    view.mkdir()
    subprocess.run(["mount", "--bind", str(store), str(view)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
    try:
        for i in (1, 2):
            run = cli("import", str(src), "--store", str(view), env=env)
            print(f"   import #{i}: rc={run.returncode}; {spool_line(run.stderr)}")
        run = cli("compact", "--store", str(view), env=env)
        print(f"   compact: rc={run.returncode}; {run.stderr.strip()}")
    finally:
        subprocess.run(["umount", "-l", str(view)], check=True)
    spool = next((work / "spool").iterdir())
    run = cli("recover", "--store", str(store), "--spool-dir", str(spool), env=env)
    show("after prunegate recover (two spooled copies)", store, ref, run.returncode)

    print("3. four concurrent imports of one file")
    store = work / "four"
    procs = [subprocess.Popen([sys.executable, "-m", "tracer.cli", "import", "--json", str(src), "--store", str(store)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **env}) for _ in range(4)]
    outs = [p.communicate() for p in procs]
    per = [json.loads(o)["sessions"] for o, _ in outs]
    show(f"rc {[p.returncode for p in procs]}, committed {per}", store, ref)

    print("4. kill -9 mid-import (after the 3rd segment), then import again")
    store = work / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "import", str(src), "--store", str(store)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **env, "PRUNEGATE_FAULT_STOP": "segment-written:3"})
    while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    show("after kill -9", store, ref, proc.returncode)
    run = cli("import", str(src), "--store", str(store), env=env)
    show("import again", store, ref, run.returncode)

    print("5. a truncated and a zero-byte segment")
    store = work / "damaged"
    cli("import", str(src), "--store", str(store), "--batch-spans", "1000", env=env)
    segs = sorted((store / "segments").glob("*.parquet"))
    data = segs[1].read_bytes()
    segs[1].write_bytes(data[: len(data) // 2])
    (store / "segments" / "zero.parquet").write_bytes(b"")
    run = cli("sessions", "--store", str(store), env=env)
    show("sessions", store, ref, run.returncode)
    for line in run.stderr.splitlines():
        print("   ", line[:160])
    run = cli("compact", "--json", "--store", str(store), env=env)
    print(f"   compact rc={run.returncode} quarantined={json.loads(run.stdout)['quarantined']}")
    show("after compact", store, ref)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
