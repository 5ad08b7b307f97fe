"""The store on an S3 stand-in (moto's server, started by the tests): same sessions view as the local store,
each span once (retried PUTs, compaction run twice), fewer requests after compaction."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.synthetic import synthetic_bodies
from tests.traffic import TAU
from tracer.store import Store
from tracer.store.bucket import BucketStore, day_of
from tracer.traffic import import_paths


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Store:
    """A local store of held-out traffic (τ-bench when present, else synthetic bodies), many segments."""
    root = tmp_path_factory.mktemp("local")
    if TAU.exists():
        src = root / "tau.json"
        dialogues = json.loads(TAU.read_text())
        # held out from the full file; when only tests/data ships beside the tests, three copies of its
        # sample under other trial numbers: objects as large as the held-out slice's, several row groups
        chosen = (dialogues[40:70] if len(dialogues) >= 70
                  else [{**d, "trial": f"{d['trial']}-{k}"} for k in range(3) for d in dialogues])
        src.write_text(json.dumps(chosen))
    else:
        src = root / "bodies.jsonl"
        src.write_text("\n".join(json.dumps(b) for b in synthetic_bodies(30)) + "\n")
    store = Store(root / "store")
    report = import_paths([src], store, batch_spans=100)
    assert report.complete and report.sessions > 0
    return store


def sessions_view(rows):
    return sorted((tuple(sorted(r.items())) for r in rows), key=str)


def test_bucket_store_answers_like_the_local_store_and_compaction_cuts_requests(s3, local, capsys):
    s3.create_bucket(Bucket="traces")
    bucket = BucketStore(s3, "traces", prefix="prod/")
    segments = sorted(local.pending_segments())
    assert len(segments) > 3
    for path in segments:  # one PUT per writer batch (and per day it touches)
        bucket.write_table(pq.read_table(path))
    bucket.write_table(pq.read_table(segments[0]))  # a writer's retry after a lost answer: same span ids

    want = sessions_view(local.query("SELECT * FROM sessions"))
    n_spans = local.count()
    days = bucket.days()

    before = bucket.requests
    assert bucket.query("SELECT count(*) AS n FROM spans")[0]["n"] == n_spans
    count_before = bucket.requests - before
    assert sessions_view(bucket.query("SELECT * FROM sessions")) == want
    objects_before = sum(len(bucket.keys(d)) for d in days)

    for _ in range(2):  # compaction is idempotent: the second run finds one file per day and does nothing
        results = [bucket.compact(d) for d in days]
    assert all(r.written is None for r in results)
    objects_after = sum(len(bucket.keys(d)) for d in days)
    assert objects_after == len(days)

    before = bucket.requests
    assert bucket.query("SELECT count(*) AS n FROM spans")[0]["n"] == n_spans
    count_after = bucket.requests - before
    assert sessions_view(bucket.query("SELECT * FROM sessions")) == want
    assert count_after < count_before
    sid = want[0][[k for k, _ in want[0]].index("session_id")][1]
    day = day_of(local.query("SELECT min(start_time_ns) AS t FROM spans WHERE session_id = ?", [sid])[0]["t"])
    before = bucket.requests
    one = bucket.query("SELECT count(*) AS n FROM spans WHERE session_id = ?", [sid], days=[day])
    one_session = bucket.requests - before
    assert one[0]["n"] == local.query("SELECT count(*) AS n FROM spans WHERE session_id = ?", [sid])[0]["n"]
    # the same session by ranged reads: its footer, then only the row groups whose statistics may hold it
    one_sql = "SELECT * FROM spans WHERE session_id = ? ORDER BY span_id"
    got = bucket.bytes_read
    whole = bucket.query(one_sql, [sid], days=[day])
    whole_bytes, got = bucket.bytes_read - got, bucket.bytes_read
    ranged = bucket.query(one_sql, [sid], days=[day], sessions=[sid])
    ranged_bytes, got = bucket.bytes_read - got, bucket.bytes_read
    again = bucket.query(one_sql, [sid], days=[day], sessions=[sid])  # footers cached: row groups only
    row_group_bytes = bucket.bytes_read - got
    assert ranged == whole == again == local.query(one_sql, [sid])
    assert 0 < row_group_bytes < ranged_bytes < whole_bytes and row_group_bytes < 0.6 * whole_bytes
    assert all(m.num_row_groups >= 2 for m in bucket._footers.values())  # so there were row groups to skip
    with capsys.disabled():
        print(f"\n{n_spans} spans in {objects_before} objects over {len(days)} day(s): count(*) took {count_before} "
              f"requests; after compaction {objects_after} objects, {count_after} requests; one session on a known "
              f"day {one_session} requests ({one[0]['n']} spans); the session's row groups by ranged reads: "
              f"{ranged_bytes} bytes ({row_group_bytes} with footers cached) instead of {whole_bytes}")


def test_compaction_killed_between_put_and_delete_is_finished_by_the_next_run(s3, local):
    s3.create_bucket(Bucket="crash")
    bucket = BucketStore(s3, "crash")
    segments = sorted(local.pending_segments())
    for path in segments:
        bucket.write_table(pq.read_table(path))
    day = bucket.days()[0]
    inputs = bucket.keys(day)
    saved = {k: s3.get_object(Bucket="crash", Key=k)["Body"].read() for k in inputs}
    first = bucket.compact(day)
    for key, body in saved.items():  # as if the compactor died after its PUT, before deleting
        s3.put_object(Bucket="crash", Key=key, Body=body)
    n = bucket.query("SELECT count(*) AS n FROM spans", days=[day])[0]["n"]
    again = bucket.compact(day)
    assert again.rows == first.rows == n and len(bucket.keys(day)) == 1
    assert bucket.query("SELECT count(*) AS n FROM spans", days=[day])[0]["n"] == n


def _cached_store(s3, local, tmp_path, name: str, **cache_kw):
    from tracer.store.object_cache import ObjectCache

    s3.create_bucket(Bucket=name)
    cache = ObjectCache(tmp_path / "cache", "moto", **cache_kw)
    bucket = BucketStore(s3, name, cache=cache)
    for path in sorted(local.pending_segments())[:4]:
        bucket.write_table(pq.read_table(path))
    return bucket, cache


def test_a_second_read_of_unchanged_objects_downloads_nothing(s3, local, tmp_path):
    """Objects are immutable: what one read downloaded, the next reads from local disk; a new object
    is the only download; a compaction's inputs are not kept."""
    bucket, cache = _cached_store(s3, local, tmp_path, "cached")
    objects = sum(len(bucket.objects(d)) for d in bucket.days())  # (a batch across midnight is two)
    n = bucket.query("SELECT count(*) AS n FROM spans")[0]["n"]
    downloaded = bucket.bytes_read
    assert downloaded > 0 and cache.hits == 0 and len(list((tmp_path / "cache").glob("*/*.parquet"))) == objects
    assert bucket.query("SELECT count(*) AS n FROM spans")[0]["n"] == n
    assert bucket.bytes_read == downloaded and cache.hits == objects  # only LISTs went to the bucket

    bucket.write_table(pq.read_table(sorted(local.pending_segments())[4]))
    more = bucket.query("SELECT count(*) AS n FROM spans")[0]["n"]
    assert more > n and 0 < bucket.bytes_read - downloaded  # the new object only
    assert cache.hits == 2 * objects

    for day in bucket.days():
        bucket.compact(day)
    kept = {p.name for p in (tmp_path / "cache").glob("*/*.parquet")}
    assert bucket.query("SELECT count(*) AS n FROM spans")[0]["n"] == more
    assert len({p.name for p in (tmp_path / "cache").glob("*/*.parquet")} - kept) == len(bucket.days())


def test_a_damaged_copy_is_dropped_and_read_again_from_the_bucket(s3, local, tmp_path, caplog):
    bucket, cache = _cached_store(s3, local, tmp_path, "damaged")
    want = bucket.query("SELECT span_id FROM spans ORDER BY span_id")
    objects = [(cache.path(bucket.bucket, k), size) for day in bucket.days() for k, size in bucket.objects(day)]
    (half, half_size), (zeros, zeros_size) = objects[:2]
    half.write_bytes(half.read_bytes()[:100])  # a half-written copy (wrong size)
    zeros.write_bytes(bytes(zeros_size))  # the right size, not Parquet
    before = bucket.bytes_read
    assert bucket.query("SELECT span_id FROM spans ORDER BY span_id") == want
    assert bucket.bytes_read - before == half_size + zeros_size  # those two downloaded again, no other
    assert "damaged cached copy" in caplog.text
    assert all(p.read_bytes()[:4] == b"PAR1" for p in (tmp_path / "cache").glob("*/*.parquet"))


def test_a_cache_that_cannot_be_written_never_fails_a_read(s3, local, tmp_path, caplog):
    from tracer.store.object_cache import ObjectCache

    s3.create_bucket(Bucket="nocache")
    (tmp_path / "cache").write_text("a file where the cache directory should be")
    bucket = BucketStore(s3, "nocache", cache=ObjectCache(tmp_path / "cache", "moto"))
    for path in sorted(local.pending_segments())[:2]:
        bucket.write_table(pq.read_table(path))
    n = bucket.query("SELECT count(*) AS n FROM spans")[0]["n"]
    assert n > 0 and bucket.query("SELECT count(*) AS n FROM spans")[0]["n"] == n
    assert caplog.text.count("bucket object cache is not used") == 1  # said once


def test_the_cache_keeps_to_its_limit_least_recently_read_first(s3, local, tmp_path):
    bucket, cache = _cached_store(s3, local, tmp_path, "bounded", limit=1)
    sizes = [size for day in bucket.days() for _, size in bucket.objects(day)]
    cache.limit = max(sizes) * 2 + 1  # room for two objects
    bucket.query("SELECT count(*) AS n FROM spans")
    files = list((tmp_path / "cache").glob("*/*.parquet"))
    assert 1 <= len(files) <= 2 and sum(f.stat().st_size for f in files) <= cache.limit
