"""Provider validators over real recorded traffic, real bodies broken on purpose, and the CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import Violation, is_valid, validate
from policies.validate import CODES
from tests.servers import run_prunegate
from tests.traffic import TAU_DIALOGUES, TRAFFIC, cassette_bodies, tau_conversations


def _body(name: str, interaction: int) -> dict:
    """A deep copy of one recorded request body, by cassette file name and interaction index."""
    for label, _, body in cassette_bodies():
        path, index = label.rsplit("#", 1)
        if Path(path).name == name and int(index) == interaction:
            return copy.deepcopy(body)
    raise LookupError(f"no interaction {interaction} in cassette {name} under {TRAFFIC}")


def _tau(n: int = 0) -> dict:
    return {"messages": copy.deepcopy(tau_conversations()[n]["traj"])}


def _codes(violations: list[Violation]) -> list[tuple[str, int | None, tuple[str, ...]]]:
    return [(v.code, v.index, v.ids) for v in violations]


# --- real traffic validates clean -----------------------------------------------------------


def test_traffic_is_there_to_check():
    """The clean-corpus tests below must not pass by finding nothing."""
    providers = [provider for _, provider, _ in cassette_bodies()]
    assert providers.count("anthropic") >= 20  # 41 in the full traffic, 23 in the sample
    assert providers.count("openai") >= 10  # 14 and 10
    assert len(tau_conversations()) == TAU_DIALOGUES


def test_every_recorded_cassette_body_is_valid():
    bad = {label: _codes(validate(body, provider)) for label, provider, body in cassette_bodies()}
    assert {label: found for label, found in bad.items() if found} == {}


def test_every_tau_bench_conversation_is_valid():
    bad = {}
    for item in tau_conversations():
        found = validate({"messages": item["traj"]}, "openai")
        if found:
            bad[(item["task_id"], item["trial"])] = _codes(found)
    assert bad == {}


def test_ids_reused_across_turns_are_accepted_as_the_providers_did():
    """OpenAI and Anthropic answered 200 to bodies that reuse a call id in a later, separate turn."""
    reused = 0
    for item in tau_conversations():
        ids = [c["id"] for m in item["traj"] for c in m.get("tool_calls") or []]
        reused += len(ids) != len(set(ids))
    assert reused > 0
    body = _body("test_cross_provider_capability_replay[google-gemini-3-flash-preview-anthropic-claude-sonnet-4-5].yaml", 3)
    uses = [b["id"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"]
    assert len(uses) != len(set(uses))
    assert validate(body, "anthropic") == []


# --- Anthropic: real bodies broken on purpose ----------------------------------------------

PARALLEL = "test_multiple_parallel_tool_calls.yaml"  # user | assistant: text + 4 tool_use | user: 4 tool_result


@pytest.fixture
def parallel() -> dict:
    body = _body(PARALLEL, 1)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert validate(body, "anthropic") == []
    return body


def _use_ids(message: dict) -> tuple[str, ...]:
    return tuple(b["id"] for b in message["content"] if b["type"] == "tool_use")


def test_anthropic_evicted_tool_use_turn_orphans_its_results(parallel):
    ids = _use_ids(parallel["messages"][1])
    assert len(ids) == 4
    del parallel["messages"][1]
    found = validate(parallel, "anthropic")
    assert _codes(found) == [("orphan_tool_result", 1, ids)]
    assert found[0].message == (
        f"messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(ids)}. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    )


def test_anthropic_evicted_result_leaves_its_call_unanswered(parallel):
    ids = _use_ids(parallel["messages"][1])
    del parallel["messages"][2]["content"][1]
    found = validate(parallel, "anthropic")
    assert _codes(found) == [("missing_tool_result", 1, (ids[1],))]
    assert found[0].message == (
        f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {ids[1]}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )


def test_anthropic_request_cannot_end_on_unanswered_calls(parallel):
    ids = _use_ids(parallel["messages"][1])
    del parallel["messages"][2]
    assert _codes(validate(parallel, "anthropic")) == [("missing_tool_result", 1, ids)]


def test_anthropic_results_must_be_in_the_very_next_message(parallel):
    ids = _use_ids(parallel["messages"][1])
    parallel["messages"].insert(2, {"role": "user", "content": "are you there?"})
    assert _codes(validate(parallel, "anthropic")) == [
        ("missing_tool_result", 1, ids),
        ("orphan_tool_result", 3, ids),
    ]


def test_anthropic_duplicate_tool_use_in_one_turn(parallel):
    first = parallel["messages"][1]["content"][1]
    parallel["messages"][1]["content"].append(copy.deepcopy(first))
    found = validate(parallel, "anthropic")
    assert _codes(found) == [("duplicate_tool_id", 1, (first["id"],))]
    assert found[0].message == "messages.1.content.5: `tool_use` ids must be unique"


def test_anthropic_result_answered_twice(parallel):
    results = parallel["messages"][2]["content"]
    results.append(copy.deepcopy(results[0]))
    found = validate(parallel, "anthropic")
    assert _codes(found) == [("duplicate_tool_id", 2, (results[0]["tool_use_id"],))]
    assert found[0].message == (
        "messages.2.content.4: each tool_use must have a single result. "
        f"Found multiple `tool_result` blocks with id: {results[0]['tool_use_id']}"
    )


def test_anthropic_text_before_tool_result(parallel):
    ids = _use_ids(parallel["messages"][1])
    parallel["messages"][2]["content"].insert(0, {"type": "text", "text": "here you go"})
    found = validate(parallel, "anthropic")
    assert _codes(found) == [("tool_result_not_first", 2, ids)]
    assert found[0].message.startswith("messages.2: Did not find 4 `tool_result` block(s) at the beginning")


def test_anthropic_text_after_tool_results_is_fine(parallel):
    parallel["messages"][2]["content"].append({"type": "text", "text": "and now summarise"})
    assert is_valid(parallel, "anthropic")


def test_anthropic_first_message_must_be_user():
    body = _body("test_anthropic_tool_with_thinking.yaml", 1)  # user | assistant: thinking, tool_use | user
    del body["messages"][0]
    found = validate(body, "anthropic")
    assert _codes(found) == [("first_message_not_user", 0, ())]
    assert found[0].message == 'messages: first message must use the "user" role'


HANDOFF = "test_live_tool_search_handoff_anthropic_openai_anthropic.yaml"  # #1: server_tool_use + its result


def _handoff() -> tuple[dict, list]:
    body = _body(HANDOFF, 1)
    content = body["messages"][1]["content"]
    assert [b["type"] for b in content] == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]
    return body, content


def test_anthropic_server_tool_use_is_answered_inside_its_own_turn():
    body, _ = _handoff()
    del body["messages"][2]  # drop the client result and end on the assistant turn...
    del body["messages"][1]["content"][3]  # ...without its client tool_use: only the server pair is left
    assert validate(body, "anthropic") == []


def test_anthropic_server_tool_result_without_its_server_tool_use():
    body, content = _handoff()
    server_id = content[1]["id"]
    del content[1]
    found = validate(body, "anthropic")
    assert _codes(found) == [("orphan_tool_result", 1, (server_id,))]
    assert found[0].message == (
        f"messages.1.content.1: unexpected `tool_use_id` found in `tool_search_tool_result` blocks: {server_id}. "
        "Each `tool_search_tool_result` block must have a corresponding `server_tool_use` block before it."
    )


def test_anthropic_server_tool_result_before_its_server_tool_use():
    body, content = _handoff()
    content[1], content[2] = content[2], content[1]
    assert _codes(validate(body, "anthropic")) == [("orphan_tool_result", 1, (content[2]["id"],))]


# --- OpenAI: real bodies broken on purpose --------------------------------------------------


def _first_call(body: dict) -> tuple[int, str]:
    k = next(i for i, m in enumerate(body["messages"]) if m.get("tool_calls"))
    assert body["messages"][k + 1]["role"] == "tool"
    return k, body["messages"][k]["tool_calls"][0]["id"]


def test_openai_evicted_tool_calls_message_orphans_its_tool_message():
    body = _tau()
    k, call = _first_call(body)
    del body["messages"][k]
    found = validate(body, "openai")
    assert _codes(found) == [("orphan_tool_result", k, (call,))]
    assert found[0].message == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
    )


def test_openai_evicted_tool_message_leaves_its_call_unanswered():
    body = _tau()
    k, call = _first_call(body)
    del body["messages"][k + 1]
    found = validate(body, "openai")
    assert _codes(found) == [("missing_tool_result", k, (call,))]
    assert found[0].message == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {call}"
    )


def test_openai_request_cannot_end_on_unanswered_calls():
    body = _tau()
    k, call = _first_call(body)
    del body["messages"][k + 1:]
    assert _codes(validate(body, "openai")) == [("missing_tool_result", k, (call,))]


PARALLEL_OPENAI = "test_complex_agent_run.yaml"  # #2: user | assistant: 2 calls | tool | tool | assistant: 1 call | tool


@pytest.fixture
def parallel_openai() -> dict:
    body = _body(PARALLEL_OPENAI, 2)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert len(body["messages"][1]["tool_calls"]) == 2
    assert validate(body, "openai") == []
    return body


def test_openai_one_of_a_parallel_batch_evicted(parallel_openai):
    second = parallel_openai["messages"][1]["tool_calls"][1]["id"]
    del parallel_openai["messages"][3]
    assert _codes(validate(parallel_openai, "openai")) == [("missing_tool_result", 1, (second,))]


def test_openai_tool_message_answered_twice(parallel_openai):
    msgs = parallel_openai["messages"]
    msgs.insert(3, copy.deepcopy(msgs[2]))
    call = msgs[2]["tool_call_id"]
    found = validate(parallel_openai, "openai")
    assert _codes(found) == [("duplicate_tool_id", 3, (call,))]
    assert found[0].message == (
        f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call}' in messages[2] and messages[3]."
    )


def test_openai_duplicate_call_id_in_one_message(parallel_openai):
    calls = parallel_openai["messages"][1]["tool_calls"]
    calls.append(copy.deepcopy(calls[0]))
    assert _codes(validate(parallel_openai, "openai")) == [("duplicate_tool_id", 1, (calls[0]["id"],))]


def test_openai_tool_message_may_only_answer_the_latest_tool_calls(parallel_openai):
    msgs = parallel_openai["messages"]
    earlier, latest = msgs[1]["tool_calls"][0]["id"], msgs[4]["tool_calls"][0]["id"]
    msgs[5]["tool_call_id"] = earlier
    assert _codes(validate(parallel_openai, "openai")) == [
        ("missing_tool_result", 4, (latest,)),
        ("orphan_tool_result", 5, (earlier,)),
    ]


def test_openai_tool_message_after_a_user_turn(parallel_openai):
    msgs = parallel_openai["messages"]
    msgs.insert(3, {"role": "user", "content": "hurry up"})
    second = msgs[1]["tool_calls"][1]["id"]
    assert _codes(validate(parallel_openai, "openai")) == [
        ("missing_tool_result", 1, (second,)),
        ("orphan_tool_result", 4, (second,)),
    ]


# --- malformed input: a violation naming where, never an exception ------------------------

MALFORMED = [
    ("anthropic", [], None, "request body must be a JSON object"),
    ("openai", None, None, "request body must be a JSON object"),
    ("anthropic", {}, None, "messages: Field required"),
    ("openai", {"model": "gpt-4o"}, None, "'messages'"),
    ("anthropic", {"messages": {"role": "user"}}, None, "messages: Input should be a valid list"),
    ("openai", {"messages": "hi"}, None, "expected an array"),
    ("anthropic", {"messages": []}, None, "at least one message"),
    ("openai", {"messages": []}, None, "empty array"),
    ("anthropic", {"messages": [{"role": "user", "content": "a"}, "b"]}, 1, "messages.1: Input should be a valid dictionary"),
    ("openai", {"messages": [{"role": "user", "content": "a"}, 7]}, 1, "'messages[1]'"),
    ("anthropic", {"messages": [{"content": "a"}]}, 0, "messages.0.role: Field required"),
    ("openai", {"messages": [{"content": "a"}]}, 0, "'messages[0].role'"),
    ("anthropic", {"messages": [{"role": "tool", "content": "a"}]}, 0, "messages.0.role"),
    ("anthropic", {"messages": [{"role": ["user"], "content": "a"}]}, 0, "messages.0.role"),
    ("openai", {"messages": [{"role": "robot", "content": "a"}]}, 0, "messages[0].role"),
    ("anthropic", {"messages": [{"role": "user"}]}, 0, "messages.0.content: Field required"),
    ("anthropic", {"messages": [{"role": "user", "content": 5}]}, 0, "messages.0.content"),
    ("anthropic", {"messages": [{"role": "user", "content": [None]}]}, 0, "messages.0.content.0"),
    ("anthropic", {"messages": [{"role": "user", "content": [{"text": "x"}]}]}, 0, "messages.0.content.0.type"),
    ("anthropic", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_use", "name": "f", "input": {}}]}]}, 1, "messages.1.content.0.id"),
    ("anthropic", {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": ["x"]}]}]}, 0, "messages.0.content.0.tool_use_id"),
    ("anthropic", {"messages": [{"role": "user", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]}, 0, "only allowed in `assistant` messages"),
    ("openai", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": {"id": "c"}}]},
     1, "'messages[1].tool_calls'"),
    ("openai", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, 1, "'messages[1].tool_calls[0].id'"),
    ("openai", {"messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}]},
     1, "'messages[1].tool_call_id'"),
]


@pytest.mark.parametrize(("provider", "body", "index", "fragment"), MALFORMED)
def test_malformed_bodies_are_named_not_raised(provider, body, index, fragment):
    found = validate(body, provider)
    malformed = [v for v in found if v.code == "malformed"]
    assert len(malformed) == 1, found
    assert malformed[0].index == index
    assert fragment in malformed[0].message


def test_unknown_provider_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown provider 'gemini'"):
        validate({"messages": []}, "gemini")


_KEYS = st.sampled_from(["messages", "role", "content", "type", "id", "tool_use_id", "tool_calls", "tool_call_id"])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2),
    st.sampled_from(["user", "assistant", "system", "tool", "tool_use", "tool_result", "server_tool_use",
                     "web_search_tool_result", "text", "t1", "t2", ""]),
)
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
                     max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_JSON, provider=st.sampled_from(["anthropic", "openai"]))
def test_any_json_value_gets_violations_not_exceptions(body, provider):
    before = copy.deepcopy(body)
    found = validate(body, provider)
    assert body == before  # validation never edits the body
    assert all(isinstance(v, Violation) and v.code in CODES and v.message for v in found)
    assert is_valid(body, provider) == (found == [])


# --- the CLI, end to end --------------------------------------------------------------------


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_cli_single_json_body_ok(tmp_path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps(_body(PARALLEL, 1), indent=2))
    run = run_prunegate("validate", str(body), "--provider", "anthropic")
    assert (run.returncode, run.stdout, run.stderr) == (0, f"{body}:1: OK\n", "")


def test_cli_jsonl_reports_each_body_and_exits_1(tmp_path):
    good = _tau(0)
    broken = _tau(0)
    k, call = _first_call(broken)
    del broken["messages"][k + 1]
    path = _jsonl(tmp_path / "bodies.jsonl", [{"id": "t0", **good}, {"id": "t1", **broken}])
    run = run_prunegate("validate", str(path), "--provider", "openai")
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines() == [
        f"{path}:1 t0: OK",
        f"{path}:2 t1: INVALID",
        "  missing_tool_result: An assistant message with 'tool_calls' must be followed by tool messages "
        f"responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {call}",
    ]

    run = run_prunegate("validate", str(path), "--provider", "openai", "--json")
    assert run.returncode == 1
    report = json.loads(run.stdout)
    assert [(r["file"], r["line"], r["id"], r["valid"]) for r in report] == [
        (str(path), 1, "t0", True), (str(path), 2, "t1", False)]
    assert report[0]["errors"] == []
    assert [(e["code"], e["index"], e["ids"]) for e in report[1]["errors"]] == [("missing_tool_result", k, [call])]
    assert report[1]["errors"][0]["message"].startswith("An assistant message with 'tool_calls'")


def test_cli_half_written_jsonl_names_file_and_line(tmp_path):
    lines = [json.dumps({"id": f"t{n}", **_tau(n)}) for n in range(3)]
    path = tmp_path / "bodies.jsonl"
    path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2])
    run = run_prunegate("validate", str(path), "--provider", "openai")
    assert run.returncode == 2
    assert run.stderr.startswith(f"prunegate: {path}:3: invalid JSON: ")
    assert "(column " in run.stderr


def test_cli_broken_pretty_json_points_at_the_bad_line(tmp_path):
    path = tmp_path / "body.json"
    path.write_text('{\n  "messages": [\n    {"role": "user" "content": "hi"}\n  ]\n}\n')
    run = run_prunegate("validate", str(path), "--provider", "anthropic")
    assert run.returncode == 2
    assert run.stderr == f"prunegate: {path}:3: invalid JSON: Expecting ',' delimiter (column 21)\n"


def test_cli_unreadable_input_exits_2_but_reports_the_rest(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_tau(0)))
    missing = tmp_path / "missing.jsonl"
    not_object = _jsonl(tmp_path / "list.jsonl", [{"messages": []}])
    not_object.write_text(not_object.read_text() + "[1, 2]\n")
    run = run_prunegate("validate", str(good), str(missing), str(not_object), "--provider", "openai", "--json")
    assert run.returncode == 2
    # the bad line is refused; the file's other lines are still checked
    assert [(r["file"], r["line"]) for r in json.loads(run.stdout)] == [(str(good), 1), (str(not_object), 1)]
    assert run.stderr.splitlines() == [
        f"prunegate: {missing}: cannot read: No such file or directory",
        f"prunegate: {not_object}:2: expected a JSON object (one request body), got array",
    ]


def test_cli_needs_a_known_provider(tmp_path):
    path = tmp_path / "b.json"
    path.write_text("{}")
    run = run_prunegate("validate", str(path), "--provider", "gemini")
    assert run.returncode == 2
    assert "invalid choice: 'gemini'" in run.stderr


def test_a_recording_without_thinking_signatures_is_not_held_to_them_but_a_live_body_is():
    from policies import Context
    from policies.validate import THINKING_UNSIGNED, unrecorded

    signed = {"model": "m", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "sig"},
                                          {"type": "text", "text": "a"}]},
        {"role": "user", "content": "more"}]}
    unsigned = json.loads(json.dumps(signed))
    del unsigned["messages"][1]["content"][0]["signature"]
    assert unrecorded(Context.from_anthropic(signed).iter_messages()) == frozenset()
    assert unrecorded(Context.from_anthropic(unsigned).iter_messages()) == {THINKING_UNSIGNED}
    assert [v.code for v in validate(unsigned, "anthropic")] == [THINKING_UNSIGNED]  # live bodies: in full
