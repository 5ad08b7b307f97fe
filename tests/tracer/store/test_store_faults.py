"""Fault injection: the store keeps every session exactly once and whole, or says where it is.

Every test drives the real command (``python -m tracer.cli``) on real recorded traffic
(τ-bench dialogues from ../shared/traffic when present, else the shipped data/sessions) and
asserts what a read-back of the store shows: the exact sessions and the exact span count of
each, against a reference import of the same input into a healthy store.

Faults are real: a size-limited tmpfs (root; else RLIMIT_FSIZE), a read-only bind mount (root;
else a store chmod'ed read-only for a non-root test process), four concurrent importing
processes, ``kill -9`` at named points of the commit (the ``PRUNEGATE_FAULT_STOP`` hook stops the
process there), truncated and zero-byte segments, deep, huge and broken input, bad arguments.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from policies import Gate, get_policy
from tests.paths import REPO, SESSIONS
from tests.servers import run_prunegate
from tests.traffic import FULL
from tracer.store import Store
from tracer.traffic import import_paths

TAU = FULL / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"  # 30 dialogues of the full traffic, else SHIPPED[:-1]
SHIPPED = sorted(SESSIONS.glob("*.jsonl"))
IS_ROOT = os.geteuid() == 0


# ----------------------------------------------------------------------------------- helpers
def counts(store: Path) -> dict[str, int]:
    """Spans per session, read back from the store (sessions only: no process stats rows)."""
    if not store.exists():
        return {}
    rows = Store(store).query("SELECT session_id, count(*) AS n FROM spans WHERE session_id IS NOT NULL "
                              "GROUP BY session_id")
    return {r["session_id"]: int(r["n"]) for r in rows}


def total_rows(store: Path) -> int:
    return Store(store).count() if store.exists() else 0


def assert_subset_exact(got: dict[str, int], ref: dict[str, int]) -> None:
    """Every visible session is one of the reference's, with exactly its span count (none partial)."""
    assert set(got) <= set(ref)
    assert {s: n for s, n in got.items() if ref[s] != n} == {}


@pytest.fixture(scope="module")
def traffic(tmp_path_factory) -> Path:
    """A real-traffic input file of a few dozen conversations."""
    out = tmp_path_factory.mktemp("traffic")
    if TAU.exists():
        path = out / "tau-30.json"
        path.write_text(json.dumps(json.loads(TAU.read_text())[:30]))
        return path
    path = out / "shipped.jsonl"
    path.write_text("".join(p.read_text() for p in SHIPPED[:-1]))  # SHIPPED[-1] is other_traffic: keep them apart
    return path


@pytest.fixture(scope="module")
def other_traffic(tmp_path_factory) -> Path:
    """Different sessions, in the store before a fault (they must survive it)."""
    path = tmp_path_factory.mktemp("other") / "other.jsonl"
    path.write_text(SHIPPED[-1].read_text())  # the smallest; the rest is `traffic` without the full traffic
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, traffic, other_traffic) -> dict[str, dict[str, int]]:
    """Spans per session when each input is imported into a healthy store."""
    out = {}
    for name, path in (("traffic", traffic), ("other", other_traffic)):
        store = tmp_path_factory.mktemp("ref") / "store"
        report = import_paths([path], store)
        assert report.complete and not report.refused
        out[name] = counts(store)
        assert report.sessions == len(out[name]) > 0
        assert report.spans == sum(out[name].values())
    return out


@pytest.fixture()
def env(tmp_path) -> dict[str, str]:
    spool = tmp_path / "spool"
    return {"PRUNEGATE_SPOOL_DIR": str(spool), "PRUNEGATE_STORE": ""}


def import_json(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    run = run_prunegate("import", "--json", *args, env=env)
    return run, json.loads(run.stdout) if run.stdout.strip() else {}


# ----------------------------------------------------------------------------------- full disk
@pytest.fixture()
def small_disk(tmp_path) -> Iterator[tuple[Path, str]]:
    """A directory on a 3 MiB tmpfs (root), or ("rlimit") for a RLIMIT_FSIZE fallback."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if IS_ROOT and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)],
                                  capture_output=True).returncode == 0:
        try:
            yield mnt, "tmpfs"
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=True)
        return
    yield mnt, "rlimit"  # not root: RLIMIT_FSIZE in the importing process (said in the test id)


def _fill(mnt: Path, leave: int) -> Path:
    """Fill the tmpfs until ``leave`` bytes are free."""
    filler = mnt / "filler"
    free = shutil.disk_usage(mnt).free
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler


def test_full_disk_spools_the_rest_names_it_and_recover_moves_it_in_exactly_once(
        small_disk, traffic, other_traffic, reference, env):
    mnt, how = small_disk
    store = mnt / "store"
    run, before = import_json(str(other_traffic), "--store", str(store), env=env)
    assert run.returncode == 0, run.stderr
    assert counts(store) == reference["other"]
    preexec = None
    if how == "tmpfs":
        filler = _fill(mnt, leave=300_000)  # room for about one segment of this input
    else:
        def preexec():  # EFBIG instead of SIGXFSZ past 160 kB per file
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (160_000, 160_000))
    proc = subprocess.run([sys.executable, "-m", "tracer.cli", "import", "--json", "--batch-spans", "300", str(traffic),
                           "--store", str(store)],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, **env}, preexec_fn=preexec,
                          timeout=300)
    report = json.loads(proc.stdout)
    got = counts(store)
    ref = reference["traffic"]
    new = {s: n for s, n in got.items() if s in ref}
    # Not everything fit: exit 3, and exactly one line says how many spans, where, and the command.
    assert proc.returncode == 3, proc.stderr
    assert 0 < report["spooled_spans"] == sum(ref.values()) - sum(new.values())
    assert report["sessions"] == len(new) and report["spans"] == sum(new.values())
    lines = [line for line in proc.stderr.splitlines() if "spool" in line]
    assert len(lines) == 1
    assert f"{report['spooled_spans']} spans did not reach the store" in lines[0]
    assert env["PRUNEGATE_SPOOL_DIR"] in lines[0] and f"prunegate recover --store {store}" in lines[0]
    assert "No space left on device" in lines[0] or "File too large" in lines[0]
    assert_subset_exact(new, ref)
    assert {s: got[s] for s in reference["other"]} == reference["other"]  # nothing earlier was lost
    if how == "tmpfs":
        filler.unlink()
    rec = run_prunegate("recover", "--store", str(store), env=env)
    assert rec.returncode == 0, rec.stderr
    assert counts(store) == {**reference["other"], **ref}
    again, second = import_json(str(traffic), "--store", str(store), env=env)
    assert again.returncode == 0 and second["sessions"] == 0 and second["skipped"] == len(ref)
    assert counts(store) == {**reference["other"], **ref}


# ----------------------------------------------------------------------------------- read-only store
@pytest.fixture()
def read_only(tmp_path) -> Iterator[tuple[Path, Path, dict]]:
    """(writable path, read-only view of the same store, extra kwargs). Root: a read-only bind
    mount (EROFS even for root); otherwise the directories chmod'ed read-only."""
    store = tmp_path / "store"
    store.mkdir()
    view = tmp_path / "store-ro"
    view.mkdir()
    if IS_ROOT:
        ok = subprocess.run(["mount", "--bind", str(store), str(view)], capture_output=True).returncode == 0
        ok = ok and subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], capture_output=True).returncode == 0
        if not ok:
            pytest.skip("cannot make a read-only bind mount here")
        try:
            yield store, view, {}
        finally:
            subprocess.run(["umount", "-l", str(view)], check=True)
        return
    view.rmdir()
    view.symlink_to(store)
    yield store, view, {"chmod": True}


def _chmod_tree(path: Path, writable: bool) -> None:
    for p in [path, *path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755 if writable else 0o555)


def test_read_only_store_exit_3_twice_then_recover_stores_each_span_once(read_only, traffic, other_traffic,
                                                                          reference, env):
    store, view, extra = read_only
    assert run_prunegate("import", str(other_traffic), "--store", str(store), env=env).returncode == 0
    env = {**env, "PRUNEGATE_SPOOL_DIR": env["PRUNEGATE_SPOOL_DIR"]}
    if extra.get("chmod"):
        _chmod_tree(store, writable=False)
    ref = reference["traffic"]
    for _ in range(2):  # twice while read-only: the spool holds two copies
        run, report = import_json(str(traffic), "--store", str(view), env=env)
        assert run.returncode == 3, run.stderr
        assert report["sessions"] == 0 and report["spooled_spans"] == sum(ref.values())
        assert "spans did not reach the store" in run.stderr and "prunegate recover --store" in run.stderr
        assert counts(store) == reference["other"]
    comp = run_prunegate("compact", "--store", str(view), env=env)
    assert comp.returncode == 2
    assert "permission denied" in comp.stderr.lower() and "busy" not in comp.stderr
    assert len(comp.stderr.strip().splitlines()) == 1
    if extra.get("chmod"):
        _chmod_tree(store, writable=True)
    # The spool is tied to the path the import was given: recover through it once it is writable.
    rec = run_prunegate("recover", "--store", str(store), "--spool-dir", str(next(Path(env["PRUNEGATE_SPOOL_DIR"]).iterdir())),
              env=env)
    assert rec.returncode == 0, rec.stderr
    assert counts(store) == {**reference["other"], **ref}  # two spooled copies, each span once
    rec2 = run_prunegate("recover", "--store", str(store), env=env)
    assert rec2.returncode == 0
    comp = run_prunegate("compact", "--store", str(store), env=env)
    assert comp.returncode == 0, comp.stderr
    assert counts(store) == {**reference["other"], **ref}
    assert total_rows(store) == sum(reference["other"].values()) + sum(ref.values())


# ----------------------------------------------------------------------------------- concurrency
def test_four_concurrent_imports_of_one_file_store_each_session_once(tmp_path, traffic, reference, env):
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-m", "tracer.cli", "import", "--json", str(traffic), "--store",
                               str(store)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **env}) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [e for _, e in outs]
    reports = [json.loads(o) for o, _ in outs]
    ref = reference["traffic"]
    assert sum(r["sessions"] for r in reports) == len(ref)  # each session committed by exactly one process
    assert sum(r["spans"] for r in reports) == sum(ref.values())
    assert counts(store) == ref
    assert total_rows(store) == sum(ref.values())
    raw = sum(pq.read_metadata(p).num_rows for p in (store / "segments").glob("*.parquet"))
    assert raw == sum(ref.values())  # nothing stored twice, not even hidden by dedupe


# ----------------------------------------------------------------------------------- kill -9
def _stopped(pid: int, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("T", "t"):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("point", ["claimed:3", "segment-written:1", "segment-written:2", "committed:1"])
def test_kill_9_mid_import_then_reimport_each_session_exactly_once(tmp_path, traffic, other_traffic, reference,
                                                                   env, point):
    store = tmp_path / "store"
    assert import_paths([other_traffic], store).complete
    ref = reference["traffic"]
    proc = subprocess.Popen([sys.executable, "-m", "tracer.cli", "import", str(traffic), "--store", str(store),
                             "--batch-spans", "300"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **env, "PRUNEGATE_FAULT_STOP": point})
    assert _stopped(proc.pid), "the import never reached " + point
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    half = counts(store)
    assert_subset_exact({s: n for s, n in half.items() if s in ref}, ref)  # whole sessions or none
    if point != "claimed:3":
        assert set(half) - set(reference["other"])  # the kill came after some sessions were committed
    assert {s: half[s] for s in reference["other"]} == reference["other"]
    run, report = import_json(str(traffic), "--store", str(store), env=env)
    assert run.returncode == 0, run.stderr
    assert report["sessions"] == len(ref) - len(set(half) & set(ref))
    assert counts(store) == {**reference["other"], **ref}
    assert Store(store).compact().busy is None
    assert counts(store) == {**reference["other"], **ref}
    assert total_rows(store) == sum(reference["other"].values()) + sum(ref.values())


# ----------------------------------------------------------------------------------- damaged segments
def test_truncated_and_zero_byte_segments_are_skipped_named_then_quarantined(tmp_path, traffic, reference, env):
    store = tmp_path / "store"
    report = import_paths([traffic], store, batch_spans=300)
    assert report.complete
    ref = reference["traffic"]
    segments = sorted((store / "segments").glob("*.parquet"))
    assert len(segments) >= 3
    victim = segments[1]
    lost = set(pq.read_table(victim, columns=["session_id"]).column(0).to_pylist())
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    empty = store / "segments" / (segments[-1].name.replace(".parquet", "-zero.parquet"))
    empty.write_bytes(b"")
    expected = {s: n for s, n in ref.items() if s not in lost}
    run = run_prunegate("sessions", "--json", "--store", str(store), env=env)
    assert run.returncode == 0, run.stderr
    assert {r["id"] for r in json.loads(run.stdout)} == set(expected)
    warned = [line for line in run.stderr.splitlines() if "skipping unreadable segment" in line]
    assert len(warned) == 2 and any(str(victim) in w for w in warned) and any(str(empty) in w for w in warned)
    assert counts(store) == expected
    from tracer import queries  # what the dashboard reads through

    with Store(store).reader() as r:
        assert set(queries.sessions(r)["session_id"]) == set(expected)
        assert sorted(r.damaged_segments) == sorted([victim, empty]) and not r.complete
    replay = run_prunegate("replay", "--policy", "recency", "--no-trace", "--store", str(store), env=env)
    assert replay.returncode == 0, replay.stderr
    comp = run_prunegate("compact", "--json", "--store", str(store), env=env)
    assert comp.returncode == 0, comp.stderr
    assert sorted(json.loads(comp.stdout)["quarantined"]) == sorted([victim.name, empty.name])
    assert sorted(p.name for p in (store / "quarantine").iterdir()) == sorted([victim.name, empty.name])
    assert counts(store) == expected
    clean = run_prunegate("sessions", "--store", str(store), env=env)
    assert clean.returncode == 0 and "skipping" not in clean.stderr


# ----------------------------------------------------------------------------------- input
def _deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels):
        value = {"k": value}
    return value


def _body(name: str, tool_input: object = None, text: str = "look it up") -> dict:
    return {"id": name, "model": "claude-sonnet-4-5", "messages": [
        {"role": "user", "content": text},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                           "input": tool_input if tool_input is not None else {"q": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}]},
    ]}


def test_deep_huge_and_broken_lines_are_refused_with_file_line_and_the_rest_imported(tmp_path, env):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # to write the 3,000-deep body
    try:
        deep_ok = json.dumps(_body("deep-3000", _deep(3000)))
    finally:
        sys.setrecursionlimit(old)
    big_ok = json.dumps(_body("big-20mb", text="x" * 20_000_000))
    lines = [
        json.dumps(_body("plain-1")).encode(),
        b"[" * 100_000 + b"]" * 100_000,  # line 2: too deep
        deep_ok.encode(),  # line 3: valid, 3,000 levels
        json.dumps(_body("cafe", text="caf\u00e9"), ensure_ascii=False).encode().replace(b"caf\xc3\xa9", b"caf\xe9"),  # 4: not UTF-8
        b'{"id": "nan", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}',  # 5: not JSON
        b'{"id": "cut", "messages": [{"role": "user", "content": "x"',  # 6: not JSON
        big_ok.encode(),  # 7: valid, 20 MB
        json.dumps(_body("plain-2")).encode(),
    ]
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    store = tmp_path / "store"
    run, report = import_json(str(src), "--store", str(store), env=env)
    assert run.returncode == 1, run.stderr
    refused = {r["line"]: r["reason"] for r in report["refused"]}
    assert sorted(refused) == [2, 4, 5, 6]
    assert "nested too deeply" in refused[2]
    assert "not UTF-8" in refused[4] and "0xe9" in refused[4]
    assert "NaN" in refused[5] and "malformed JSON" in refused[6]
    for n in refused:
        assert f"{src}:{n}: " in run.stderr
    assert "Traceback" not in run.stderr
    got = counts(store)
    assert report["sessions"] == len(got) == 4 and report["spans"] == sum(got.values())
    # each one exactly as a healthy import of the good lines alone
    good = tmp_path / "mixed-good" / "mixed.jsonl"  # same name and line numbers: same session ids
    good.parent.mkdir()
    good.write_bytes(b"\n".join(line if i in (0, 2, 6, 7) else b"" for i, line in enumerate(lines)) + b"\n")
    assert counts(store) == counts_of_import(good, tmp_path / "ref")
    # a limit on the size of one value: over it, refused with the line, the rest imported
    small = run_prunegate("import", "--json", str(src), "--store", str(tmp_path / "small"),
                env={**env, "PRUNEGATE_MAX_INPUT_BYTES": "10000000"})
    assert {r["line"] for r in json.loads(small.stdout)["refused"]} == {2, 4, 5, 6, 7}
    assert "too large" in {r["line"]: r["reason"] for r in json.loads(small.stdout)["refused"]}[7]
    assert len(counts(tmp_path / "small")) == 3
    val = run_prunegate("validate", str(src), "--provider", "anthropic", env=env)
    assert val.returncode == 2 and "Traceback" not in val.stderr
    assert re.findall(rf"^prunegate: {re.escape(str(src))}:(\d+): ", val.stderr, re.M) == ["2", "4", "5", "6"]
    assert re.findall(rf"^{re.escape(str(src))}:(\d+) \S+: OK$", val.stdout, re.M) == ["1", "3", "7", "8"]


def counts_of_import(path: Path, store: Path) -> dict[str, int]:
    assert import_paths([path], store).complete
    return counts(store)


def test_validate_json_is_strict_and_names_the_other_providers_shape(tmp_path, env):
    src = tmp_path / "bodies.jsonl"
    src.write_text('{"id": 1e999, "messages": [{"role": "user", "content": "x", "n": 1e999}]}\n')
    run = run_prunegate("validate", "--json", str(src), "--provider", "openai", env=env)
    assert run.returncode == 0, run.stderr

    def no_constants(name: str) -> None:
        raise AssertionError(f"not RFC 8259 JSON: {name}")

    assert json.loads(run.stdout, parse_constant=no_constants)[0]["id"] == "1e999"
    wrong = run_prunegate("validate", "--json", str(SHIPPED[0]), "--provider", "openai", env=env)
    results = json.loads(wrong.stdout)
    assert wrong.returncode == 1
    assert results and all(not r["valid"] and r["errors"][0]["code"] == "wrong_provider" for r in results)
    assert "Anthropic Messages" in results[0]["errors"][0]["message"]


# ----------------------------------------------------------------------------------- arguments
BAD_ARGS = [
    ("replay", ["replay", "--policy", "recency", "--budget", "100", "--hard-ceiling", "50"], "--hard-ceiling (50)"),
    ("compare", ["compare", "--policies", "recency", "--budget", "100", "--hard-ceiling", "50"], "--hard-ceiling"),
    ("replay-nan", ["replay", "--policy", "recency", "--budget", "nan"], "expected an integer"),
    ("replay-zero", ["replay", "--policy", "recency", "--budget", "0"], "expected a positive integer"),
    ("compare-neg", ["compare", "--policies", "recency", "--hard-ceiling", "-5"], "--hard-ceiling"),
    ("compact-timeout", ["compact", "--timeout", "inf"], "finite, positive"),
    ("import-store-file", ["import", "IN", "--store", "FILE"], "is not a directory"),
    ("sessions-store-file", ["sessions", "--store", "FILE"], "is not a directory"),
    ("replay-store-file", ["replay", "--policy", "recency", "--store", "FILE"], "is not a directory"),
    ("compare-store-file", ["compare", "--policies", "recency", "--store", "FILE"], "is not a directory"),
    ("compact-store-file", ["compact", "--store", "FILE"], "is not a directory"),
    ("recover-store-file", ["recover", "--store", "FILE"], "is not a directory"),
    ("dashboard-store-file", ["dashboard", "--store", "FILE"], "is not a directory"),
    ("demo-store-file", ["demo", "--store", "FILE", "--no-serve"], "is not a directory"),
    ("env-store-file", ["sessions"], "$PRUNEGATE_STORE"),
    ("validate-provider", ["validate", "IN", "--provider", "gemini"], "invalid choice"),
    ("import-format", ["import", "IN", "--format", "xml"], "invalid choice"),
    ("unknown-command", ["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize(("argv", "fragment"), [a[1:] for a in BAD_ARGS], ids=[a[0] for a in BAD_ARGS])
def test_bad_arguments_exit_2_with_one_line_before_any_work(tmp_path, env, traffic, argv, fragment):
    afile = tmp_path / "afile"
    afile.write_text("not a store")
    args = [str(afile) if a == "FILE" else str(traffic) if a == "IN" else a for a in argv]
    extra = {"PRUNEGATE_STORE": str(afile)} if argv == ["sessions"] else {}
    run = run_prunegate(*args, env={**env, **extra})
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert fragment in run.stderr and "Traceback" not in run.stderr
    assert run.stdout == ""
    assert afile.read_text() == "not a store"
    assert not (REPO / "prunegate-store").exists() or (REPO / "prunegate-store").is_dir()


@pytest.mark.parametrize("kwargs", [dict(budget=float("nan")), dict(budget=float("inf")), dict(budget=0),
                                    dict(budget=100, hard_ceiling=float("nan")), dict(budget=100, hard_ceiling=50),
                                    dict(budget=-1)])
def test_gate_refuses_impossible_numbers_with_value_error(kwargs):
    with pytest.raises(ValueError):
        Gate(get_policy("recency"), **kwargs)


# ----------------------------------------------------------------------------------- in-process tracing
GUARD_SCRIPT = r"""
import json, sys
from tracer.guard.instrument import PruneGuard
bodies = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
pg = PruneGuard("recency", budget=2000, store=sys.argv[1])
for body in bodies:
    body = {k: v for k, v in body.items() if k not in ("id", "side_effect_tools", "streamed_calls")}
    pg.gate(body)
    pg.record_response({"content": [{"type": "text", "text": "ok"}]})
pg.close()
print(json.dumps(pg.stats()["tracing"]["store"]))
print("agent finished", flush=True)
"""


def test_guard_on_a_read_only_store_never_breaks_the_agent_and_reports_the_same_counts(read_only, tmp_path, env):
    import ast

    store, view, extra = read_only
    assert import_paths([SHIPPED[0]], store).complete
    before = counts(store)
    if extra.get("chmod"):
        _chmod_tree(store, writable=False)
    bodies = next(p for p in SHIPPED if "anthropic" in p.name)
    run = subprocess.run([sys.executable, "-c", GUARD_SCRIPT, str(view), str(bodies)], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, **env}, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "agent finished" in run.stdout and "Traceback" not in run.stderr
    during = json.loads(run.stdout.splitlines()[0])
    assert during["received"] > 0 and during["stored"] == 0 and during["dropped"] == 0
    assert during["spooled"] == during["received"]
    at_exit = ast.literal_eval(run.stderr.split("at shutdown: ", 1)[1].splitlines()[0])
    assert {k: at_exit[k] for k in ("received", "stored", "spooled", "dropped")} == \
        {k: during[k] for k in ("received", "stored", "spooled", "dropped")}
    assert "prunegate recover --store" in run.stderr
    assert counts(store) == before  # nothing that was there is lost
    if extra.get("chmod"):
        _chmod_tree(store, writable=True)
    spool = next(Path(env["PRUNEGATE_SPOOL_DIR"]).iterdir())  # the spool of the path the guard was given
    rec = run_prunegate("recover", "--store", str(store), "--spool-dir", str(spool), env=env)
    assert rec.returncode == 0, rec.stderr
    after = counts(store)
    live = set(after) - set(before)  # the guard's sessions (one per conversation it saw)
    assert live and {s: after[s] for s in before} == before
    assert sum(after[s] for s in live) == during["received"]  # every span it received, once


def test_replay_into_a_read_only_store_exits_3_and_recover_brings_every_replay_in(read_only, env):
    store, view, extra = read_only
    source = SHIPPED[0]
    assert import_paths([source], store).complete
    before = counts(store)
    if extra.get("chmod"):
        _chmod_tree(store, writable=False)
    run = run_prunegate("replay", "--policy", "recency", "--json", "--store", str(view), env=env)
    assert run.returncode == 3, run.stderr
    replayed = [s["replay_id"] for s in json.loads(run.stdout)["sessions"]]
    assert len(replayed) == len(before)
    line = [x for x in run.stderr.splitlines() if "recorded sessions are not in the store" in x]
    assert len(line) == 1 and f"{len(before)} of {len(before)}" in line[0] and "prunegate recover --store" in line[0]
    assert counts(store) == before
    if extra.get("chmod"):
        _chmod_tree(store, writable=True)
    spool = next(Path(env["PRUNEGATE_SPOOL_DIR"]).iterdir())
    assert run_prunegate("recover", "--store", str(store), "--spool-dir", str(spool), env=env).returncode == 0
    after = counts(store)
    assert {s: after[s] for s in before} == before
    assert set(after) - set(before) == set(replayed)


def test_shadow_guard_stats_carry_the_pipeline_counters(tmp_path, env, monkeypatch):
    from tracer.guard import ShadowGuard

    monkeypatch.setenv("PRUNEGATE_SPOOL_DIR", env["PRUNEGATE_SPOOL_DIR"])
    store = tmp_path / "store"
    sg = ShadowGuard(store=store, trimmer="last-two")
    history = [{"role": "user", "content": f"question {i}"} if i % 2 == 0 else
               {"role": "assistant", "content": f"answer {i}"} for i in range(6)]
    sg.observe(history, history[-2:])
    sg.close()
    stats = sg.stats()
    tracing = stats["tracing"]["store"]
    assert stats["errors"] == 0 and tracing["received"] > 0
    assert tracing["received"] == tracing["stored"] + tracing["spooled"] + tracing["dropped"] + tracing["queued"]
    assert tracing["stored"] == tracing["received"] and counts(store)[sg.session_id] == tracing["stored"]
