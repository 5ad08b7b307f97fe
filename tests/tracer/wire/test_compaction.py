"""``serve``'s background compaction: the schedule's decisions, its wait for overdue conversations,
the process's priority, and a compaction cut short by serve's exit."""

from __future__ import annotations

import time
from pathlib import Path

from tests.tracer.wire.test_serve import Served, _export_turns, _imports
from tests.tracer.wire.test_waiting import _row
from tracer.store import Store
from tracer.store.rows import rows_to_table
from tracer.wire.compaction import GRACE, MAX_DEFER, CompactionSchedule, Compactor, Decision
from tracer.wire.waiting import Conversations


def test_compaction_waits_for_its_requests_then_rests_twice_its_duration():
    schedule = CompactionSchedule(every=10)
    t0 = time.monotonic()
    assert schedule.decide(9, overdue=0.0, now=t0) is Decision.FEW_REQUESTS
    assert schedule.decide(10, overdue=0.0, now=t0) is Decision.RUN
    schedule.started(10, t0)
    schedule.ended(t0 + 4.0)  # it took 4 s
    assert schedule.last_took == 4.0
    assert schedule.decide(19, overdue=0.0, now=t0 + 30) is Decision.FEW_REQUESTS  # 9 since it started
    assert schedule.decide(20, overdue=0.0, now=t0 + 4.0 + 7.9) is Decision.RESTING  # 8 s of rest owed
    assert schedule.decide(20, overdue=0.0, now=t0 + 4.0 + 8.0) is Decision.RUN


def test_compaction_defers_while_sessions_are_overdue_for_at_most_max_defer():
    schedule = CompactionSchedule(every=1)
    t0 = time.monotonic()
    assert schedule.decide(5, overdue=GRACE, now=t0) is Decision.RUN  # within the grace: not overdue
    assert schedule.decide(5, overdue=GRACE + 0.1, now=t0) is Decision.DEFERRED
    assert schedule.decide(5, overdue=40.0, now=t0 + MAX_DEFER - 0.1) is Decision.DEFERRED
    assert schedule.decide(5, overdue=40.0, now=t0 + MAX_DEFER) is Decision.RUN  # waited long enough
    schedule.started(5, t0 + MAX_DEFER)
    schedule.ended(t0 + MAX_DEFER)
    # the next one is deferred from the moment it is ready again, not from the first deferral
    assert schedule.decide(6, overdue=40.0, now=t0 + MAX_DEFER + 1) is Decision.DEFERRED
    assert schedule.decide(6, overdue=0.0, now=t0 + MAX_DEFER + 2) is Decision.RUN  # caught up


def test_overdue_is_how_far_the_longest_waiting_conversation_is_past_its_idle_deadline():
    conversations = Conversations(idle=5)
    assert conversations.overdue(now=100.0) == 0.0  # nothing waits
    conversations.add([_row(0, 0, keyed=True)], now=10.0)
    conversations.add([_row(1, 0, keyed=True)], now=12.0)
    assert conversations.overdue(now=14.0) == 0.0  # not yet due
    assert conversations.overdue(now=18.0) == 3.0  # c0 due at 15
    conversations.add([_row(0, 1, keyed=True)], now=18.0)  # c0 goes on: c1 is now the oldest
    assert conversations.overdue(now=18.0) == 1.0
    conversations.done(conversations.due(now=30.0))
    assert conversations.overdue(now=30.0) == 0.0


def test_serve_compaction_waits_while_conversations_are_overdue_then_runs(tmp_path):
    store = Store(tmp_path / "store")
    store.ensure()
    store.write_table(rows_to_table([{"trace_id": "ab" * 16, "span_id": "cd" * 8, "name": "x", "start_time_ns": 1}]))
    conversations = Conversations(idle=0.2)
    conversations.add([_row(0, 0, keyed=True)], now=time.monotonic() - 10)  # 9.8 s overdue
    said: list[str] = []
    compactor = Compactor(store, 1, lambda: 1, conversations.overdue, said.append, tick=0.1)
    compactor.start()
    try:
        time.sleep(2.0)
        assert compactor.compactions == 0 and store.pending_segments()  # deferred for the session
        conversations.done(conversations.due())  # the session caught up
        deadline = time.monotonic() + 60
        while store.pending_segments() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert compactor.compactions == 1 and not store.pending_segments() and said == []
    finally:
        compactor.stop()


def _children(pid: int) -> dict[str, int]:
    """serve's child processes: name (what ps shows) -> pid."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:  # a thread (task) or a child may end while it is read
            for child in (task / "children").read_text().split():
                out[Path(f"/proc/{child}/comm").read_text().strip()] = int(child)
        except OSError:
            continue
    return out


def _nice(pid: int) -> int:
    """The niceness field of /proc/PID/stat (the 19th; counted after the name's closing parenthesis)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_serve_compacts_at_nice_10_and_its_exit_cuts_a_compaction_short_without_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("PRUNEGATE_FAULT_STOP", "compaction-started:1")  # the compaction process stops there
    s = Served(tmp_path / "store", "--compact-every", "1", "--conversation-idle", "1")
    try:
        _export_turns(s.url, "trip-9", turns=2)
        deadline = time.monotonic() + 60
        while not ({"serve-compact", "serve-sessions"} <= _children(s.proc.pid).keys()
                   and _imports(s.store)) and time.monotonic() < deadline:
            time.sleep(0.2)
        children = _children(s.proc.pid)
        assert _nice(children["serve-compact"]) == 10  # mid-compaction (stopped at its start)
        assert _nice(children["serve-sessions"]) == _nice(s.proc.pid) == 0  # session building wins the CPU
    finally:
        out = s.stop()
    assert "the compaction under way was stopped with serve" in out and "(1 GenAI sessions)" in out
    assert "compaction failed" not in s.err and "Traceback" not in s.err, s.err
    counts = Store(s.store).query("SELECT span_id, count(*) AS n FROM spans GROUP BY span_id")
    assert len(counts) >= 2 and {r["n"] for r in counts} == {1}  # the store as it was: every span once
