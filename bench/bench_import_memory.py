"""Peak memory of ``prunegate import`` against the size of its input (issue #26: RSS flat in input size).

Each run is a fresh ``python -m tracer.cli import FILE --store DIR`` process; its peak resident set
is the kernel's ``ru_maxrss`` for that process (``os.wait4``). Inputs are generated (JSONL request
bodies, each line a conversation of two ~250 KB messages, so the spans are few and the bytes many),
at 10 MB, 100 MB and 1 GB, plus a decompression bomb: a ``.gz`` of a few MB holding one 1.5 GiB
line, which import must refuse at the per-file cap without inflating it into memory.

    python bench/bench_import_memory.py [--sizes 10,100,1000] [--keep DIR]

Prints one line per input: size, exit status, seconds, peak RSS (MB), spans stored.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINE_TEXT = 250_000


def make_jsonl(path: Path, megabytes: int) -> int:
    """JSONL of conversations until ``megabytes`` MB; returns the number of lines."""
    target = megabytes * 1_000_000
    written = n = 0
    words = "the flight to Paris leaves at nine and the booking is confirmed " * (LINE_TEXT // 64)
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            body = {"id": f"conv-{n}", "model": "gpt-4o", "messages": [
                {"role": "user", "content": f"{n} " + words},
                {"role": "assistant", "content": f"answer {n} " + words[::-1]},
            ]}
            line = json.dumps(body) + "\n"
            f.write(line)
            written += len(line)
            n += 1
    return n


def make_bomb(path: Path, gib: float = 1.5) -> None:
    """A .gz holding one line of ``gib`` GiB (a JSON string that never ends)."""
    chunk = b"a" * (1 << 24)
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b'{"id": "bomb", "messages": [{"role": "user", "content": "')
        for _ in range(int(gib * 1024**3) // len(chunk)):
            f.write(chunk)


def measure(src: Path, store: Path, env: dict[str, str]) -> tuple[int, float, float, str, str]:
    """Run the import and read its own peak RSS (KiB on Linux) from wait4."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "import", "--json", str(src), "--store", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.monotonic() - start, usage.ru_maxrss / 1024, out.decode(), err.decode().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000", help="input sizes in MB (default 10,100,1000)")
    parser.add_argument("--keep", help="work directory to keep (default: a temp dir, removed)")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="prunegate-import-rss-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PRUNEGATE_STORE": "", "PRUNEGATE_SPOOL_DIR": str(work / "spool")}
    print(f"{'input':<34}{'rc':>4}{'seconds':>9}{'peak RSS MB':>13}  result")
    try:
        for mb in (int(x) for x in args.sizes.split(",")):
            src = work / f"bodies-{mb}mb.jsonl"
            lines = make_jsonl(src, mb)
            rc, secs, rss, out, err = measure(src, work / f"store-{mb}", env)
            got = json.loads(out) if out.strip() else {}
            what = f"{got.get('sessions')} sessions, {got.get('spans')} spans stored" if got else err[-160:]
            print(f"{f'{src.stat().st_size / 1e6:,.0f} MB JSONL ({lines} lines)':<34}{rc:>4}{secs:>9.1f}{rss:>13.0f}  {what}",
                  flush=True)
            src.unlink()
            shutil.rmtree(work / f"store-{mb}", ignore_errors=True)
        bomb = work / "bomb.jsonl.gz"
        make_bomb(bomb)
        rc, secs, rss, out, err = measure(bomb, work / "store-bomb", env)
        refused = (json.loads(out).get("refused") or [{}]) if out.strip() else [{"reason": err}]
        print(f"{f'{bomb.stat().st_size / 1e6:,.1f} MB .gz holding 1.5 GiB':<34}{rc:>4}{secs:>9.1f}{rss:>13.0f}  "
              f"refused: {str(refused[0].get('reason'))[:140]}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
