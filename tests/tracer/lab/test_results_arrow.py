"""Replay results cross the process boundary as Arrow and come back equal (tracer.lab.results_arrow)."""

from __future__ import annotations

from tests.paths import SESSIONS
from tracer.lab.compare import arms, parse_policies, run_replays
from tracer.lab.replay import replay_session
from tracer.lab.results_arrow import results_from_ipc, results_to_ipc
from tracer.traffic.importers import Conversation, read_paths

DATA = SESSIONS


def _convs() -> list[Conversation]:
    return [c for c in read_paths([DATA]) if isinstance(c, Conversation)]


def test_results_round_trip_through_arrow_ipc():
    convs = _convs()
    specs = arms(parse_policies("recency,head_tail"), "both", budget=400, stream_results=2)
    per_session = [[replay_session(c, s) for s in specs] for c in convs]
    assert any(r.lost_references for rs in per_session for r in rs)  # the nested fields are exercised
    assert any(r.calls for rs in per_session for r in rs)
    data = results_to_ipc(7, per_session)
    assert isinstance(data, bytes)
    back = results_from_ipc(data)
    assert sorted(back) == list(range(7, 7 + len(convs)))
    for k, rs in enumerate(per_session):
        assert back[7 + k] == rs


def test_parallel_workers_return_the_same_results_as_one_process():
    convs = _convs()
    specs = arms(parse_policies("recency"), "both", budget=400)
    one = run_replays(convs, specs, workers=1)
    two = run_replays(convs, specs, workers=2, chunk=1)
    strip = lambda rs: [[{**r.to_dict(), "seconds": 0, "replay_id": None} for r in arm] for arm in rs]  # noqa: E731
    assert strip(two) == strip(one)
