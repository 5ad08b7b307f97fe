"""`prunegate serve` ingest rate: the OTel SDK's OTLPSpanExporter (protobuf, gzip) into a served store.

    .venv/bin/python bench/bench_serve.py                   # 20000 spans, batches of 512
    .venv/bin/python bench/bench_serve.py --spans 100000 --batch 2048

Starts `prunegate serve` as a process on 127.0.0.1, exports the spans from this process, and
counts them in the store (each span id once) once the exporter's flush returns: every 200 the
exporter got was sent after its segment was committed.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from tracer.store import Store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=512)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pg-bench-serve-") as tmp:
        store = Path(tmp) / "store"
        proc = subprocess.Popen([str(Path(sys.executable).parent / "prunegate"), "serve", "--store", str(store),
                                 "--port", "0"], stdout=subprocess.PIPE, text=True)
        url = (proc.stdout.readline() if proc.stdout else "").split(" on ", 1)[1].split(" ", 1)[0]
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=url, compression=Compression.Gzip), max_queue_size=args.spans,
            max_export_batch_size=args.batch, schedule_delay_millis=100))
        tracer = provider.get_tracer("bench")
        t = time.perf_counter()
        for i in range(args.spans):
            with tracer.start_as_current_span("step") as span:
                span.set_attribute("gen_ai.conversation.id", f"c{i // 50}")
                span.set_attribute("i", i)
        provider.force_flush(120_000)
        seconds = time.perf_counter() - t
        provider.shutdown()
        row = Store(store).query("SELECT count(*) AS n, count(DISTINCT span_id) AS d FROM spans")[0]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    print(f"{args.spans} spans exported in batches of {args.batch}: {seconds:.2f} s, {args.spans / seconds:.0f} spans/s "
          f"committed; in the store: {row['n']} spans, {row['d']} distinct ids")
    print(out.strip().splitlines()[-1])
    return 0 if row["n"] == row["d"] == args.spans else 1


if __name__ == "__main__":
    sys.exit(main())
