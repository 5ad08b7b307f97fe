"""The store on an S3 stand-in (moto's server on 127.0.0.1): requests and time to answer before and after compaction.

    .venv/bin/python bench/bench_bucket.py                 # τ-bench (../shared/traffic) or synthetic sessions
    .venv/bin/python bench/bench_bucket.py --batch-spans 500

Imports the sessions into a local store (one segment per ~batch-spans spans, as many writers would
leave them), PUTs every segment to the bucket, then times count(*), the sessions view and one
session (its day known; whole objects, then ranged reads of footers and matching row groups, then
again with the footers cached) before and after compacting each day. Request and byte counts are
the client's own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.sources import TAU_FILE  # noqa: E402
from tracer.store import Store  # noqa: E402
from tracer.store.bucket import BucketStore, day_of  # noqa: E402
from tracer.store.object_cache import ObjectCache  # noqa: E402
from tracer.traffic.recorded import import_paths  # noqa: E402


def timed(bucket: BucketStore, sql: str, params=None, days=None, sessions=None) -> tuple[float, int, list, int]:
    before, got, t = bucket.requests, bucket.bytes_read, time.perf_counter()
    rows = bucket.query(sql, params, days=days, sessions=sessions)
    return (time.perf_counter() - t) * 1000, bucket.requests - before, rows, bucket.bytes_read - got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-spans", type=int, default=1000)
    args = ap.parse_args()
    from tests.servers import free_port, wait_for_port

    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, server, "moto_server", seconds=30)
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")
        client.create_bucket(Bucket="bench")
        with tempfile.TemporaryDirectory(prefix="pg-bench-bucket-") as tmp:
            if TAU_FILE.exists():
                src = TAU_FILE
            else:
                from tests.synthetic import synthetic_bodies

                src = Path(tmp) / "bodies.jsonl"
                src.write_text("\n".join(json.dumps(b) for b in synthetic_bodies(200)) + "\n")
            local = Store(Path(tmp) / "store")
            import_paths([src], local, batch_spans=args.batch_spans)
            bucket = BucketStore(client, "bench")
            for path in sorted(local.pending_segments()):
                bucket.write_table(pq.read_table(path))
            want = sorted(map(str, local.query("SELECT * FROM sessions")))
            sid = local.query("SELECT session_id, min(start_time_ns) AS t FROM spans GROUP BY 1 ORDER BY 1 LIMIT 1")[0]
            day = day_of(sid["t"])
            one_sql = "SELECT * FROM spans WHERE session_id = ? ORDER BY span_id"
            one_want = local.query(one_sql, [sid["session_id"]])
            for phase in ("before", "after"):
                objects = sum(len(bucket.keys(d)) for d in bucket.days())
                ms, n, rows, _ = timed(bucket, "SELECT count(*) AS n FROM spans")
                ms_s, n_s, sessions, _ = timed(bucket, "SELECT * FROM sessions")
                print(f"{phase:6} compaction: {rows[0]['n']} spans in {objects} objects | count(*) {ms:6.0f} ms "
                      f"{n:4d} requests | sessions view {ms_s:6.0f} ms {n_s:4d} requests (same as local: "
                      f"{sorted(map(str, sessions)) == want})")
                # one session, its day known: whole objects, then footers + the row groups that may hold it
                ms_w, n_w, whole, b_w = timed(bucket, one_sql, [sid["session_id"]], [day])
                ms_r, n_r, ranged, b_r = timed(bucket, one_sql, [sid["session_id"]], [day], [sid["session_id"]])
                ms_c, n_c, cached, b_c = timed(bucket, one_sql, [sid["session_id"]], [day], [sid["session_id"]])
                same = whole == ranged == cached == one_want
                print(f"       one session ({len(whole)} spans), day known: whole objects {n_w} requests "
                      f"{b_w / 1024:7.0f} KiB {ms_w:5.0f} ms | footers + row groups {n_r} requests {b_r / 1024:6.0f} KiB "
                      f"{ms_r:5.0f} ms | footers cached {n_c} requests {b_c / 1024:5.0f} KiB {ms_c:5.0f} ms "
                      f"(same rows: {same})")
                # the sessions view twice through the local object cache: the second read GETs nothing
                cached_bucket = BucketStore(client, "bench", cache=ObjectCache(Path(tmp) / f"cache-{phase}", "moto"))
                ms_1, n_1, first, b_1 = timed(cached_bucket, "SELECT * FROM sessions")
                ms_2, n_2, second, b_2 = timed(cached_bucket, "SELECT * FROM sessions")
                print(f"       sessions view with the object cache: first read {n_1} requests {b_1 / 1024:6.0f} KiB "
                      f"{ms_1:5.0f} ms | second read {n_2} requests {b_2 / 1024:5.0f} KiB {ms_2:5.0f} ms "
                      f"(same rows: {sorted(map(str, first)) == sorted(map(str, second)) == want})")
                if phase == "before":
                    t, r = time.perf_counter(), bucket.requests
                    done = [bucket.compact(d) for d in bucket.days()]
                    print(f"compaction of {len(done)} day(s): {(time.perf_counter() - t) * 1000:.0f} ms, "
                          f"{bucket.requests - r} requests")
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
