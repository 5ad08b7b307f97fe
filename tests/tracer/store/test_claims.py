"""Claims committed a batch at a time (:func:`tracer.store.claims.commit_many`): each reads back as
committed, names its segment, and is released; with and without ``syncfs``."""

from __future__ import annotations

import os

import pytest

from tracer.store import Store, claims
from tracer.store.claims import ClaimState, commit_many, is_committed, release_segment, take


@pytest.fixture(params=["syncfs", "fsync each"])
def sync_mode(request, monkeypatch):
    if request.param == "fsync each":
        monkeypatch.setattr(claims, "_SYNCFS", [None])  # as where libc has no syncfs
    elif claims._syncfs() is None:
        if os.environ.get("CI") == "true":  # CI runs on glibc Linux, which has syncfs
            pytest.fail("libc has no syncfs here; CI expects it")
        pytest.skip("no syncfs on this platform")
    return request.param


def test_commit_many_marks_every_claim_committed_with_its_segment_and_releases_them(tmp_path, sync_mode):
    store = Store(tmp_path / "store")
    store.ensure()
    keys = [f"import-{i}" for i in range(40)] + ["a key with spaces/and slashes"]
    held = [take(store.layout, k) for k in keys]
    assert all(c.state is ClaimState.MINE for c in held)
    assert commit_many(held, "seg-1.parquet") == {}
    assert all(c.state is ClaimState.COMMITTED and c.fd is None for c in held)
    for k in keys:
        assert is_committed(store.layout, k)
        assert take(store.layout, k).state is ClaimState.COMMITTED  # released: not BUSY
    # the mark names the segment: quarantining it releases exactly these claims
    assert len(release_segment(store.layout, "seg-1.parquet")) == len(keys)
    again = take(store.layout, keys[0])
    assert again.state is ClaimState.MINE
    again.release()


def test_commit_many_leaves_other_claims_alone_and_refuses_a_claim_not_held(tmp_path, sync_mode):
    store = Store(tmp_path / "store")
    store.ensure()
    other = take(store.layout, "other")
    mine = take(store.layout, "mine")
    assert commit_many([mine]) == {}
    assert is_committed(store.layout, "mine") and not is_committed(store.layout, "other")
    assert take(store.layout, "other").state is ClaimState.BUSY  # still held by its taker
    other.release()
    with pytest.raises(RuntimeError):
        commit_many([mine])  # released already
