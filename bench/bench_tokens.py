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

The Anthropic counter is calibrated (``policies/tokens/calibrated.py``); ``--fit`` refits its rates
on the *training* cassettes only and prints them; the table reports the *held-out* cassettes
separately (a file is held out when its index in sorted order is divisible by 3, so a
conversation never sits on both sides). OpenAI counts involve no fitted parameter. Last, JSON tool results of the tau-bench gpt-4o
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
from policies.tokens.calibrated import CALIBRATION, AnthropicCounter, message_features, request_features  # noqa: E402

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

        harmony = api == "responses" and model.startswith(("gpt-5", "o1", "o3", "o4"))
        name = "tiktoken o200k_base" if api != "anthropic" else "o200k (not Claude's)"
        out[name] = TiktokenCounter("o200k_base", framing="harmony" if harmony else "chat")
    except Exception as exc:  # noqa: BLE001 - the table says which counter is missing
        print(f"bench_tokens: tiktoken counter unavailable: {exc}", file=sys.stderr)
    if api == "anthropic":
        out["anthropic calibrated"] = AnthropicCounter()
    return out


PRIOR = {"prose_chars": 0.27, "json_chars": 0.40, "code_chars": 0.33, "messages": 4.0, "blocks": 3.0,
         "tools": 20.0, "strict_tools": 100.0, "output_format": 100.0, "server_tools": 300.0}


def fit(samples: list[Sample], strength: float = 1.0) -> dict[str, float]:
    """Rates fitted on ``samples``: least squares, pulled toward :data:`PRIOR` (ridge), never negative.

    The recorded requests are few and their features move together (longer conversations have
    more messages, more blocks and more text), so plain least squares trades one rate against
    another; the pull toward plausible rates (about one prior sample's weight per rate) keeps each
    rate meaningful on requests unlike the training ones.
    """
    import numpy as np  # noqa: PLC0415 - bench-only

    names = list(CALIBRATION)
    rows, ys = [], []
    for s in samples:
        feats = dict.fromkeys(names, 0.0)
        for m in s.messages:
            for k, v in message_features(m).items():
                feats[k] += v
        extra, fixed = request_features(s.extra)
        for k, v in extra.items():
            feats[k] += v
        rows.append([feats[k] for k in names])
        ys.append(s.truth - fixed)
    x, y = np.array(rows, dtype=float), np.array(ys, dtype=float)
    scale = np.maximum(np.abs(x).mean(axis=0), 1.0) * strength
    prior = np.array([PRIOR.get(k, 0.0) for k in names])
    xa = np.vstack([x, np.diag(scale)])
    ya = np.concatenate([y, scale * prior])
    coef, *_ = np.linalg.lstsq(xa, ya, rcond=None)
    return {k: round(max(0.0, float(c)), 4) for k, c in zip(names, coef, strict=True)}


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
    ap.add_argument("--fit", action="store_true", help="refit the Anthropic rates on the training files and print them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    samples = load(args.traffic)
    if args.fit:
        rates = fit([s for s in samples if s.api == "anthropic" and not s.held_out])
        print(json.dumps(rates, indent=4))
        return 0
    rows = table(samples)
    jrows = json_table(json_results(args.traffic))
    if args.json:
        print(json.dumps(rows + jrows, indent=2))
        return 0
    print(f"{'set':28} {'counter':22} {'n':>3} {'MAE %':>7} {'signed %':>9} {'min %':>7} {'max %':>7}"
          f"   JSON-result increments: n, signed %, under")
    for r in rows:
        inc = (f"{r['json_inc_n']:>3} {r['json_inc_signed_pct']:+8.1f} {r['json_inc_under']:>3}/{r['json_inc_n']}"
               if r["json_inc_n"] else "  -")
        print(f"{r['set']:28} {r['counter']:22} {r['n']:>3} {r['mae_pct']:7.1f} {r['signed_pct']:+9.1f} "
              f"{r['min_pct']:+7.1f} {r['max_pct']:+7.1f}   {inc}")
    if jrows:
        print(f"\n{'set':38} {'counter':22} {'n':>4} {'signed %':>9} {'min %':>7} {'max %':>7} {'under':>9}")
        for r in jrows:
            print(f"{r['set']:38} {r['counter']:22} {r['n']:>4} {r['signed_pct']:+9.1f} {r['min_pct']:+7.1f} "
                  f"{r['max_pct']:+7.1f} {r['under']:>5}/{r['n']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
