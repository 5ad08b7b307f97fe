"""Token counters: exact OpenAI counts offline, the calibrated Anthropic counter, the whole request."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from policies import (
    ApproxTokenCounter,
    Context,
    Gate,
    Message,
    PolicyError,
    get_policy,
    text_message,
    tool_result,
    tool_use,
)
from policies.tokens import bpe as bpe_mod
from policies.tokens import counter_for
from policies.tokens.calibrated import CODE, JSON, PROSE, AnthropicCounter, kind_of
from tests.paths import REPO
from tests.traffic import FULL, TAU2

TRAFFIC = FULL  # the benchmark's error bounds are over all the recorded usage, not the sample
tiktoken = pytest.importorskip("tiktoken", reason="the test extra installs tiktoken")


def test_the_encoding_loads_offline_from_the_wheel_and_matches_tiktoken():
    enc = bpe_mod.load_encoding("o200k_base")
    assert enc.name == "o200k_base" and enc.n_vocab == 200019
    text = 'Look up {"order_id": "A-17", "qty": 3} and the weather in Tromsø.'
    counter = bpe_mod.TiktokenCounter()
    assert counter.tokens(text) == len(enc.encode(text))
    assert enc.encode("hello world") == [24912, 2375]  # the ids OpenAI's cookbook shows
    assert bpe_mod.load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_a_tampered_encoding_file_is_refused(tmp_path, monkeypatch):
    data = bpe_mod._data_dir()
    assert data is not None
    raw = gzip.decompress((data / "cl100k_base.tiktoken.gz").read_bytes())
    (tmp_path / "cl100k_base.tiktoken.gz").write_bytes(gzip.compress(raw.replace(b" 0\n", b" 1\n", 1)))
    monkeypatch.setattr(bpe_mod, "_data_dir", lambda: tmp_path)
    monkeypatch.setattr(bpe_mod, "_CACHE", {})
    with pytest.raises(PolicyError, match="SHA-256"):
        bpe_mod.load_encoding("cl100k_base")


def test_the_exact_counter_counts_a_recorded_request_as_openai_did():
    # test_multiple_agent_tool_calls.yaml, interaction 2: usage.prompt_tokens == 104 (gpt-4o-mini)
    body = {"model": "gpt-4o-mini", "tools": [{"type": "function", "function": {
        "name": "get_capital", "description": "Get the capital of a country.",
        "parameters": {"additionalProperties": False, "properties": {"country": {"description": "The country name.",
                                                                                  "type": "string"}},
                       "required": ["country"], "type": "object"}}}],
        "messages": [{"role": "user", "content": "What is the capital of France?"},
                     {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                         "name": "get_capital", "arguments": "{\"country\":\"France\"}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "Paris"},
                     {"role": "assistant", "content": "The capital of France is Paris.\n"},
                     {"role": "user", "content": "What is the capital of England?"}]}
    ctx = Context.from_openai(body, token_counter=counter_for("openai"), count_request=True)
    assert abs(ctx.request_tokens - 104) <= 3
    assert ctx.overhead_tokens > 0 and ctx.request_tokens == ctx.tokens + ctx.overhead_tokens


def test_openai_traffic_gets_the_exact_counter_by_default():
    assert isinstance(counter_for("openai"), bpe_mod.TiktokenCounter)
    assert isinstance(counter_for("anthropic"), AnthropicCounter)
    assert isinstance(counter_for(None), ApproxTokenCounter)


def test_content_kinds():
    assert kind_of('{"a": [1, 2, {"b": "c"}]}') == JSON
    assert kind_of("def f(x):\n    return x + 1\nclass A:\n    pass\nimport os\n") == CODE
    assert kind_of("The order shipped on Monday and should arrive this week.") == PROSE


def test_dense_json_costs_more_per_character_than_prose_for_the_anthropic_counter():
    c = AnthropicCounter()
    prose = "the weather in the city is mild and clear with a light breeze " * 5
    data = '{"a":1,"b":[2,3],"c":{"d":"e"},"f":[4,5,6],"g":"h"}' * 6
    as_result = lambda s: Message(id="", role="user", blocks=[tool_result("c1", s)])  # noqa: E731
    assert c.count(as_result(data)) / len(data) > c.count(as_result(prose)) / len(prose)


def test_the_gate_holds_the_whole_request_and_says_what_the_overhead_takes():
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "Look something up. " * 10,
                                               "parameters": {"type": "object", "properties": {
                                                   "q": {"type": "string", "description": "what"}}}}}
             for i in range(6)]
    ctx = Context(provider="openai", token_counter=counter_for("openai"), count_request=True,
                  request_extra={"model": "gpt-4o", "tools": tools})
    ctx.append(text_message("", "system", "You are terse."))
    ctx.append(text_message("", "user", "start"))
    for i in range(12):
        ctx.append(Message(id="", role="assistant", blocks=[tool_use(f"c{i}", "tool_0", {"q": str(i)})]))
        ctx.append(Message(id="", role="tool", blocks=[tool_result(f"c{i}", '{"answer": "' + "x" * 300 + '"}')]))
    gate = Gate(get_policy("recency"), budget=900)
    d = gate.check(ctx)
    assert d.overhead_tokens == ctx.overhead_tokens > 300
    assert d.tokens_after == ctx.tokens + ctx.overhead_tokens <= 900
    assert 0.3 < d.overhead_share < 1
    assert ctx.tokens <= 900 - d.overhead_tokens, "the messages got only what the tools left"


@pytest.mark.skipif(not TRAFFIC.is_dir(), reason="needs the recorded traffic in ../shared/traffic")
def test_the_benchmark_meets_the_error_bounds_against_recorded_usage():
    out = subprocess.run([sys.executable, str(REPO / "bench" / "bench_tokens.py"), "--json"], check=True,
                         capture_output=True, text=True, timeout=300).stdout
    rows = {(r["set"], r["counter"]): r for r in json.loads(out)}
    assert rows[("OpenAI (chat + responses)", "tiktoken o200k_base")]["mae_pct"] <= 3
    assert rows[("Anthropic, all", "anthropic calibrated (bpe)")]["mae_pct"] <= 8
    assert rows[("Anthropic, held-out files", "anthropic calibrated (chars)")]["mae_pct"] <= 10
    calibrated = rows[("Anthropic, all", "anthropic calibrated (bpe)")]
    assert calibrated["json_inc_under"] < calibrated["json_inc_n"], "JSON results are not always under-counted"


def test_per_turn_anthropic_counts_follow_the_provider_s_growth_between_calls():
    # the growth of claude-opus-4-6's input_tokens between consecutive calls against the count of the
    # messages added in between (bench/bench_tokens.py), on the held-out (odd) dialogues of TAU2
    from bench.bench_tokens import tau2_dialogues, tau2_turns, turn_table

    turns, _ = tau2_turns(TAU2.parent)
    assert {t.side for t in turns} == {"agent", "user"} and any(t.held_out for t in turns)
    rows = {(r["set"], r["counter"]): r for r in turn_table(turns, tau2_dialogues(TAU2.parent))}
    user = rows[("τ² per turn: user turns, held-out", "anthropic calibrated (bpe)")]
    assert user["n"] >= 10 and user["mae_pct"] <= 10
    assert user["mae_pct"] < rows[("τ² per turn: user turns, held-out", "approx (chars/4)")]["mae_pct"]
    agent = rows[("τ² per turn: agent turns, held-out", "anthropic calibrated (bpe)")]
    assert agent["n"] >= 10 and agent["median_abs_pct"] <= 10 and agent["mae_pct"] <= 10
    for kind in ("user simulator", "agent, after a user message", "agent, tool loop"):
        row = rows[(f"τ² per turn: {kind}, held-out", "anthropic calibrated (bpe)")]
        assert row["n"] >= 5 and row["mae_pct"] <= 10, (kind, row)
    # against the whole recorded input (the harness's retry notes included) the same counter is far off
    recorded = rows[("τ² per turn (as recorded): agent turns, held-out", "anthropic calibrated (bpe)")]
    assert recorded["mae_pct"] > 1.5 * agent["mae_pct"]
    # over whole dialogues (first call to last) the agent's growth is followed closely too
    for side in ("agent", "user"):
        whole = rows[(f"τ² per dialogue: {side}, held-out", "anthropic calibrated (bpe)")]
        assert whole["n"] >= 2 and whole["mae_pct"] <= 5


def test_calls_answering_the_harness_s_retry_note_are_found_from_the_recorded_cache_usage():
    # The τ²-bench AdaptiveAgent rejects an answer holding both text and tool calls and asks again with a
    # transient note (up to twice, the last answer kept unchecked): a recorded answer with both can only
    # answer a retry. The usage alone (cache prefix against the previous call's input) must find each.
    from bench.bench_tokens import _usage_parts, retried_calls

    both = found = 0
    for dialogue in json.loads(next(TAU2.glob("*.json")).read_text(encoding="utf-8")):
        records = dialogue["messages"]
        calls = [i for i, r in enumerate(records) if r["role"] == "assistant" and r.get("raw_data")]
        retried = retried_calls(records, calls)
        assert len(retried) < len(calls)
        for i in calls:
            if records[i].get("content") and records[i].get("tool_calls"):
                both += 1
                found += i in retried
                assert _usage_parts(records[i])[1] >= 90  # the uncached tail holds at least the note
    assert both >= 3 and found == both


def test_the_anthropic_counter_measures_text_in_bpe_tokens_when_the_extra_is_installed():
    assert AnthropicCounter().measure == "bpe"
    assert AnthropicCounter(measure="chars").measure == "chars"
    with pytest.raises(PolicyError, match="measure"):
        AnthropicCounter(measure="words")


@pytest.mark.parametrize(("model", "framing", "encoding"), [
    ("gpt-5", "harmony", "o200k_base"), ("gpt-5.4-mini", "harmony", "o200k_base"), ("o1", "harmony", "o200k_base"),
    ("o3-mini", "harmony", "o200k_base"), ("o4-mini", "harmony", "o200k_base"), ("gpt-oss-20b", "harmony", "o200k_base"),
    ("openai/gpt-5", "harmony", "o200k_base"), ("gpt-4o", "chat", "o200k_base"), ("gpt-4.1-nano", "chat", "o200k_base"),
    ("gpt-4-turbo", "chat", "cl100k_base"), ("gpt-3.5-turbo", "chat", "cl100k_base"), (None, "chat", "o200k_base")])
def test_framing_and_encoding_follow_the_model_family(model, framing, encoding):
    counter = counter_for("openai", model)
    assert isinstance(counter, bpe_mod.TiktokenCounter)
    assert (counter.framing, counter.encoding) == (framing, encoding)


def test_the_gpt5_framing_chosen_by_model_counts_recorded_requests_closer_than_chat():
    # the recorded gpt-5.4 Responses requests (pydantic-ai cassettes; in the sample too) with their usage
    from bench.bench_tokens import count, load

    gpt5 = [s for s in load(TAU2.parent) if s.api != "anthropic" and bpe_mod.framing_for(s.model) == "harmony"]
    assert gpt5, "the cassettes hold gpt-5-family requests"
    for s in gpt5:
        auto = count(counter_for("openai", s.model), s.messages, s.extra)
        chat = count(bpe_mod.TiktokenCounter(framing="chat", model=s.model), s.messages, s.extra)
        assert abs(auto - s.truth) / s.truth <= 0.05
        assert abs(auto - s.truth) < abs(chat - s.truth)


def test_a_tool_result_is_spoken_by_its_call_s_name_in_both_openai_formats():
    # OpenAI renders a result as spoken by functions.NAME; the name lives on the call, so the conversion
    # hands it to the result that answers it (Chat Completions tool messages, Responses outputs)
    from policies import convert

    chat, _ = convert.from_openai({"messages": [
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_exchange_rate", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "get_capital", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "London"},
        {"role": "tool", "tool_call_id": "c1", "content": "0.92"},
        {"role": "tool", "tool_call_id": "c9", "content": "a call this request does not hold"}]})
    assert [m.blocks[0].name for m in chat[1:]] == ["get_capital", "get_exchange_rate", None]
    items = [{"type": "function_call", "call_id": "r1", "name": "get_exchange_rate", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "r1", "output": "GBP/USD: 0.92"},
             {"type": "function_call_output", "call_id": "r0", "output": "answers previous_response_id"}]
    responses, _ = convert.from_responses({"model": "gpt-5.4", "input": items})
    assert responses[1].blocks[0].name == "get_exchange_rate"
    assert convert.to_responses(responses)["input"] == items, "the name is not sent back"

    harmony = bpe_mod.TiktokenCounter(model="gpt-5.4")
    assert harmony.count(responses[1]) == 5 + harmony.tokens("functions.get_exchange_rate to=assistant") \
        + harmony.tokens("GBP/USD: 0.92")
    gpt4o = bpe_mod.TiktokenCounter(model="gpt-4o")
    assert gpt4o.count(chat[1]) == 3 + gpt4o.tokens("functions.get_capital") + gpt4o.tokens("London")
    assert gpt4o.count(chat[3]) == 3 + gpt4o.tokens(bpe_mod.RESULT_NAME) + gpt4o.tokens(
        "a call this request does not hold"), "an unknown call's result keeps the mean name"


def test_openai_per_turn_counts_follow_the_provider_s_growth_between_requests():
    # every recorded OpenAI turn with usage (pydantic-ai cassettes; the shipped sample holds the gpt-5.4
    # Responses turn and three gpt-4o-family Chat Completions turns): the growth of usage between two
    # consecutive requests against the count of what was appended, within 2 tokens a turn (the gpt-5.4
    # turn was 3 under while its result was spoken as functions.tool)
    from bench.bench_tokens import count, load

    turns = [s for s in load(TAU2.parent) if s.api != "anthropic" and s.previous is not None]
    assert any(bpe_mod.framing_for(s.model) == "harmony" for s in turns), "the gpt-5.4 turn is recorded"
    assert len(turns) >= 4
    for s in turns:
        counter = counter_for("openai", s.model)
        mine = count(counter, s.messages, s.extra) - count(counter, s.previous.messages, s.previous.extra)
        grown = s.truth - s.previous.truth
        assert abs(mine - grown) <= (1 if bpe_mod.framing_for(s.model) == "harmony" else 2), (s.file, mine, grown)
