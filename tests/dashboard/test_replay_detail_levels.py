"""The Replay page opens sessions recorded at every detail level (issue #28's dashboard item).

A session imported or replayed at ``decisions`` or ``checks`` keeps fewer spans than at ``full``
(docs/spans.md, "Detail levels"); the page must still open every step of it, in each of its views,
without an exception. Real stores: the shipped samples imported and replayed through the real
importer, replay engine and store pipeline at each level.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard_fixtures import DEMO_FILES
from tests.paths import REPO
from tracer import queries
from tracer.store import ENV_STORE, Store

APP = str(REPO / "dashboard" / "app.py")
LEVELS = ("decisions", "checks", "full")


def _store(path: Path, detail: str) -> dict[str, str]:
    """The first conversation of each sample imported at ``detail`` and replayed (salience,
    ungated: it prunes and breaks requests) at the same level; the session ids."""
    from tracer.lab import ReplaySpec, replay_session
    from tracer.traffic import close_provider, import_paths, load_conversations, store_tracer_provider

    inputs = path.parent / f"{detail}-inputs"
    inputs.mkdir()
    files = []
    for rel in DEMO_FILES:
        out = inputs / Path(rel).name
        out.write_text((REPO / rel).read_text().splitlines()[0] + "\n")
        files.append(out)
    report = import_paths(files, path, detail=detail)
    assert report.sessions == len(files) and not report.refused
    ids = {}
    provider = store_tracer_provider(path)
    try:
        for i, conv in enumerate(load_conversations(path)):
            ids[f"recorded-{i}"] = conv.session_id
            result = replay_session(conv, ReplaySpec("salience", gated=False, detail=detail),
                                    tracer_provider=provider, capture_content=True)
            assert result.replay_id is not None
            ids[f"replay-{i}"] = result.replay_id
    finally:
        close_provider(provider)
    return ids


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, dict[str, str]]]]:
    out = {}
    for detail in LEVELS:
        path = tmp_path_factory.mktemp(detail) / "store"
        out[detail] = (path, _store(path, detail))
    old = os.environ.get(ENV_STORE)
    yield out
    if old is None:
        os.environ.pop(ENV_STORE, None)
    else:
        os.environ[ENV_STORE] = old


@pytest.mark.slow  # 20-30 s a level: 3 views x 3-5 steps x 4 sessions, each a fresh AppTest run
@pytest.mark.parametrize("detail", LEVELS)
def test_replay_page_opens_every_kind_of_step_at_every_detail_level(
        stores: dict[str, tuple[Path, dict[str, str]]], detail: str) -> None:
    path, ids = stores[detail]
    os.environ[ENV_STORE] = str(path)
    opened = 0
    for name, sid in ids.items():
        with Store(path).reader() as r:
            bounds = queries.session_bounds(r, sid)
            assert bounds is not None, (detail, name)
            steps = {bounds[0], (bounds[0] + bounds[1]) // 2, bounds[1]}
            v = queries.violations(r, session_id=sid)
            steps |= {int(s) for s in v["seq"].head(2)}  # a step that broke a request, when there is one
        for view in ("Conversation", "Trace", "Messages table"):
            for step in sorted(steps):
                at = AppTest.from_file(APP, default_timeout=60)
                at.run()
                at.switch_page("views/replay.py")
                at.query_params.update({"session": sid, "step": str(step), "view": view})
                at.run()
                assert not at.exception, (detail, name, view, step, [e.value for e in at.exception])
                slider = at.slider(key="replay_step")  # a step before the first shown opens the first
                assert slider.value == max(step, slider.min), (detail, name, view, step)
                assert {m.label for m in at.metric} >= {"Tokens in context", "Budget"}, (detail, name, view, step)
                opened += 1
    assert opened >= len(ids) * 3 * 3
    if detail == "full":  # the fixture replays did break requests: the violation steps were opened
        with Store(path).reader() as r:
            assert len(queries.violations(r)) > 0
