"""The guard counts in the tokens of the model the agent calls: framing and image rule by model family."""

from __future__ import annotations

import pytest

from tracer.guard import PruneGuard

pytest.importorskip("tiktoken", reason="the test extra installs tiktoken")


def body(model: str) -> dict:
    return {"model": model, "messages": [{"role": "system", "content": "You are terse."},
                                         {"role": "user", "content": "What is the capital of France?"}]}


@pytest.mark.parametrize(("model", "framing"), [("gpt-5", "harmony"), ("gpt-5-mini", "harmony"), ("o3", "harmony"),
                                                ("o4-mini", "harmony"), ("gpt-oss-120b", "harmony"),
                                                ("gpt-4o", "chat"), ("gpt-4.1", "chat")])
def test_the_first_request_s_model_picks_the_framing(rec, model, framing):
    pg = PruneGuard("recency", budget=10_000, provider="openai", tracer_provider=rec.provider)
    pg.gate(body(model))
    assert pg.token_counter.framing == framing and pg.context.counter is pg.token_counter
    assert pg.token_counter.model == model
    # the context's count is the model's framing: harmony adds the channel preamble, chat does not
    assert pg.context.request_tokens == sum(pg.token_counter.count(m) for m in pg.context.messages) \
        + pg.context.overhead_tokens
    pg.close()


def test_a_counter_the_user_passes_is_kept(rec):
    from policies.tokens.bpe import TiktokenCounter

    mine = TiktokenCounter(framing="chat")
    pg = PruneGuard("recency", budget=10_000, provider="openai", tracer_provider=rec.provider, token_counter=mine)
    pg.gate(body("gpt-5"))
    assert pg.token_counter is mine and pg.context.counter is mine
    pg.close()
