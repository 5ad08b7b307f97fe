"""``--store s3://bucket/prefix`` on the S3 stand-in (moto's server, started by the tests): the commands
import into it and list it, compact it, serve into it, and the dashboard's sessions query reads it;
every answer equals the same commands' on a local directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.traffic import TAU
from tracer.store import Store
from tracer.store.s3 import S3Store

PRUNEGATE = [sys.executable, "-m", "tracer.cli"]


@pytest.fixture
def s3_env(s3_endpoint, s3, tmp_path, monkeypatch):
    """The environment a user sets for a bucket store: the endpoint, credentials, region (here and for
    the commands the test starts); a fresh bucket per test."""
    bucket = f"t{os.urandom(4).hex()}"
    s3.create_bucket(Bucket=bucket)
    env = {"PRUNEGATE_S3_ENDPOINT": s3_endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1", "PRUNEGATE_SPOOL_DIR": str(tmp_path / "spool"),
           "PRUNEGATE_S3_CACHE": str(tmp_path / "s3cache")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return bucket, {**os.environ, **env}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRUNEGATE, *args], env=env, capture_output=True, text=True, timeout=300)


def _sample(tmp_path: Path) -> Path:
    dialogues = json.loads(TAU.read_text())
    src = tmp_path / "tau.json"
    src.write_text(json.dumps(dialogues[:4]))
    return src


@pytest.mark.slow  # 189 s measured (pytest --durations, the shared 2-CPU machine under load)
def test_import_sessions_compact_and_the_dashboard_on_a_bucket(s3_env, s3, tmp_path, monkeypatch):
    bucket, env = s3_env
    url = f"s3://{bucket}/team/traces"
    src = _sample(tmp_path)
    local = tmp_path / "local"
    assert cli(env, "import", str(src), "--store", str(local)).returncode == 0

    done = cli(env, "import", str(src), "--store", url, "--json")
    assert done.returncode == 0, done.stderr
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys and all(k.startswith("team/traces/segments/day=") for k in keys)
    again = cli(env, "import", str(src), "--store", url, "--json")  # exactly once: nothing more stored
    assert again.returncode == 0 and json.loads(again.stdout)["sessions"] == 0

    listed = cli(env, "sessions", "--store", url, "--json")
    want = cli(env, "sessions", "--store", str(local), "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == json.loads(want.stdout) and json.loads(want.stdout)
    store = Store(url)
    assert isinstance(store, S3Store) and store.count() == Store(local).count()

    compacted = cli(env, "compact", "--store", url)
    assert compacted.returncode == 0, compacted.stderr
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys and all(k.startswith("team/traces/compacted/day=") for k in keys)
    assert json.loads(cli(env, "sessions", "--store", url, "--json").stdout) == json.loads(want.stdout)

    # the dashboard's Sessions page query, with the store the dashboard command hands it
    monkeypatch.setenv("PRUNEGATE_STORE", url)
    from dashboard.components import data

    page = data.session_page()
    monkeypatch.setenv("PRUNEGATE_STORE", str(local))
    local_page = data.session_page()
    cols = ["session_id", "label", "source", "messages", "peak_tokens", "violations"]
    assert page["total"] == local_page["total"] > 0
    assert page["rows"][cols].to_dict("records") == local_page["rows"][cols].to_dict("records")

    # the commands and the reader kept what they downloaded in the cache the environment names
    assert list((tmp_path / "s3cache").glob("*/*.parquet"))

    # one session's page: read from its row groups only, the same steps as from the directory
    sid = str(local_page["rows"]["session_id"].iloc[0])
    from_bucket, from_dir = data.replay_session(url, sid), data.replay_session(str(local), sid)
    assert from_bucket["bounds"] == from_dir["bounds"] and from_bucket["info"] == from_dir["info"]
    assert from_bucket["series"].equals(from_dir["series"])

    # and the Sessions page itself renders them (Streamlit's AppTest runs the real app)
    from streamlit.testing.v1 import AppTest

    from tests.paths import REPO

    monkeypatch.setenv("PRUNEGATE_STORE", url)
    at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/sessions.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Sessions"
    assert len(at.dataframe[0].value) == local_page["total"]
    assert any(url in str(t.value) for t in at.sidebar.text)  # the sidebar names the bucket store


def test_a_bad_bucket_url_is_one_line(s3_env):
    _, env = s3_env
    bad = cli(env, "sessions", "--store", "s3:///prefix")
    assert bad.returncode == 2 and "no bucket name" in bad.stderr and "Traceback" not in bad.stderr
    missing = cli(env, "sessions", "--store", "s3://no-such-bucket-here/x")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


@pytest.mark.slow  # 27 s measured (pytest --durations, the shared 2-CPU machine under load)
def test_serve_into_a_bucket(s3_env, tmp_path):
    from tests.tracer.wire.test_serve import _export_turns

    bucket, env = s3_env
    url = f"s3://{bucket}/served"
    proc = subprocess.Popen([*PRUNEGATE, "serve", "--store", url, "--port", "0", "--compact-every", "0",
                             "--conversation-idle", "0.5"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert f"-> {url}/" in line, (line, proc.stderr.read() if proc.stderr else "")
        _export_turns(line.split(" on ", 1)[1].split(" ", 1)[0], "trip-s3", turns=3)
    finally:
        proc.send_signal(15)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "committed 3 spans from 3 requests (1 GenAI sessions)" in out
    store = Store(url)
    assert store.query("SELECT count(*) AS n FROM spans WHERE scope_name = 'some.genai.lib'")[0]["n"] == 3
    assert [r["source"] for r in store.sessions() if r["source"]] == ["import"]  # (and the raw spans, keyed "trip-s3")


@pytest.mark.slow  # 79 s measured (pytest --durations, the shared 2-CPU machine under load)
def test_a_missing_bucket_is_a_refused_write_spooled_then_recovered(s3_env, s3, tmp_path):
    _, env = s3_env
    bucket = f"late{os.urandom(3).hex()}"
    url = f"s3://{bucket}/x"
    src = _sample(tmp_path)
    refused = cli(env, "import", str(src), "--store", url)
    assert refused.returncode == 3 and f"prunegate recover --store {url}/" in refused.stderr
    s3.create_bucket(Bucket=bucket)
    moved = cli(env, "recover", "--store", url)
    assert moved.returncode == 0, moved.stderr
    local = tmp_path / "local"
    assert cli(env, "import", str(src), "--store", str(local)).returncode == 0
    assert Store(url).count() == Store(local).count() > 0
    again = cli(env, "import", str(src), "--store", url, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["sessions"] == 0
    assert Store(url).count() == Store(local).count()


@pytest.mark.slow  # 83 s measured (pytest --durations, the shared 2-CPU machine under load)
def test_annotations_on_a_bucket_store_are_kept_listed_and_exported(s3_env, tmp_path):
    """``prunegate annotate`` writes into the bucket like any other span: the annotation is an
    object in the bucket, listed by ``annotate --list``, filtered by label, and in the export, once."""
    bucket, env = s3_env
    url = f"s3://{bucket}/notes"
    assert cli(env, "import", str(_sample(tmp_path)), "--store", url).returncode == 0
    sid = json.loads(cli(env, "sessions", "--store", url, "--json").stdout)[0]["id"]

    done = cli(env, "annotate", sid, "--store", url, "--label", "bug", "--note", "<b>evicted</b> the answer")
    assert done.returncode == 0, done.stderr
    other = cli(env, "annotate", sid, "--store", url, "--label", "fine")
    assert other.returncode == 0, other.stderr

    rows = Store(url).query("SELECT session_id, attributes FROM spans WHERE name = 'prunegate.annotation' "
                            "ORDER BY start_time_ns")
    assert [r["session_id"] for r in rows] == [sid, sid]
    first = json.loads(rows[0]["attributes"])
    assert first["prunegate.annotation.label"] == "bug"
    assert first["prunegate.annotation.note"] == "<b>evicted</b> the answer"

    listed = cli(env, "annotate", "--list", "--store", url, "--label", "bug", "--json")
    assert listed.returncode == 0, listed.stderr
    notes = json.loads(listed.stdout)
    assert len(notes) == 1 and notes[0]["label"] == "bug" and notes[0]["session_id"] == sid

    # exported over OTLP to a prunegate serve writing a local directory: both annotations arrive once
    local = tmp_path / "received"
    proc = subprocess.Popen([*PRUNEGATE, "serve", "--store", str(local), "--port", "0", "--compact-every", "0"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert " on " in line, (line, proc.stderr.read() if proc.stderr else "")
        endpoint = line.split(" on ", 1)[1].split(" ", 1)[0]
        exported = cli(env, "export", "--store", url, "--session", sid, "--otlp-endpoint", endpoint)
        assert exported.returncode == 0, exported.stderr
    finally:
        proc.send_signal(15)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    got = Store(local).query("SELECT attributes FROM spans WHERE name = 'prunegate.annotation'")
    assert sorted(json.loads(r["attributes"])["prunegate.annotation.label"] for r in got) == ["bug", "fine"]
