"""prunegate import: every format into a real store, refusals with file/line/reason, renamed ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.traffic import CASSETTES, TAU, TAU2, TAU_DIALOGUES, tau_conversations
from tracer.cli import main
from tracer.queries import list_sessions
from tracer.traffic import Conversation, Refusal, import_paths, load_conversations, read_file, read_paths

ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "system": "You are a travel agent.",
    "messages": [
        {"role": "user", "content": "Weather in Lisbon and Porto?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Lisbon"}},
            {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Porto"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "24C sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "19C rain"},
        ]},
        {"role": "assistant", "content": "Lisbon 24C, Porto 19C."},
    ],
}


def openai_body(call_ids: list[str]) -> dict:
    """An OpenAI conversation issuing one call per id, in turn (ids may repeat, as τ-bench does)."""
    msgs: list[dict] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}]
    for n, cid in enumerate(call_ids):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"n": n})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"result {n}"})
    msgs.append({"role": "assistant", "content": "done"})
    return {"model": "gpt-4o", "messages": msgs}


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------------- formats
def test_anthropic_json_file_imports_with_system_calls_and_results(tmp_path, capsys):
    src = tmp_path / "trip.json"
    src.write_text(json.dumps(ANTHROPIC_BODY))
    code, out = run_json(capsys, "import", str(src), "--store", str(tmp_path / "s"))
    assert code == 0
    assert (out["sessions"], out["messages"], out["tool_calls"], out["refused"], out["renamed_ids"]) == (1, 5, 2, [], 0)
    [row] = list_sessions(tmp_path / "s")
    assert (row["name"], row["source"], row["provider"], row["messages"], row["tool_calls"]) == (
        "trip", "import", "anthropic", 5, 2)
    [conv] = load_conversations(tmp_path / "s")
    assert [m.role for m in conv.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert conv.messages[3].answered_ids == ["toolu_a", "toolu_b"]
    assert conv.messages[3].blocks[1].content == "19C rain"  # content captured by default
    assert conv.request_extra["model"] == "claude-sonnet-4-5"


def test_jsonl_detects_the_provider_per_line_and_uses_the_id_as_name(tmp_path):
    src = write_jsonl(tmp_path / "mixed.jsonl", [
        {"id": "a1", **ANTHROPIC_BODY},
        {"id": "o1", **openai_body(["c1", "c2"])},
    ])
    items = list(read_file(src))
    assert [(c.name, c.provider, c.line) for c in items] == [("a1", "anthropic", 1), ("o1", "openai", 2)]


def test_forced_format_refuses_a_body_of_the_other_shape(tmp_path):
    src = tmp_path / "o.json"
    src.write_text(json.dumps(openai_body(["c1"])))
    [item] = list(read_file(src, "anthropic"))
    assert isinstance(item, Refusal) and "not a valid anthropic body" in item.reason


def test_chat_spans_one_per_assistant_message_plus_the_final_request(tmp_path):
    from tracer.store import Store

    body = openai_body(["c1"])
    body["messages"].append({"role": "user", "content": "and again?"})  # ends on a request
    src = tmp_path / "o.json"
    src.write_text(json.dumps(body))
    import_paths([src], tmp_path / "s")
    rows = Store(tmp_path / "s").query(
        "SELECT attributes->>'prunegate.request.valid' AS valid, status_code FROM spans "
        "WHERE attributes->>'gen_ai.operation.name' = 'chat' ORDER BY seq")
    assert len(rows) == 3  # two assistant messages + the trailing request
    assert all(r["valid"] == "true" and r["status_code"] != "ERROR" for r in rows)


def test_no_content_import_replays_from_structure_alone(tmp_path):
    from tracer.lab import ReplaySpec, replay_session

    src = tmp_path / "trip.json"
    src.write_text(json.dumps(ANTHROPIC_BODY))
    import_paths([src], tmp_path / "s", capture_content=False)
    [conv] = load_conversations(tmp_path / "s")
    [orig] = [c for c in read_file(src) if isinstance(c, Conversation)]
    assert [(m.role, m.call_ids, m.answered_ids) for m in conv.messages] == [
        (m.role, m.call_ids, m.answered_ids) for m in orig.messages]
    # the stand-ins have about the recorded size, so the budget bites the same way
    full = replay_session(orig, ReplaySpec("recency", budget=10_000)).peak_tokens
    rebuilt = replay_session(conv, ReplaySpec("recency", budget=10_000)).peak_tokens
    assert abs(full - rebuilt) <= 2
    assert "24C" not in json.dumps([m.plain_text() for m in conv.messages])


# ---------------------------------------------------------------------------------- ids
def test_reused_call_ids_are_renamed_and_reported(tmp_path, capsys):
    src = tmp_path / "reuse.json"
    src.write_text(json.dumps(openai_body(["call_x", "call_y", "call_x", "call_x"])))
    code, out = run_json(capsys, "import", str(src), "--store", str(tmp_path / "s"))
    assert code == 0 and out["renamed_ids"] == 2
    assert [(r["old"], r["new"]) for r in out["renamed"]] == [("call_x", "call_x~2"), ("call_x", "call_x~3")]
    [conv] = load_conversations(tmp_path / "s")
    calls = [cid for m in conv.messages for cid in m.call_ids]
    answers = [cid for m in conv.messages for cid in m.answered_ids]
    assert calls == answers == ["call_x", "call_y", "call_x~2", "call_x~3"]


def test_a_renamed_id_skips_names_already_taken():
    from tracer.traffic import conversation_from_body

    conv = conversation_from_body(openai_body(["a", "a~2", "a"]), "openai", name="x", file="f")
    assert [r.new for r in conv.renamed] == ["a~3"]


# ---------------------------------------------------------------------------------- refusals
BAD_CASES = [
    ("{not json", "malformed JSON"),
    (json.dumps({"model": "gpt-4o"}), "without 'messages'"),
    (json.dumps({"messages": []}), "empty 'messages'"),
    (json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "d", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "d", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}),
     "messages.1: tool call id 'd' appears twice in one message"),
    (json.dumps({"messages": [{"role": "user", "content": "x"},
                              {"role": "tool", "tool_call_id": "ghost", "content": "boo"}]}),
     "messages.1: result for unknown tool call 'ghost'"),
]


@pytest.mark.parametrize("line,reason", BAD_CASES, ids=[r for _, r in BAD_CASES])
def test_bad_lines_are_refused_with_file_line_and_reason_and_the_rest_imports(tmp_path, capsys, line, reason):
    good = openai_body(["c1"])
    src = write_jsonl(tmp_path / "in.jsonl", [good, line, {**good, "id": "again"}])
    code, out = run_json(capsys, "import", str(src), "--store", str(tmp_path / "s"))
    assert code == 1
    assert out["sessions"] == 2
    [refused] = out["refused"]
    assert refused["file"] == str(src) and refused["line"] == 2 and reason in refused["reason"]
    assert len(list_sessions(tmp_path / "s")) == 2


def test_sessions_imported_before_a_bad_file_stay_imported(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a_good.json").write_text(json.dumps(ANTHROPIC_BODY))
    (tmp_path / "in" / "b_bad.json").write_text('{"messages": [\n  {"role": "user",\n  oops}\n]}')
    (tmp_path / "in" / "c_good.jsonl").write_text(json.dumps(openai_body(["z"])) + "\n")
    code, out = run_json(capsys, "import", str(tmp_path / "in"), "--store", str(tmp_path / "s"))
    assert code == 1 and out["sessions"] == 2
    [refused] = out["refused"]
    assert refused["file"].endswith("b_bad.json") and refused["line"] == 3
    assert "malformed JSON" in refused["reason"]


def test_a_whole_file_list_item_is_refused_with_its_line(tmp_path):
    items = [{"task_id": 1, "trial": 0, "traj": [{"role": "user", "content": "hi"}]},
             {"task_id": 2, "trial": 0, "traj": [{"role": "user", "content": "hi"},
                                                 {"role": "tool", "tool_call_id": "nope", "content": "x"}]}]
    src = tmp_path / "tau.json"
    src.write_text(json.dumps(items, indent=2))
    out = list(read_file(src))
    assert isinstance(out[0], Conversation) and out[0].name == "tau-airline-task1-trial0"
    assert isinstance(out[1], Refusal)
    starts = [n for n, line in enumerate(src.read_text().splitlines(), 1) if line == "  {"]
    assert out[1].line == starts[1] == 12
    assert "item 1 (task2-trial0)" in out[1].reason and "unknown tool call 'nope'" in out[1].reason


def test_reimporting_the_same_file_skips_what_is_already_there(tmp_path, capsys):
    src = tmp_path / "trip.json"
    src.write_text(json.dumps(ANTHROPIC_BODY))
    run_json(capsys, "import", str(src), "--store", str(tmp_path / "s"))
    code, out = run_json(capsys, "import", str(src), "--store", str(tmp_path / "s"))
    assert code == 0 and out["sessions"] == 0 and out["skipped"] == 1
    assert len(list_sessions(tmp_path / "s")) == 1


def test_store_defaults_to_the_environment(tmp_path, monkeypatch, capsys):
    src = tmp_path / "trip.json"
    src.write_text(json.dumps(ANTHROPIC_BODY))
    monkeypatch.setenv("PRUNEGATE_STORE", str(tmp_path / "env-store"))
    assert main(["import", str(src)]) == 0
    capsys.readouterr()
    assert main(["sessions", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["trip"]


# ---------------------------------------------------------------------------------- real traffic
@pytest.mark.slow
def test_every_tau_bench_conversation_imports_with_its_exact_counts(tmp_path, capsys):
    raw = tau_conversations()
    expected = {
        f"tau-airline-task{c['task_id']}-trial{c['trial']}": (
            len(c["traj"]), sum(len(m.get("tool_calls") or []) for m in c["traj"]))
        for c in raw
    }
    reused = 0
    for c in raw:
        seen: set[str] = set()
        for m in c["traj"]:
            for call in m.get("tool_calls") or []:
                reused += call["id"] in seen
                seen.add(call["id"])
    code, out = run_json(capsys, "import", str(TAU), "--store", str(tmp_path / "s"))
    assert code == 0 and out["refused"] == []
    assert out["sessions"] == len(raw) == TAU_DIALOGUES
    assert out["messages"] == sum(n for n, _ in expected.values())
    assert out["tool_calls"] == sum(k for _, k in expected.values())
    assert out["renamed_ids"] == reused > 0
    rows = list_sessions(tmp_path / "s")
    assert {r["name"]: (r["messages"], r["tool_calls"]) for r in rows} == expected


def test_the_cassettes_last_requests_import(tmp_path):
    cassettes = sorted(CASSETTES.rglob("*.yaml"))
    expected = {}
    for path in cassettes:
        last = None
        for interaction in yaml.safe_load(path.read_text())["interactions"]:
            uri = interaction["request"]["uri"]
            if "api.anthropic.com/v1/messages" in uri or uri.split("?")[0].endswith("/chat/completions"):
                last = interaction["request"]["parsed_body"]
        if last is not None:
            expected[path.stem] = len(last["messages"]) + ("system" in last)
    report = import_paths([CASSETTES], tmp_path / "s")
    assert report.refused == [] and report.sessions == len(expected) == len(cassettes)
    rows = {r["name"]: r for r in list_sessions(tmp_path / "s")}
    assert {name: rows[name]["messages"] for name in expected} == expected
    assert {r["provider"] for r in rows.values()} == {"anthropic", "openai"}
    assert sum(r["violations"] for r in rows.values()) == 0  # recorded requests were valid


def test_every_tau2_bench_simulation_imports_as_the_agents_conversation(tmp_path, capsys):
    """τ²-bench records (their own message shape: calls with name/arguments, tool messages by id) import
    as one session each, every call paired with its result, read back from the store."""
    path = next(TAU2.glob("*.json"))
    raw = json.loads(path.read_text(encoding="utf-8"))
    expected = {
        f"tau2-task{s['task_id']}-trial{s['trial']}": (
            len(s["messages"]), sum(len(m.get("tool_calls") or []) for m in s["messages"]))
        for s in raw
    }
    code, out = run_json(capsys, "import", str(path), "--store", str(tmp_path / "s"))
    assert code == 0 and out["refused"] == []
    assert out["sessions"] == len(raw) == len(expected)
    rows = list_sessions(tmp_path / "s")
    assert {r["name"]: (r["messages"], r["tool_calls"]) for r in rows} == expected
    assert {r["provider"] for r in rows} == {"openai"}
    assert sum(r["violations"] for r in rows) == 0  # every recorded call had its result


def test_reading_the_traffic_directory_yields_no_refusal():
    items = list(read_paths([TAU.parent.parent]))
    assert not [i for i in items if isinstance(i, Refusal)]


# ---------------------------------------------------------------------------------- OTLP JSON
@pytest.mark.parametrize("detail", ["full", "checks", "decisions"])
def test_prunegate_traces_exported_as_otlp_json_import_back_as_the_same_sessions(tmp_path, detail):
    """At every detail level: below full the message counts come from span events (docs/spans.md)."""
    from tracer.store import Store
    from tracer.traffic import write_otlp_json

    src = tmp_path / "trip.json"
    src.write_text(json.dumps(ANTHROPIC_BODY))
    [sid] = import_paths([src], tmp_path / "a", detail=detail).session_ids
    write_otlp_json(Store(tmp_path / "a").spans(sid), tmp_path / "export.jsonl")
    report = import_paths([tmp_path / "export.jsonl"], tmp_path / "b")
    assert (report.sessions, report.messages, report.tool_calls, report.otlp_files) == (1, 5, 2, 1)
    assert list_sessions(tmp_path / "b") == list_sessions(tmp_path / "a")
    assert import_paths([tmp_path / "export.jsonl"], tmp_path / "b").sessions == 0  # already there


def test_another_instrumentations_genai_chat_spans_become_a_session(tmp_path):
    from tracer.traffic import write_otlp_json

    history = [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris and Rome?"}]},
        {"role": "assistant", "parts": [
            {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}},
            {"type": "tool_call", "id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c2", "response": {"celsius": 21}}]},
    ]
    reply = [{"role": "assistant", "parts": [{"type": "text", "content": "Paris is sunny, Rome 21C."}]}]

    def chat(n: int, messages: list, **extra: str) -> dict:
        return {"trace_id": "ab" * 16, "span_id": f"{n:016x}", "name": "chat gpt-4o", "kind": "CLIENT",
                "start_time_ns": n * 100, "end_time_ns": n * 100 + 5, "resource": {"service.name": "agent"},
                "attributes": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                               "gen_ai.request.model": "gpt-4o", "gen_ai.conversation.id": "conv-9",
                               "gen_ai.input.messages": json.dumps(messages), **extra}}

    write_otlp_json([chat(1, history[:1]), chat(2, history, **{"gen_ai.output.messages": json.dumps(reply)})],
                    tmp_path / "spans.json")
    report = import_paths([tmp_path / "spans.json"], tmp_path / "s")
    assert (report.sessions, report.messages, report.tool_calls, report.otlp_spans) == (1, 5, 2, 2)
    [conv] = load_conversations(tmp_path / "s")
    assert conv.name == "spans:conv-9" and conv.provider == "openai"
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert conv.messages[1].blocks[1].input == {"city": "Rome"}


def test_a_malformed_otlp_line_is_refused_with_its_line_and_nothing_of_that_file_is_written(tmp_path, capsys):
    good = {"resourceSpans": []}
    src = write_jsonl(tmp_path / "spans.jsonl", [good, '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 1}]}]}]}'])
    code, out = run_json(capsys, "import", str(src), "--store", str(tmp_path / "s"))
    assert code == 1 and out["sessions"] == 0 and out["otlp_files"] == 0
    [refused] = out["refused"]
    assert refused["file"] == str(src) and refused["line"] == 2


def test_import_detail_sets_what_the_store_keeps_at_each_level(tmp_path, capsys):
    """``import --detail``: the shipped τ-bench sample at each level, spans and span events per kind
    counted in the real store (docs/spans.md "Detail levels"); the session list's message counts agree."""
    from tests.traffic import SAMPLE
    from tracer.contract import names as sn
    from tracer.store import Store

    src = SAMPLE / TAU.relative_to(TAU.parents[1])
    spans, events, messages, details = {}, {}, {}, {}
    for level in ("full", "checks", "decisions"):
        store = tmp_path / level
        code, out = run_json(capsys, "import", str(src), "--store", str(store), "--detail", level)
        assert code == 0 and out["refused"] == [] and out["sessions"] > 0
        with Store(store).reader() as r:
            spans[level] = {x["name"]: x["n"] for x in r.query("SELECT name, count(*) AS n FROM spans GROUP BY name")}
            events[level] = {x["event_name"]: x["n"] for x in r.query(
                "SELECT event_name, count(*) AS n FROM span_events GROUP BY event_name")}
            details[level] = {x["d"] for x in r.query(
                f"SELECT attributes->>'{sn.DETAIL}' AS d FROM spans WHERE name = ?", [sn.SESSION])}
        messages[level] = {x["name"]: x["messages"] for x in list_sessions(store)}
        assert details[level] == {level}
    full = spans["full"]
    assert full[sn.MESSAGE] > 0 and sn.MESSAGES not in full and events["full"].get(sn.MESSAGE, 0) == 0
    for level in ("checks", "decisions"):  # no gate on an import: every message event rides on messages spans
        assert sn.MESSAGE not in spans[level]
        assert events[level][sn.MESSAGE] == full[sn.MESSAGE]
        assert spans[level][sn.MESSAGES] >= spans[level][sn.SESSION]
        others = {k: n for k, n in spans[level].items() if k != sn.MESSAGES}
        assert others == {k: n for k, n in full.items() if k not in (sn.MESSAGE, sn.UNIT_CLOSE)}  # roots and chat spans alike
        assert messages[level] == messages["full"]
    assert sum(spans["decisions"].values()) < sum(full.values()) / 2  # the point of the setting: fewer spans


def test_import_refuses_an_unknown_detail(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["import", str(TAU), "--store", str(tmp_path / "s"), "--detail", "everything"])
    assert exc.value.code == 2 and "--detail" in capsys.readouterr().err
