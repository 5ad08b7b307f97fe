"""What the Replay page reads as a conversation: the context as a chat thread in the provider's own
shape, a decision as a sentence, the session's trace as a span tree.

Recorded content is data: it is drawn with ``st.text``, ``st.json`` and ``st.code`` (literal
text), never as Markdown or HTML. The store keeps content as provider-neutral blocks (``text``,
``tool_use``, ``tool_result``); :func:`provider_message` turns a message back into what the provider
was sent (OpenAI: ``tool_calls`` with JSON ``arguments`` and ``role: tool`` results; Anthropic:
content blocks), which is what the raw view shows.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard.components.safe import esc, md
from tracer.contract import names as sn

FOLD_CHARS = 1200  # longer text shows its first FOLD_HEAD characters, the rest behind an expander
FOLD_HEAD = 600
THREAD_LIMIT = 40  # messages drawn as a thread at once (the newest); the table lists every one
AVATARS = {"system": ":material/settings:", "tool": ":material/build:", "user": "user", "assistant": "assistant"}
CAPTURE_HINT = ("Content was not captured for this session (structure only). To capture it: "
                "`prunegate import --capture-content`, `prunegate replay/compare --capture-content`, or "
                "PRUNEGATE_CAPTURE_CONTENT=1 for a live PruneGuard.")


# ----------------------------------------------------------------------------- content
def blocks(raw: object) -> list[dict[str, Any]]:
    """A message's recorded content as blocks (a plain string becomes one text block)."""
    if raw is None or (isinstance(raw, float) and raw != raw):
        return []
    value: Any = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return [{"type": "text", "text": raw}]
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, dict):
        return [value]
    return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in value or []]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(c.get("text", c)) if isinstance(c, dict) else str(c) for c in content)
    return "" if content is None else str(content)


def provider_message(role: str, raw: object, provider: str | None) -> list[dict[str, Any]]:
    """The message as the provider was sent it (a list: OpenAI sends one ``tool`` message per result)."""
    parts = blocks(raw)
    if provider != "openai":
        return [{"role": role, "content": parts}]
    text = "\n".join(str(b.get("text", "")) for b in parts if b.get("type") == "text")
    calls = [{"id": b.get("id"), "type": "function",
              "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)}}
             for b in parts if b.get("type") == "tool_use"]
    results = [b for b in parts if b.get("type") == "tool_result"]
    if results:
        return [{"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": _result_text(b)} for b in results]
    out: dict[str, Any] = {"role": role, "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return [out]


def _parsed(text: str) -> Any:
    """``text`` as JSON when it is a JSON object or array, else None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def show_text(text: str, *, key: str) -> None:
    """Recorded text, literally: JSON pretty-printed, long text folded after its head."""
    obj = _parsed(text)
    if obj is not None:
        st.json(obj, expanded=1)
        return
    if len(text) <= FOLD_CHARS:
        st.text(text)
        return
    st.text(text[:FOLD_HEAD] + " …")
    with st.expander(f"Show all {len(text):,} characters"):
        st.text(text)


def thread(messages: pd.DataFrame, provider: str | None, *, key: str) -> None:
    """The messages in context as a chat thread: each tool call with its result right under it
    (paired by id; a result whose call is no longer in context is marked), JSON pretty-printed, long
    text folded, and a raw toggle that shows each message exactly as the provider was sent it."""
    captured = messages[messages["content"].notna()] if "content" in messages else messages.iloc[0:0]
    if captured.empty:
        st.caption(CAPTURE_HINT)
        return
    raw = st.toggle("Raw (as sent to the provider)", key=f"{key}_raw",
                    help="Each message as the provider's API received it, JSON as recorded")
    shown = captured.tail(THREAD_LIMIT)
    if len(captured) > len(shown):
        st.caption(f"The newest {len(shown)} of {len(captured)} messages in context (all are in the table below).")
    results: dict[str, tuple[str, dict[str, Any]]] = {}
    calls: set[str] = set()
    for rec in captured.to_dict("records"):
        for b in blocks(rec["content"]):
            if b.get("type") == "tool_result":
                results[str(b.get("tool_use_id"))] = (str(rec["message_id"]), b)
            elif b.get("type") == "tool_use":
                calls.add(str(b.get("id")))
    with st.container(height=640, key=f"{key}_box", autoscroll=True):  # opens at the newest message
        for i, rec in enumerate(shown.to_dict("records")):
            role = str(rec.get("role") or "?")
            label = f"{role} · {rec['message_id']} · {int(rec.get('tokens') or 0):,} tokens"
            with st.chat_message(role if role in ("user", "assistant") else "ai" if role == "tool" else role,
                                 avatar=AVATARS.get(role, ":material/chat:")):
                st.caption(md(label) + (f" · unit {md(rec.get('unit_id'))}" if rec.get("unit_id") else ""))
                if raw:
                    st.code(json.dumps(provider_message(role, rec["content"], provider), indent=2,
                                       ensure_ascii=False), language="json")
                    continue
                _draw_blocks(blocks(rec["content"]), results, calls, key=f"{key}_{i}")


def _draw_blocks(parts: list[dict[str, Any]], results: dict[str, tuple[str, dict[str, Any]]], calls: set[str],
                 *, key: str) -> None:
    for j, b in enumerate(parts):
        kind = b.get("type")
        if kind == "tool_use":
            call_id = str(b.get("id"))
            st.text(f"→ calls {b.get('name')} ({call_id})")
            st.json(b.get("input", {}), expanded=1)
            if call_id in results:
                mid, res = results[call_id]
                st.text(f"← result ({mid})" + (" — an error" if res.get("is_error") else ""))
                show_text(_result_text(res), key=f"{key}_{j}_r")
            else:
                st.text("← no result in context (pending, or evicted)")
        elif kind == "tool_result":
            call_id = str(b.get("tool_use_id"))
            if call_id in calls:
                st.caption(f"result of {md(call_id)}: shown under its call above")
            else:
                st.text(f"← result of {call_id}, whose call is not in context (an orphan result)")
                show_text(_result_text(b), key=f"{key}_{j}")
        elif kind == "text":
            show_text(str(b.get("text", "")), key=f"{key}_{j}")
        else:
            st.json(b, expanded=False)


# ----------------------------------------------------------------------------- decisions
def _n(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, int | float) else "?"


def _list(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [value]
    return [str(v) for v in value or []] if isinstance(value, list | tuple) else []


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def decision_sentence(name: str, attrs: dict[str, Any], check: dict[str, Any] | None = None) -> str:
    """A decision as one sentence, e.g. "salience pruned 2 units (6 messages, 1,840 tokens) to meet
    4,000; grew u4 to a whole unit"."""
    check = check or {}
    policy = attrs.get(sn.POLICY) or check.get(sn.POLICY) or "the policy"
    budget = attrs.get(sn.BUDGET) or check.get(sn.BUDGET)
    before, after = attrs.get(sn.TOKENS_BEFORE), attrs.get(sn.TOKENS_AFTER)
    freed = (int(before) - int(after)) if isinstance(before, int | float) and isinstance(after, int | float) else None
    reason = str(attrs.get(sn.REASON) or check.get(sn.REASON) or "").replace("_", " ")
    gate = "" if attrs.get(sn.GATED) is not False else " (ungated: raw messages, no gate)"
    if name == sn.PRUNE:
        units, ids = _list(attrs.get(sn.PRUNED_UNITS)), _list(attrs.get(sn.PRUNED_IDS))
        text = (f"{policy} pruned {_plural(len(units), 'unit') if units else 'messages'} "
                f"({_plural(len(ids), 'message')}" + (f", {freed:,} tokens" if freed is not None else "") + ")"
                + (f" to meet {_n(budget)}" if budget else "") + gate)
        extra = []
        if grown := _list(attrs.get(sn.GROWN_UNITS)):
            extra.append(f"grew {', '.join(grown)} to whole units (the policy proposed part of each)")
        if shrunk := _list(attrs.get(sn.SHRUNK_UNITS)):
            extra.append(f"kept {', '.join(shrunk)} (only part proposed; shrunk rather than split)")
        if skipped := _list(attrs.get(sn.SKIPPED_UNITS)):
            extra.append(f"skipped {', '.join(skipped)} (pending or streaming)")
        if summarized := _list(attrs.get(sn.SUMMARIZED_UNITS)):
            extra.append(f"summarized {', '.join(summarized)}")
        if attrs.get(sn.BUDGET_MET) is False:
            extra.append("still over budget")
        return text + ("; " + "; ".join(extra) if extra else "")
    if name == sn.DEFER:
        pending, open_ = _list(attrs.get(sn.PENDING_CALLS)), _list(attrs.get(sn.OPEN_MESSAGES))
        why = ([f"{_plural(len(pending), 'tool call')} pending ({', '.join(pending[:4])})"] if pending else []) + (
            [f"{_plural(len(open_), 'message')} still streaming ({', '.join(open_[:4])})"] if open_ else [])
        return (f"{policy} deferred at {_n(before)} tokens" + (f" (budget {_n(budget)})" if budget else "")
                + ": " + ("; ".join(why) if why else reason or "no safe prune") + ", waiting for a commit boundary")
    if name == sn.SPILL:
        units = _list(attrs.get(sn.SPILLED_UNITS))
        return (f"spilled {_plural(len(units), 'unit')} ({', '.join(units[:6])})"
                + (f", {freed:,} tokens" if freed is not None else "") + " to the spill store to stay under the hard ceiling")
    if name == sn.REINJECT:
        units = _list(attrs.get(sn.REINJECTED_UNITS))
        return f"re-injected {_plural(len(units), 'unit')} ({', '.join(units[:6])}) from the spill store"
    if name == sn.FAIL:
        return f"failed at {_n(before)} tokens: over the hard ceiling with nothing safe to prune" + (
            f" ({reason})" if reason else "")
    if name == sn.BUDGET_CHECK:
        decision = str(attrs.get(sn.DECISION) or "").replace("_", " ")
        return (f"budget check #{_n(attrs.get(sn.CHECK))}: {_n(before)} tokens" + (f" of {_n(budget)}" if budget else "")
                + (f", {decision}" if decision else ""))
    return name.replace(sn.PREFIX, "").replace("_", " ")


def decisions(check: pd.DataFrame, *, key: str) -> None:
    """The decision at a step as sentences, its span attributes behind a toggle."""
    if check.empty:
        st.caption("No budget check at this step.")
        return
    recs = check.to_dict("records")
    attrs = [json.loads(r["attributes"]) if isinstance(r["attributes"], str) else dict(r["attributes"] or {})
             for r in recs]
    check_attrs = next((a for r, a in zip(recs, attrs, strict=True) if r["name"] == sn.BUDGET_CHECK), {})
    for rec, a in zip(recs, attrs, strict=True):
        if rec["name"] == sn.BUDGET_CHECK and len(recs) > 1:
            continue  # the decision span says it; the check's numbers are in the attributes
        sentence = decision_sentence(str(rec["name"]), a, check_attrs)
        (st.error if rec.get("status_code") == "ERROR" else st.info)(md(sentence))
    if st.toggle("Span attributes", key=f"{key}_attrs"):
        for rec, a in zip(recs, attrs, strict=True):
            st.text(str(rec["name"]))
            st.json({k: _maybe_json(v) for k, v in a.items()}, expanded=1)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# ----------------------------------------------------------------------------- the trace
STATUS_COLORS = {"ERROR": "#D55E00", "OK": "#009E73", "UNSET": "#0072B2"}
SPAN_WORDS = {sn.SESSION: "session", sn.MESSAGE: "message event", sn.UNIT_CLOSE: "unit closed",
              sn.BUDGET_CHECK: "budget check", sn.PRUNE: "prune", sn.DEFER: "deferral", sn.SPILL: "spill",
              sn.REINJECT: "re-injection", sn.FAIL: "failure", sn.VIOLATION: "violation"}


def trace_table(tree: pd.DataFrame, step: int | None) -> pd.DataFrame:
    """The span tree as a table: the name indented by depth, step, start, duration, status."""
    return pd.DataFrame({
        "": ["▶" if step is not None and s == step else "" for s in tree["seq"]],
        "span": ["    " * int(d) + ("└ " if d else "") + SPAN_WORDS.get(str(n), str(n))
                 for d, n in zip(tree["depth"], tree["name"], strict=True)],
        "step": tree["seq"],
        "start (ms)": [round(float(v), 3) for v in tree["start_ms"]],
        "duration (ms)": [round(float(v), 3) for v in tree["duration_ms"]],
        "status": [str(c) + (f": {m}" if isinstance(m, str) and m else "")
                   for c, m in zip(tree["status_code"], tree["status_message"], strict=True)],
        "children": tree["children"],
    })


def trace_figure(tree: pd.DataFrame, step: int | None, *, limit: int = 400) -> go.Figure:
    """A waterfall of the first ``limit`` spans: one bar per span from its start for its duration,
    coloured by status, the spans of the current step outlined."""
    part = tree.head(limit)
    labels = [f"{i:>4} " + "· " * int(d) + esc(SPAN_WORDS.get(str(n), str(n)))
              for i, (d, n) in enumerate(zip(part["depth"], part["name"], strict=True))]
    widths = [max(float(v), 0.002) for v in part["duration_ms"]]
    here = [step is not None and s == step for s in part["seq"]]
    fig = go.Figure(go.Bar(
        y=labels, x=widths, base=[float(v) for v in part["start_ms"]], orientation="h",
        marker=dict(color=[STATUS_COLORS.get(str(c), "#999") for c in part["status_code"]],
                    line=dict(color=["#000" if h else "rgba(0,0,0,0)" for h in here], width=2)),
        hovertext=[f"{esc(n)} · step {s} · {d:.3f} ms · {c}" for n, s, d, c in
                   zip(part["name"], part["seq"], part["duration_ms"], part["status_code"], strict=True)],
        hoverinfo="text",
    ))
    fig.update_layout(height=min(1200, 120 + 16 * len(part)), margin=dict(l=10, r=10, t=10, b=30),
                      xaxis_title="ms from the session's first span", showlegend=False,
                      yaxis=dict(autorange="reversed", tickfont=dict(family="monospace", size=10)), bargap=0.2)
    return fig
