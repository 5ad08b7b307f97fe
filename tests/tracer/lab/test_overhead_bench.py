"""bench/bench_overhead.py runs end to end on a few sessions and prints every line it promises.

Its figures are not asserted (speed belongs to the benchmark, not to timed asserts); what is: it
runs, each part prints its ratio with a verdict, the burst's spans are counted in the store, and the
conversion line compares the C accelerator with the Python path where the accelerator is built.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tracer.store import rows

ROOT = Path(__file__).resolve().parents[3]


def test_the_overhead_benchmark_runs_and_prints_each_part():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_overhead.py"), "--sessions", "4", "--rounds", "1",
         "--burst", "3000", "--skip", "compare,store,rss"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert re.search(r"^replay rate traced/untraced\s+\d+\.\d\dx .*(OK|BELOW FLOOR)", text, re.M), text
    assert re.search(r"^burst of 3000: 3000 spans in the store, lost 0 .* OK$", text, re.M), text
    if rows.ACCELERATOR is not None:
        assert re.search(r"conversion per span \(diagnostic\)\s+C accelerator \d+\.\d\d µs, Python path \d+\.\d\d µs",
                         text), text
        assert "the C accelerator converts span records" in text.splitlines()[0]
    if "no τ-bench traffic" not in text:  # the check part needs the τ-bench traffic beside the clone
        assert re.search(r"^budget check traced/untraced\s+\d+\.\d\dx .*(OK|BELOW FLOOR)", text, re.M), text
