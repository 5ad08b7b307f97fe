"""How close is each token counter to what the providers really counted?

Ground truth: the pydantic-ai cassettes in ``../shared/traffic`` (beside the repo) hold real
requests with the provider's answer, whose ``usage`` says how many input tokens that exact request
was (``prompt_tokens`` for OpenAI Chat Completions, ``input_tokens`` for the Responses API and for
Anthropic, plus Anthropic's cache reads/writes). The provider counts the whole request, so each
counter counts the whole request too: messages, system prompt, instructions, tool definitions and
framing (``policies.tokens``: ``count`` per message plus ``count_request_extra``).

Printed per provider and counter: mean absolute error, mean signed error, worst under and over
count, all in % of the provider's count; and the signed error on *JSON tool-result increments*:
between two consecutive requests of one conversation the provider's count grows by exactly what
was appended (an assistant turn and its tool results), so where the appended results are JSON the
growth is ground truth for how each counter counts JSON.

Per turn, on Anthropic: the τ²-bench claude-opus-4-6 airline dialogues record each call's usage
(agent and user simulator), so the growth of the conversation's input between two consecutive
calls of one caller is ground truth for the messages added in between. The agent's harness asks
again with a transient "[SYSTEM NOTE ...]" message when it rejects an answer; the retried call's
input holds that note and the next one does not, so the note is taken out of the growth (which
calls carried it is read off the recorded cache usage: :func:`retried_calls`). Printed per side
(agent, user simulator) and per class of turn (user simulator, agent after a user message, agent
in a tool loop), training (even dialogues) and held-out (odd), with the mean absolute error, the
signed mean, the median absolute error and how many turns are within 10 %; the held-out classes
also "as recorded" (the whole recorded input, notes included: the measure before this fix); and
the same over whole dialogues (each caller's first call to its last).

The Anthropic counter is calibrated (``policies/tokens/calibrated.py``); ``--fit`` refits its
per-message rates on the training dialogues' turns, then its per-request rates on the *training*
cassettes, and prints them for both measures (o200k tokens, characters); the table reports the
*held-out* cassettes separately (a file is held out when its index in sorted order is divisible
by 3, so a conversation never sits on both sides). OpenAI counts involve no fitted parameter; the
"OpenAI …" rows give them per turn (growth between consecutive requests, as above) and per request
by model family and framing, in % and in tokens (a turn there is 25-62 tokens, so one token is
2-4 %). Last, JSON tool results of the tau-bench gpt-4o
trajectories (OpenAI traffic, no usage recorded) against o200k_base's exact count of each message:
the first 300 (the approximate counter's JSON rate was set on the ones after them).

    .venv/bin/python bench/bench_tokens.py [--traffic ../shared/traffic] [--fit] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sources import TRAFFIC  # noqa: E402
from policies import convert  # noqa: E402
from policies.adapters import responses  # noqa: E402
from policies.messages import Message  # noqa: E402
from policies.tokens import ApproxTokenCounter, TokenCounter, request_overhead  # noqa: E402
from policies.tokens.calibrated import (  # noqa: E402
    KINDS,
    MEASURES,
    REQUEST_FEATURES,
    AnthropicCounter,
    message_features,
    request_features,
    size_of,
)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Sample:
    file: str
    index: int
    api: str  # "anthropic", "openai" (chat completions) or "responses"
    model: str
    messages: list[Message]
    extra: dict[str, Any]
    truth: int
    held_out: bool = False
    json_results: bool = False  # what this request appended to the previous one holds JSON tool results
    previous: Sample | None = field(default=None, repr=False)


def _usage(response: dict[str, Any]) -> dict[str, Any] | None:
    body = response.get("parsed_body")
    if isinstance(body, dict):
        return body.get("usage")
    raw = response.get("body")
    text = raw.get("string") if isinstance(raw, dict) else raw
    usage = None
    if isinstance(text, str):  # a recorded stream: the usage rides on the last chunk
        for line in text.splitlines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or (chunk.get("response") or {}).get("usage") or usage
    return usage


def _ran_server_tool(response: dict[str, Any]) -> bool:
    """The provider ran a tool inside this call: its usage spans several model passes, not this request."""
    body = response.get("parsed_body")
    return isinstance(body, dict) and any(isinstance(b, dict) and b.get("type") == "server_tool_use"
                                          for b in body.get("content") or [])


def load(traffic: Path) -> list[Sample]:
    root = traffic / "pydantic-ai-cassettes"
    files = sorted(root.rglob("*.yaml"))
    if not files:
        raise SystemExit(f"bench_tokens: no cassettes under {root}")
    seen: set[str] = set()
    out: list[Sample] = []
    for n, path in enumerate(files):
        previous: Sample | None = None
        for i, it in enumerate(yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader).get("interactions", [])):
            req = it.get("request", {})
            body, uri = req.get("parsed_body"), req.get("uri", "")
            usage = _usage(it.get("response", {}))
            if not isinstance(body, dict) or not usage or _ran_server_tool(it.get("response", {})):
                continue
            if "api.anthropic.com" in uri:
                api, truth = "anthropic", usage["input_tokens"] + usage.get("cache_read_input_tokens", 0) \
                    + usage.get("cache_creation_input_tokens", 0)
                messages, extra = convert.from_anthropic(body)
            elif "api.openai.com" in uri and uri.rstrip("/").endswith("/responses"):
                api, truth = "responses", usage["input_tokens"]
                messages = responses.from_items(body["input"])
                extra = {k: v for k, v in body.items() if k != "input"}
            elif "api.openai.com" in uri:
                api, truth = "openai", usage["prompt_tokens"]
                messages, extra = convert.from_openai(body)
            else:
                continue  # deepseek, gemini: other tokenizers
            key = json.dumps(body, sort_keys=True)
            if key in seen:  # the same request recorded twice (two tests, one conversation)
                continue
            seen.add(key)
            s = Sample(path.name, i, api, str(body.get("model")), messages, extra, truth, held_out=n % 3 == 0)
            if previous is not None and previous.api == api and len(messages) > len(previous.messages):
                s.previous = previous
                s.json_results = any(_json_result(m) for m in messages[len(previous.messages):])
            previous = s
            out.append(s)
    return out


def _json_result(m: Message) -> bool:
    for b in m.blocks:
        if b.answers:
            text = b.content if isinstance(b.content, str) else json.dumps(b.content)
            if isinstance(b.content, list):
                text = "".join(c.get("text", "") for c in b.content if isinstance(c, dict))
            if text.strip()[:1] in "{[":
                return True
    return False


def count(counter: TokenCounter, messages: list[Message], extra: dict[str, Any]) -> int:
    has_system = any(m.role in ("system", "developer") for m in messages)
    return sum(counter.count(m) for m in messages) + request_overhead(counter, extra, has_system=has_system)


def counters_for(api: str, model: str) -> dict[str, TokenCounter]:
    out: dict[str, TokenCounter] = {"approx (chars/4)": ApproxTokenCounter()}  # JSON results at 2.7
    try:
        from policies.tokens.bpe import TiktokenCounter  # noqa: PLC0415

        name = "tiktoken o200k_base" if api != "anthropic" else "o200k (not Claude's)"
        out[name] = TiktokenCounter("o200k_base", model=model if api != "anthropic" else None)  # framing by model
    except Exception as exc:  # noqa: BLE001 - the table says which counter is missing
        print(f"bench_tokens: tiktoken counter unavailable: {exc}", file=sys.stderr)
    if api == "anthropic":
        for measure in MEASURES:
            try:
                out[f"anthropic calibrated ({measure})"] = AnthropicCounter(measure=measure)
            except Exception as exc:  # noqa: BLE001 - the table says which counter is missing
                print(f"bench_tokens: {measure} counter unavailable: {exc}", file=sys.stderr)
    return out


PRIOR = {"tools": 20.0, "strict_tools": 100.0, "output_format": 100.0, "server_tools": 300.0}
TAU2 = "tau2-claude-opus-4-6-airline"


@dataclass
class Turn:
    """Two consecutive calls of one caller in a τ²-bench dialogue: what was added, and how the provider's count grew."""

    dialogue: int
    side: str  # "agent" (the airline agent) or "user" (the user simulator; it sees the agent's replies only)
    model: str
    grown: int  # growth of the conversation's input, the harness's transient retry notes taken out
    added: list[Message]
    raw_grown: int = 0  # growth of the whole recorded input, as the previous round measured it
    after_tools: bool = False  # the second call answers tool results (a tool loop), not a user message

    @property
    def held_out(self) -> bool:
        return self.dialogue % 2 == 1

    @property
    def kind(self) -> str:
        if self.side == "user":
            return "user simulator"
        return "agent, tool loop" if self.after_tools else "agent, after a user message"


def _usage_parts(m: dict[str, Any]) -> tuple[int, int]:
    """(whole input, uncached tail) of the call that produced ``m``.

    litellm reports Anthropic's usage as ``prompt_tokens`` = uncached + cache-write, ``cached_tokens``
    = cache reads, and ``total_tokens`` = uncached + output: so the whole input is ``prompt_tokens`` +
    ``cached_tokens``, and ``total_tokens - completion_tokens`` is the input after the last cache
    breakpoint (the tail the provider neither read nor wrote to the cache).
    """
    usage = (m.get("raw_data") or {}).get("usage") or {}
    total = int(usage.get("prompt_tokens") or 0) + int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    tail = int(usage.get("total_tokens") or 0) - int(usage.get("completion_tokens") or 0)
    return total, tail


def _input_total(m: dict[str, Any]) -> int:
    """The whole input of the call that produced ``m``: uncached + cache-write (``prompt_tokens``) + cache reads."""
    return _usage_parts(m)[0]


RETRY_NOTE = 100  # tokens of the harness's most frequent retry note ("FORMAT VIOLATION ..."); recorded tails 95-97


def retried_calls(records: list[dict[str, Any]], calls: list[int]) -> set[int]:
    """The agent calls whose request ended with the harness's retry note, read off the recorded cache usage.

    The τ²-bench AdaptiveAgent checks each tool-call answer (format, loops, confirmation, ...) and, on
    a violation, asks again with ``history + [a "[SYSTEM NOTE - not from customer]" user message]``;
    the answer to that retry is what is recorded, the note is never kept in the history. The cache
    breakpoint sits on the second-to-last user/tool message, so without a note a call's cached prefix
    (input minus its uncached tail) ends where the previous call's input ended (within 6 tokens), or
    where the previous call's prefix ended when that one carried the note; with a note the prefix
    runs to the end of the history and the tail is the note alone. After parallel tool results the
    prefix also runs past the previous input, and the tail (the last result, or the note) decides,
    sized by characters/4, not by a counter under test.
    """
    out: set[int] = set()
    approx = ApproxTokenCounter()
    for a, b in zip(calls, calls[1:], strict=False):
        total_a, tail_a = _usage_parts(records[a])
        total_b, tail_b = _usage_parts(records[b])
        prefix_a, prefix_b = total_a - tail_a, total_b - tail_b
        if -6 <= prefix_b - total_a <= 1 or abs(prefix_b - prefix_a) <= 6:
            continue
        results = [r for r in records[a:b] if r["role"] == "tool"]
        if len(results) >= 2:
            last = _anthropic_messages([records[a], results[-1]], "agent")[-1]
            if abs(tail_b - approx.count(last)) < abs(tail_b - RETRY_NOTE):
                continue
        out.add(b)
    return out


def _anthropic_messages(records: list[dict[str, Any]], side: str) -> list[Message]:
    """The τ²-bench records as the caller sent them: Anthropic turns, consecutive user content merged."""
    out: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for r in records:
        if side == "user":  # the simulator speaks as the assistant and hears the agent's replies, not its tools
            if r["role"] != "tool" and r.get("content") and not r.get("tool_calls"):
                add("assistant" if r["role"] == "user" else "user", {"type": "text", "text": r["content"]})
        elif r["role"] == "assistant":
            content = [{"type": "text", "text": r["content"]}] if r.get("content") else []
            content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]}
                        for c in r.get("tool_calls") or []]
            out.append({"role": "assistant", "content": content})
        elif r["role"] == "tool":
            add("user", {"type": "tool_result", "tool_use_id": r["id"], "content": r["content"]})
        else:
            add("user", {"type": "text", "text": r["content"]})
    return convert.from_anthropic({"messages": out})[0] if out else []


def _conversation_inputs(records: list[dict[str, Any]], calls: list[int], side: str) -> dict[int, int]:
    """Each call's input without the harness's transient retry note: the cached prefix where the
    request carried one (the note is its whole uncached tail), else the whole input."""
    retried = retried_calls(records, calls) if side == "agent" else set()
    out = {}
    for i in calls:
        total, tail = _usage_parts(records[i])
        out[i] = total - tail if i in retried else total
    return out


def tau2_turns(traffic: Path) -> tuple[list[Turn], int]:
    """Every pair of consecutive calls of one caller on one model, and how many of them were left out
    because the conversation's input did not grow (none once the retry notes are taken out)."""
    turns: list[Turn] = []
    shrank = 0
    for path in sorted((traffic / TAU2).glob("*.json")):
        for n, dialogue in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            records = dialogue["messages"]
            for side, role in (("agent", "assistant"), ("user", "user")):
                calls = [i for i, r in enumerate(records) if r["role"] == role and r.get("raw_data")]
                inputs = _conversation_inputs(records, calls, side)
                for a, b in zip(calls, calls[1:], strict=False):
                    model_a, model_b = (records[i]["raw_data"].get("model") for i in (a, b))
                    if model_a != model_b:
                        continue
                    grown = inputs[b] - inputs[a]
                    if grown <= 0:  # the conversation's input shrank: not a growth by what was added
                        shrank += 1
                        continue
                    turns.append(Turn(n, side, str(model_a), grown, _anthropic_messages(records[a:b], side),
                                      raw_grown=_input_total(records[b]) - _input_total(records[a]),
                                      after_tools=records[b - 1]["role"] == "tool"))
    return turns, shrank


def tau2_retried(traffic: Path) -> tuple[int, int]:
    """(agent calls whose request carried the harness's retry note, agent calls)."""
    retried = calls_n = 0
    for path in sorted((traffic / TAU2).glob("*.json")):
        for dialogue in json.loads(path.read_text(encoding="utf-8")):
            records = dialogue["messages"]
            calls = [i for i, r in enumerate(records) if r["role"] == "assistant" and r.get("raw_data")]
            retried += len(retried_calls(records, calls))
            calls_n += len(calls)
    return retried, calls_n


def tau2_dialogues(traffic: Path) -> list[Turn]:
    """Per dialogue and caller: from its first call to its last (all on one model), what was added and how
    the conversation's input grew (retry notes taken out, as per turn)."""
    out: list[Turn] = []
    for path in sorted((traffic / TAU2).glob("*.json")):
        for n, dialogue in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            records = dialogue["messages"]
            for side, role in (("agent", "assistant"), ("user", "user")):
                calls = [i for i, r in enumerate(records) if r["role"] == role and r.get("raw_data")]
                models = {records[i]["raw_data"].get("model") for i in calls}
                if len(calls) < 2 or len(models) != 1:
                    continue
                a, b = calls[0], calls[-1]
                inputs = _conversation_inputs(records, calls, side)
                grown = inputs[b] - inputs[a]
                if grown > 0:
                    out.append(Turn(n, side, str(models.pop()), grown, _anthropic_messages(records[a:b], side),
                                    raw_grown=_input_total(records[b]) - _input_total(records[a])))
    return out


MESSAGE_WEIGHTS = ("prose", "json", "code", "messages", "blocks", "tool_uses", "tool_results")


def _turn_features(turn: Turn, size: Any) -> list[float]:
    feats = dict.fromkeys(MESSAGE_WEIGHTS, 0.0)
    for m in turn.added:
        for k, v in message_features(m, size).items():
            feats[k] += v
    return [feats[k] for k in MESSAGE_WEIGHTS]


def fit_turns(turns: list[Turn], measure: str) -> dict[str, float]:
    """Per-message weights minimising the mean absolute per-turn error (reweighted least squares), never negative."""
    import numpy as np  # noqa: PLC0415 - bench-only

    size = size_of(measure)
    x = np.array([_turn_features(t, size) for t in turns], dtype=float)
    y = np.array([t.grown for t in turns], dtype=float)
    w = 1 / y
    coef = np.zeros(x.shape[1])
    for _ in range(60):
        coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
        coef = np.maximum(coef, 0.0)
        w = 1 / y / np.sqrt(np.maximum(np.abs(x @ coef - y) / y, 0.01))
    out = {k: round(float(c), 4) for k, c in zip(MESSAGE_WEIGHTS, coef, strict=True)}
    if not x[:, MESSAGE_WEIGHTS.index("code")].any():
        out["code"] = out["prose"]  # no code in the dialogues: code at the prose rate, not free
    return out


def fit(samples: list[Sample], measure: str, message_weights: dict[str, float], strength: float = 1.0) -> dict[str, float]:
    """Per-request weights on whole requests, the per-message ones fixed: ridge toward :data:`PRIOR`, never negative.

    The recorded requests are few and their features move together, so the pull toward plausible
    rates (about one prior sample's weight per rate) keeps each rate meaningful.
    """
    import numpy as np  # noqa: PLC0415 - bench-only

    size = size_of(measure)
    names = list(REQUEST_FEATURES)
    rows, ys = [], []
    for s in samples:
        known = sum(sum(message_weights.get(k, 0.0) * v for k, v in message_features(m, size).items())
                    for m in s.messages)
        extra, fixed = request_features(s.extra, size)
        known += sum(message_weights.get(k, 0.0) * extra[k] for k in KINDS)
        rows.append([extra[k] for k in names])
        ys.append(s.truth - fixed - known)
    x, y = np.array(rows, dtype=float), np.array(ys, dtype=float)
    scale = np.maximum(np.abs(x).mean(axis=0), 1.0) * strength
    prior = np.array([PRIOR[k] for k in names])
    coef, *_ = np.linalg.lstsq(np.vstack([x, np.diag(scale)]), np.concatenate([y, scale * prior]), rcond=None)
    return {k: round(max(0.0, float(c)), 4) for k, c in zip(names, coef, strict=True)}


def turn_table(turns: list[Turn], dialogues: list[Turn] | None = None) -> list[dict[str, Any]]:
    """Per-turn error of each counter: the count of the added messages against the growth (and the same
    over whole dialogues, first call to last, when ``dialogues`` are given).

    Also per class of turn (user simulator; agent after a user message; agent in a tool loop), held
    out, against the growth of the conversation (``grown``) and, labelled "as recorded", against the
    growth of the whole recorded input (``raw_grown``, retry notes included; pairs whose recorded
    input did not grow left out), which is what the previous calibration was measured on."""
    counters: dict[str, TokenCounter] = {"approx (chars/4)": ApproxTokenCounter()}
    for measure in MEASURES:
        try:
            counters[f"anthropic calibrated ({measure})"] = AnthropicCounter(measure=measure)
        except Exception as exc:  # noqa: BLE001 - the table says which counter is missing
            print(f"bench_tokens: {measure} counter unavailable: {exc}", file=sys.stderr)
    rows = []
    groups = [(f"{side} turns, {part}", [t for t in turns if t.side == side and t.held_out == held])
              for side in ("agent", "user") for part, held in (("training", False), ("held-out", True))]
    groups += [("all turns, held-out", [t for t in turns if t.held_out]), ("all turns", turns)]
    groups = [(f"per turn: {label}", group) for label, group in groups]
    kinds = ("user simulator", "agent, after a user message", "agent, tool loop")
    groups += [(f"per turn: {kind}, held-out", [t for t in turns if t.held_out and t.kind == kind]) for kind in kinds]
    for side in ("agent", "user"):
        mine = [t for t in dialogues or [] if t.side == side]
        groups.append((f"per dialogue: {side}, held-out", [t for t in mine if t.held_out]))
        groups.append((f"per dialogue: {side}, all", mine))
    measured = [(label, group, "conversation") for label, group in groups]
    for kind in (*kinds, "agent"):
        group = [t for t in turns if t.held_out and t.raw_grown > 0 and (t.kind == kind or t.side == kind)]
        measured.append((f"per turn (as recorded): {kind}{' turns' if kind == 'agent' else ''}, held-out", group,
                         "as recorded"))
    for label, group, growth in measured:
        if not group:
            continue
        for name, counter in counters.items():
            truth = [t.grown if growth == "conversation" else t.raw_grown for t in group]
            rel = [(sum(counter.count(m) for m in t.added) - g) / g for t, g in zip(group, truth, strict=True)]
            rows.append({"set": f"τ² {label}", "counter": name, "n": len(rel), "growth": growth,
                         "mae_pct": 100 * statistics.fmean(abs(e) for e in rel),
                         "signed_pct": 100 * statistics.fmean(rel),
                         "median_abs_pct": 100 * statistics.median(abs(e) for e in rel),
                         "within_10pct": sum(1 for e in rel if abs(e) <= 0.10)})
    return rows


def errors(samples: list[Sample], name: str) -> Iterator[tuple[Sample, float, float | None]]:
    for s in samples:
        counter = counters_for(s.api, s.model).get(name)
        if counter is None:
            continue
        got = count(counter, s.messages, s.extra)
        inc = None
        if s.previous is not None and s.json_results:
            grown = s.truth - s.previous.truth
            mine = got - count(counter, s.previous.messages, s.previous.extra)
            inc = (mine - grown) / grown if grown else None
        yield s, (got - s.truth) / s.truth, inc


def table(samples: list[Sample]) -> list[dict[str, Any]]:
    rows = []
    groups = [("OpenAI (chat + responses)", [s for s in samples if s.api in ("openai", "responses")]),
              ("Anthropic, training files", [s for s in samples if s.api == "anthropic" and not s.held_out]),
              ("Anthropic, held-out files", [s for s in samples if s.api == "anthropic" and s.held_out]),
              ("Anthropic, all", [s for s in samples if s.api == "anthropic"])]
    for label, group in groups:
        if not group:
            continue
        names = list(counters_for(group[0].api, group[0].model))
        for name in names:
            errs = list(errors(group, name))
            rel = [e for _, e, _ in errs]
            inc = [i for _, _, i in errs if i is not None]
            rows.append({"set": label, "counter": name, "n": len(rel),
                         "mae_pct": 100 * statistics.fmean(abs(e) for e in rel),
                         "signed_pct": 100 * statistics.fmean(rel),
                         "min_pct": 100 * min(rel), "max_pct": 100 * max(rel),
                         "json_inc_n": len(inc),
                         "json_inc_signed_pct": 100 * statistics.fmean(inc) if inc else None,
                         "json_inc_under": sum(1 for i in inc if i < 0)})
    return rows


def openai_framing_table(samples: list[Sample]) -> list[dict[str, Any]]:
    """OpenAI per turn (growth between consecutive requests) and per request, by model family and framing."""
    try:
        from policies.tokens.bpe import TiktokenCounter, framing_for  # noqa: PLC0415
    except ImportError:
        return []
    rows = []
    openai = [s for s in samples if s.api in ("openai", "responses")]
    for family in ("harmony", "chat"):
        group = [s for s in openai if framing_for(s.model) == family]
        label = "gpt-5 / o-series" if family == "harmony" else "gpt-4o family"
        for framing in ("auto", "chat", "harmony"):
            turn, whole = [], []
            diff: dict[str, list[int]] = {"per turn": [], "whole request": []}  # counted minus recorded, tokens
            for s in group:
                counter = TiktokenCounter("o200k_base", framing=framing, model=s.model)
                got = count(counter, s.messages, s.extra)
                whole.append((got - s.truth) / s.truth)
                diff["whole request"].append(got - s.truth)
                if s.previous is not None:
                    grown = s.truth - s.previous.truth
                    mine = got - count(counter, s.previous.messages, s.previous.extra)
                    turn.append((mine - grown) / grown)
                    diff["per turn"].append(mine - grown)
            name = "framing by model" if framing == "auto" else f"{framing} framing"
            for kind, rel in (("per turn", turn), ("whole request", whole)):
                if rel:
                    rows.append({"set": f"OpenAI {label}, {kind}", "counter": name, "n": len(rel),
                                 "mae_pct": 100 * statistics.fmean(abs(e) for e in rel),
                                 "signed_pct": 100 * statistics.fmean(rel),
                                 "signed_tokens": statistics.fmean(diff[kind])})
    return rows


def json_results(traffic: Path, limit: int = 300) -> list[Message]:
    """Tool messages with JSON content from the tau-bench gpt-4o trajectories (OpenAI traffic)."""
    path = traffic / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    if not path.is_file():
        return []
    out: list[Message] = []
    for task in json.loads(path.read_text(encoding="utf-8")):
        for m in task.get("traj", []):
            content = m.get("content")
            if m.get("role") == "tool" and isinstance(content, str) and content.strip()[:1] in "{[":
                out.append(convert.from_openai({"messages": [{"role": "tool", "tool_call_id": "c", "content": content}]})[0][0])
                if len(out) >= limit:
                    return out
    return out


def json_table(results: list[Message]) -> list[dict[str, Any]]:
    """Each counter's signed error on JSON tool results, against o200k_base's exact count of the same message."""
    if not results:
        return []
    from policies.tokens.bpe import TiktokenCounter  # noqa: PLC0415

    exact = TiktokenCounter()
    rows = []
    for name, counter in (("approx (chars/4)", ApproxTokenCounter()), ("tiktoken o200k_base", exact)):
        rel = [(counter.count(m) - exact.count(m)) / exact.count(m) for m in results]
        rows.append({"set": "JSON tool results (tau-bench gpt-4o)", "counter": name, "n": len(rel),
                     "signed_pct": 100 * statistics.fmean(rel), "min_pct": 100 * min(rel), "max_pct": 100 * max(rel),
                     "under": sum(1 for e in rel if e < 0)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traffic", type=Path, default=TRAFFIC)
    ap.add_argument("--fit", action="store_true",
                    help="refit the Anthropic rates (per turn on the training dialogues, then per request) and print them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    samples = load(args.traffic)
    turns, shrank = tau2_turns(args.traffic)
    if args.fit:
        fitted = {}
        for measure in MEASURES:
            weights = fit_turns([t for t in turns if not t.held_out], measure)
            weights.update(fit([s for s in samples if s.api == "anthropic" and not s.held_out], measure, weights))
            fitted[measure] = weights
        print(json.dumps(fitted, indent=4))
        return 0
    rows = table(samples)
    trows = turn_table(turns, tau2_dialogues(args.traffic))
    frows = openai_framing_table(samples)
    jrows = json_table(json_results(args.traffic))
    if args.json:
        print(json.dumps(rows + trows + frows + jrows, indent=2))
        return 0
    if trows:
        retried = tau2_retried(args.traffic)
        print(f"τ²-bench {TAU2}: {len(turns)} turns ({shrank} pairs whose conversation did not grow left out); "
              f"held out: the odd-numbered dialogues. Growth of the conversation: {retried[0]} of {retried[1]} agent "
              f"calls carried the harness's retry note, taken out ('as recorded': note included, "
              f"{sum(1 for t in turns if t.raw_grown <= 0)} pairs that did not grow left out)")
        print(f"{'set':66} {'counter':32} {'n':>4} {'MAE %':>7} {'signed %':>9} {'median %':>9} {'<=10 %':>7}")
        for r in trows:
            print(f"{r['set']:66} {r['counter']:32} {r['n']:>4} {r['mae_pct']:7.1f} {r['signed_pct']:+9.1f} "
                  f"{r['median_abs_pct']:9.1f} {r['within_10pct']:>4}/{r['n']}")
        print()
    print(f"{'set':28} {'counter':30} {'n':>3} {'MAE %':>7} {'signed %':>9} {'min %':>7} {'max %':>7}"
          f"   JSON-result increments: n, signed %, under")
    for r in rows:
        inc = (f"{r['json_inc_n']:>3} {r['json_inc_signed_pct']:+8.1f} {r['json_inc_under']:>3}/{r['json_inc_n']}"
               if r["json_inc_n"] else "  -")
        print(f"{r['set']:28} {r['counter']:30} {r['n']:>3} {r['mae_pct']:7.1f} {r['signed_pct']:+9.1f} "
              f"{r['min_pct']:+7.1f} {r['max_pct']:+7.1f}   {inc}")
    if frows:
        print(f"\n{'set':38} {'counter':22} {'n':>4} {'MAE %':>7} {'signed %':>9} {'signed tokens':>14}")
        for r in frows:
            print(f"{r['set']:38} {r['counter']:22} {r['n']:>4} {r['mae_pct']:7.1f} {r['signed_pct']:+9.1f} "
                  f"{r['signed_tokens']:+14.1f}")
    if jrows:
        print(f"\n{'set':38} {'counter':22} {'n':>4} {'signed %':>9} {'min %':>7} {'max %':>7} {'under':>9}")
        for r in jrows:
            print(f"{r['set']:38} {r['counter']:22} {r['n']:>4} {r['signed_pct']:+9.1f} {r['min_pct']:+7.1f} "
                  f"{r['max_pct']:+7.1f} {r['under']:>5}/{r['n']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
