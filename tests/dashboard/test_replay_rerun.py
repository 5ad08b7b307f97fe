"""The Replay page's "re-run at full detail" (tracer.lab.rerun): a replay recorded at decisions is
re-run at full into the real store and the page opens the same step of the re-run."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.paths import REPO
from tests.traffic import SAMPLE, TAU
from tracer.contract import names as sn
from tracer.lab import ReplaySpec, replay_session
from tracer.store import ENV_STORE, Store
from tracer.traffic import close_provider, import_paths, load_conversations, store_tracer_provider

APP = str(REPO / "dashboard" / "app.py")


def test_the_button_re_runs_a_decisions_replay_at_full_and_opens_the_same_step(tmp_path: Path, monkeypatch) -> None:
    store = Store(tmp_path / "s")
    assert import_paths([SAMPLE / TAU.relative_to(TAU.parents[1])], store, detail="decisions").sessions > 0
    conv = next(c for c in load_conversations(store) if c.tool_calls >= 2)
    provider = store_tracer_provider(store)
    try:
        sid = replay_session(conv, ReplaySpec("recency", gated=True, detail="decisions"), tracer_provider=provider,
                             capture_content=True).replay_id
    finally:
        close_provider(provider)
    assert sid is not None
    monkeypatch.setenv(ENV_STORE, str(store.path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/replay.py")
    at.query_params.update({"session": sid, "step": "9"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.button(key="replay_rerun_full").click().run()
    assert not at.exception, [e.value for e in at.exception]
    with store.reader() as r:
        roots = [json.loads(x["attributes"]) | {"id": x["session_id"]} for x in r.query(
            "SELECT session_id, attributes FROM spans WHERE name = ?", [sn.SESSION])]
    [rerun] = [a for a in roots if a.get(sn.REPLAY_RERUN_OF) == sid]
    assert rerun[sn.DETAIL] == "full"
    assert at.selectbox(key="replay_session").value == rerun["id"]  # the page now shows the re-run ...
    assert at.slider(key="replay_step").value == 9  # ... at the same step
