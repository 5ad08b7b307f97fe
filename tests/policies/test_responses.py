"""The OpenAI Responses API as a provider format: lossless round trip, units, pins, validators."""

from __future__ import annotations

import copy

import pytest

from policies import Context, validate
from policies.validate import (
    COMPACTION_MISPLACED,
    DUPLICATE_ITEM_ID,
    MISSING_TOOL_RESULT,
    ORPHAN_TOOL_RESULT,
    REASONING_WITHOUT_FOLLOWING,
    THINKING_NOT_FIRST,
    THINKING_UNSIGNED,
    WRONG_PROVIDER,
)
from tests.policies.responses_items import (
    answer,
    call,
    compaction,
    custom_call,
    custom_output,
    output,
    reasoning,
    user,
    user_parts,
    web_search,
)
from tests.traffic import responses_bodies

SERVER_ITEMS = [
    {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed"},
    {"type": "code_interpreter_call", "id": "ci_1", "code": "1+1", "container_id": "cntr_1",
     "outputs": [{"type": "logs", "logs": "2"}], "status": "completed"},
    {"type": "image_generation_call", "id": "ig_1", "result": "iVBOR", "status": "completed"},
    {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "s", "tools": [{"name": "t", "input_schema": {}}]},
    {"type": "mcp_call", "id": "mcp_1", "arguments": "{}", "name": "t", "server_label": "s", "output": "ok"},
]


def body_with_everything() -> dict:
    return {
        "model": "gpt-5", "instructions": "Be brief.", "tools": [{"type": "function", "name": "lookup"}],
        "previous_response_id": None, "store": False, "include": ["reasoning.encrypted_content"],
        "context_management": [{"type": "compaction", "compact_threshold": 200000}],
        "input": [
            {"role": "developer", "content": "You plan trips."},
            user_parts("what is in this picture?"),
            reasoning("rs_1", "two lookups"), call("c1", city="Lisbon"), call("c2", city="Porto"),
            output("c2", "rain"), output("c1", "sun"),
            reasoning("rs_2"), web_search("ws_1"), *SERVER_ITEMS, answer("msg_1", "Sun in Lisbon."),
            compaction("cmp_1"),
            user("and now?"),
            reasoning("rs_3"), custom_call("k1"), custom_output("k1", "found"),
            {"type": "computer_call", "id": "cu_1", "call_id": "cc1", "action": {"type": "screenshot"},
             "pending_safety_checks": [], "status": "completed"},
            {"type": "computer_call_output", "call_id": "cc1",
             "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"}},
            {"type": "local_shell_call", "id": "ls_1", "call_id": "lc1", "status": "completed",
             "action": {"type": "exec", "command": ["ls"], "env": {}}},
            {"type": "local_shell_call_output", "id": "lc1", "output": "{\"stdout\": \"a\"}"},
            {"type": "mcp_approval_request", "id": "mcpr_1", "arguments": "{}", "name": "t", "server_label": "s"},
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
            {"type": "item_reference", "id": "rs_0"},
            {"id": "msg_0"},
            {"type": "brand_new_item", "payload": [1, 2]},
            user("thanks"),
        ],
    }


def test_round_trip_is_lossless_and_does_not_mutate():
    body = body_with_everything()
    original = copy.deepcopy(body)
    ctx = Context.from_responses(body)
    assert ctx.render() == original
    assert ctx.render("responses") == original
    assert body == original


RECORDED = list(responses_bodies())


def test_recorded_responses_requests_round_trip_and_validate():
    assert len(RECORDED) >= 2
    for name, body in RECORDED:
        original = copy.deepcopy(body)
        ctx = Context.from_responses(body)
        assert ctx.to_responses() == original, name
        assert validate(body, "responses") == [], name
        assert all(u.closed and not u.orphan for u in ctx.units.values()), name


def test_string_input_round_trips():
    assert Context.from_responses({"model": "gpt-5", "input": "hi"}).to_responses() == {"model": "gpt-5", "input": "hi"}


def _unit_items(ctx: Context) -> list[list[str]]:
    """Each unit as the item types (or roles) it renders to."""
    from policies.convert import responses_items

    out = []
    for unit in ctx.units.values():
        items = [i for m in unit.message_ids for i in responses_items(ctx.message(m))]
        out.append([i.get("type") or i.get("role") for i in items])
    return out


def test_units_keep_a_response_together_with_its_outputs():
    ctx = Context.from_responses(body_with_everything())
    units = _unit_items(ctx)
    assert ["reasoning", "function_call", "function_call", "function_call_output", "function_call_output"] in units
    assert ["reasoning", "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
            "mcp_list_tools", "mcp_call", "message"] in units
    assert ["reasoning", "custom_tool_call", "custom_tool_call_output"] in units
    assert ["computer_call", "computer_call_output"] in units
    assert ["local_shell_call", "local_shell_call_output"] in units
    assert ["mcp_approval_request", "mcp_approval_response"] in units
    assert ["compaction"] in units
    assert all(u.closed and not u.orphan for u in ctx.units.values())


def test_compaction_and_outputs_of_server_held_calls_are_pinned():
    body = {"model": "gpt-5", "previous_response_id": "resp_1",
            "input": [compaction("cmp_1"), user("q"), reasoning("rs_1"), answer("m1", "a"), user("q2"),
                      output("c_prev", "held by the server"), user("q3")]}
    ctx = Context.from_responses(body)
    pinned = {ctx.message(m).blocks[0].extra.get("type") or ctx.message(m).role
              for u in ctx.pinned_unit_ids() for m in ctx.units[u].message_ids}
    assert {"compaction", "function_call_output"} <= pinned
    # the first user message and the live turn are pinned as always; the old response is not
    assert "reasoning" not in pinned


def test_rewritten_output_and_answer_render_their_new_content():
    ctx = Context.from_responses({"input": [user("q"), reasoning("rs_1"), call("c1"), output("c1", "long"),
                                            answer("m1", "old"), user("q2")]})
    tool = next(m for m in ctx.messages if m.role == "tool")
    new = tool.copy()
    new.blocks[0].content = "[masked]"
    ctx.replace_message(tool.id, new)
    group = next(m for m in ctx.messages if m.role == "assistant" and m.blocks[0].type == "text")
    rewritten = group.copy()
    rewritten.blocks[0].text = "new"
    ctx.replace_message(group.id, rewritten)
    items = ctx.to_responses()["input"]
    assert items[3] == output("c1", "[masked]")
    assert items[4]["content"] == [{"type": "output_text", "text": "new", "annotations": []}]
    assert items[4]["id"] == "m1"
    assert validate(ctx.to_responses(), "responses") == []


# --------------------------------------------------------------------------- validators

def codes(body: dict, provider: str = "responses") -> list[str]:
    return [v.code for v in validate(body, provider)]


def test_a_valid_body_has_no_violations():
    body = body_with_everything()
    assert validate(body, "responses") == []
    assert validate({"model": "gpt-5", "input": "hi"}, "responses") == []


@pytest.mark.parametrize("items,blamed", [
    ([user("q"), reasoning("rs_1")], ["rs_1"]),
    ([user("q"), reasoning("rs_1"), user("q2")], ["rs_1"]),
    ([user("q"), call("c1"), reasoning("rs_1"), reasoning("rs_2"), output("c1", "x")], ["rs_1", "rs_2"]),
])
def test_reasoning_without_its_following_item(items, blamed):
    found = validate({"input": items}, "responses")
    assert [v.code for v in found] == [REASONING_WITHOUT_FOLLOWING] * len(blamed)
    assert [v.message for v in found] == [
        f"Item '{rid}' of type 'reasoning' was provided without its required following item." for rid in blamed]


def test_call_output_without_its_call_and_call_without_output():
    found = validate({"input": [user("q"), output("c9", "x"), call("c1")]}, "responses")
    assert [(v.code, v.index, v.message) for v in found] == [
        (ORPHAN_TOOL_RESULT, 1, "No tool call found for function call output with call_id c9."),
        (MISSING_TOOL_RESULT, 2, "No tool output found for function call c1."),
    ]
    # the same output continuing a stored response is fine
    assert validate({"previous_response_id": "resp_1", "input": [output("c9", "x")]}, "responses") == []
    assert codes({"input": [custom_output("k1", "x")]}) == [ORPHAN_TOOL_RESULT]


def test_duplicate_item_ids_and_malformed_items():
    assert codes({"input": [reasoning("rs_1"), answer("m", "a"), reasoning("rs_1"), answer("n", "b")]}) == \
        [DUPLICATE_ITEM_ID]
    assert codes({"input": [{"role": "tool", "content": "x"}, {"type": "function_call", "name": "f"}, 3,
                            {"type": "compaction"}]}) == ["malformed"] * 4
    assert codes({"input": 5}) == ["malformed"]
    assert codes({"messages": [{"role": "user", "content": "x"}]}) == ["malformed"]


def test_a_responses_body_is_recognised_for_the_other_providers():
    found = validate({"model": "gpt-5", "input": [user("q")]}, "openai")
    assert found[0].code == WRONG_PROVIDER and "Responses" in found[0].message


THINKING = {"type": "thinking", "thinking": "plan", "signature": "sig=="}


def anthropic_turn(first_blocks: list[dict]) -> dict:
    return {"model": "claude-opus-4-6", "max_tokens": 1000, "thinking": {"type": "enabled", "budget_tokens": 500},
            "messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": [*first_blocks,
                                                           {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}]}


def test_thinking_must_lead_the_assistant_turn_in_progress():
    assert codes(anthropic_turn([THINKING]), "anthropic") == []
    assert codes(anthropic_turn([{"type": "redacted_thinking", "data": "x"}]), "anthropic") == []
    assert codes(anthropic_turn([{"type": "compaction", "content": "so far"}, THINKING]), "anthropic") == []
    found = validate(anthropic_turn([]), "anthropic")
    assert [v.code for v in found] == [THINKING_NOT_FIRST]
    assert found[0].message.startswith("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, "
                                       "but found `tool_use`. When `thinking` is enabled, a final `assistant` "
                                       "message must start with a thinking block")
    off = anthropic_turn([])
    del off["thinking"]
    assert codes(off, "anthropic") == []
    finished = anthropic_turn([])  # the turn is over once a user text message follows
    finished["messages"] += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    assert codes(finished, "anthropic") == []


def test_thinking_keeps_its_signature_and_compaction_stays_in_assistant_turns():
    unsigned = anthropic_turn([{"type": "thinking", "thinking": "plan"}])
    found = validate(unsigned, "anthropic")
    assert [(v.code, v.message) for v in found] == [
        (THINKING_UNSIGNED, "messages.1.content.0.thinking.signature: Field required")]
    body = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
        {"type": "compaction", "content": "summary"}, {"type": "text", "text": "q"}]}]}
    assert codes(body, "anthropic") == [COMPACTION_MISPLACED]


def test_the_validate_command_speaks_responses(tmp_path):
    import json

    from tests.servers import run_prunegate

    path = tmp_path / "bodies.jsonl"
    broken = {"model": "gpt-5", "input": [user("q"), reasoning("rs_1")]}
    path.write_text("".join(json.dumps(b) + "\n" for b in ({"id": "ok", **body_with_everything()},
                                                          {"id": "bad", **broken})))
    run = run_prunegate("validate", str(path), "--provider", "responses")
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines() == [
        f"{path}:1 ok: OK",
        f"{path}:2 bad: INVALID",
        "  reasoning_without_following_item: Item 'rs_1' of type 'reasoning' was provided without its required "
        "following item.",
    ]
