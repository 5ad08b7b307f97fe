"""Replay: step through a session and watch its context window.

``?session=ID`` (and optionally ``&step=K``) opens a session directly. At each step: the context
as units (bar), the token count against budget and hard ceiling over the whole session (line,
current step marked), the decision taken at this step, the event log around it and the messages
in context. Jump buttons move to the next violation, prune or deferral; Play advances on a timer.
"""

from __future__ import annotations

import json
import time

import pandas as pd
import streamlit as st

from dashboard.components import charts, conversation, data, lost, notes, warm
from dashboard.components.safe import md
from dashboard.components.widgets import session_label, show_table
from tracer import queries
from tracer.contract import names as sn
from tracer.queries import AnnotationTarget, explain

STEP = "replay_step"
PLAY = "replay_play"
SESSION = "replay_session"
NOTE = "replay_note"
GOTO = "replay_goto"  # where Play's last tick moved to; applied before the slider is drawn
LAST_TICK = "replay_last_tick"
URL_STEP = "replay_url_step"  # the step this page last wrote to the address bar
TICK_S = 0.8


def _int_param(name: str) -> int | None:
    value = st.query_params.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _set_step(value: int, lo: int, hi: int) -> None:
    st.session_state[STEP] = max(lo, min(hi, int(value)))


def _jump(session_id: str, target: str, lo: int, hi: int) -> None:
    """Button callback: move to the next step holding a span of ``target``."""
    cur = int(st.session_state.get(STEP, lo))
    nxt = data.next_step(data.key(), session_id, cur, target)
    if nxt is None:
        st.session_state[NOTE] = f"No {target} after step {cur}."
    else:
        _set_step(nxt, lo, hi)
        st.session_state[NOTE] = f"Jumped to the next {target}: step {nxt}."


def _move(delta: int, lo: int, hi: int) -> None:
    _set_step(int(st.session_state.get(STEP, lo)) + delta, lo, hi)


def _pick_session() -> str | None:
    listed, labels = data.session_choices()
    wanted = st.query_params.get("session")
    if not listed and not wanted:
        st.info("The store has no sessions yet.")
        return None
    ids = list(listed)
    if wanted and wanted not in ids:
        ids.insert(0, wanted)
    current = wanted if wanted else ids[0]
    if st.session_state.get(SESSION) not in ids or (wanted and st.session_state.get(SESSION) != wanted
                                                     and st.session_state.get("_replay_url") != wanted):
        st.session_state[SESSION] = current
    picked = st.selectbox("Session", ids, key=SESSION, format_func=lambda s: labels.get(s, s))
    if picked != st.session_state.get("_replay_url"):
        # a new session: start at the step the URL asks for, else at the first step
        st.session_state["_replay_url"] = picked
        st.session_state.pop(STEP, None)
        st.session_state[PLAY] = False
        if picked != wanted:
            st.query_params.pop("step", None)
    st.query_params["session"] = picked
    return picked


def _ticker(lo: int, hi: int, stride: int) -> None:
    """While Play is on, advance ``stride`` steps per tick and rerun the page.

    The slider owns ``STEP`` once drawn, so the tick leaves the new step in ``GOTO`` for the top of
    the next run. The fragment also runs inline with every full run: it only advances when a tick
    interval has passed since the last advance, so a rerun does not trigger the next one at once."""
    if not st.session_state.get(PLAY):
        return
    now = time.monotonic()
    if now - st.session_state.get(LAST_TICK, 0.0) < TICK_S * 0.9:
        return
    cur = int(st.session_state.get(STEP, lo))
    if cur >= hi:
        st.session_state[GOTO] = ("stop", cur)
    else:
        st.session_state[GOTO] = ("step", min(hi, cur + stride))
    st.session_state[LAST_TICK] = now
    st.rerun()


def _text(value: object) -> str:
    """A cell as text; a missing value is an empty cell, never the word None."""
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA or value is pd.NaT:
        return ""
    return str(value)


def _event_table(events: pd.DataFrame, step: int) -> pd.DataFrame:
    """The event log as plain text columns: what happened, to what, tokens after, why."""
    tokens = [f"{int(t):,}" if pd.notna(t) else "" for t in events["context_tokens"]]
    return pd.DataFrame({
        "now": ["▶" if s == step else "" for s in events["seq"]],
        "step": events["seq"].astype(int),
        "what": [_text(v) for v in events["what"]],
        "subject": [_text(v) for v in events["subject"]],
        "role": [_text(v) for v in events["role"]],
        "tokens after": tokens,
        "why / detail": [_text(v) for v in events["detail"]],
        "policy": [_text(v) for v in events["policy"]],
        "span": [_text(v) for v in events["name"]],
    })


def _attrs(raw: object) -> dict:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return {}
    return dict(raw or {}) if isinstance(raw, dict) else {}


def _context_shown(messages: pd.DataFrame) -> bool:
    """Whether there is a context to show at this step; says so in place of the chat or table when not."""
    if messages.empty:
        st.caption("The context is empty at this step.")
    return not messages.empty


def _why_section(why: dict, session_id: str, step: int, budget: int | None, ceiling: int | None) -> None:
    """Why this request broke, on one screen: the violations at this step, the eviction that caused
    them (policy, reason, units before and after), and the same step under the gate."""
    found: pd.DataFrame = why["violations"]
    counts = found["code"].value_counts()
    st.subheader("Why this request broke")
    st.error(md(f"{len(found)} violation(s) at step {step}: "
                + ", ".join(f"{code} × {n}" for code, n in counts.items())))
    show_table(pd.DataFrame({"code": found["code"].map(_text), "names": found["ids"].map(_text),
                               "provider / checker says": found["message"].map(_text)}),
                 hide_index=True, width="stretch", key="replay_why_violations",
                 height=min(250, 38 + 35 * len(found)))
    causes = why["causes"]
    if not causes:
        st.caption("No violation at this step links to a prune (e.g. a repeated side-effecting call whose "
                   "cause is the retry itself).")
    for i, d in enumerate(causes):
        p, chk = _attrs(d.get("prune")), _attrs(d.get("check_attributes"))
        seq = int(d["prune_seq"])
        ev: pd.DataFrame = d["evicted"]
        gated = p.get(sn.GATED)
        split = [u for u, whole in zip(ev["unit_id"], ev["whole"], strict=True) if not whole]
        st.markdown(f"**Caused by the eviction at step {seq}**" + (" (this step)" if seq == step else ""))
        st.text(
            f"{d['prune_name']} at step {seq} (budget check #{chk.get(sn.CHECK, '?')}): "
            f"policy {p.get(sn.POLICY, '?')}, {'gated' if gated else 'ungated'}, "
            f"reason {p.get(sn.REASON) or chk.get(sn.REASON) or '?'}, "
            f"tokens {p.get(sn.TOKENS_BEFORE, '?')} → {p.get(sn.TOKENS_AFTER, '?')} "
            f"(budget {chk.get(sn.BUDGET, budget) or '?'})")
        st.text(f"Evicted {sum(len(e) for e in ev['evicted'])} message(s) in {len(ev)} unit(s): "
                + "; ".join(f"{u} ({', '.join(e)}" + (f"; kept {', '.join(k)}: split" if k else "") + ")"
                            for u, e, k in zip(ev["unit_id"], ev["evicted"], ev["kept"], strict=True)))
        if split:
            st.text(f"Split units (only a gate-less prune does this): {', '.join(split)}")
        b1, b2 = st.columns(2)
        b1.plotly_chart(charts.context_bar(d["before"], budget=budget, hard_ceiling=ceiling,
                                           highlight=list(ev["unit_id"]),
                                           title=f"before the eviction (step {seq - 1})"),
                        width="stretch", key=f"replay_why_before_{i}")
        b2.plotly_chart(charts.context_bar(d["after"], budget=budget, hard_ceiling=ceiling,
                                           title=f"after the eviction (step {seq})"),
                        width="stretch", key=f"replay_why_after_{i}")
        if i == 0 and len(causes) > 1:
            st.caption(f"{len(causes) - 1} more eviction(s) caused violations at this step: below.")
    c1, c2, c3 = st.columns(3)
    twin = why.get("gated")
    if twin and twin.get("step") is not None:
        c1.page_link("views/replay.py", label=f"Same step under the gate (step {twin['step']}) ▸",
                     query_params={"session": twin["session_id"], "step": str(twin["step"])})
    elif twin:
        c1.caption("The gated replay of this session holds none of the messages seen by this step.")
    else:
        c1.caption("No gated replay of the same session and policy in the store "
                   "(prunegate compare --gated both records one).")
    if causes:
        c2.page_link("views/replay.py", label=f"Go to the eviction (step {int(causes[0]['prune_seq'])}) ▸",
                     query_params={"session": session_id, "step": str(int(causes[0]["prune_seq"]))})
    c3.page_link("views/violations.py", label="Open in Violations ▸",
                 query_params={"session": session_id, "violation": str(found["span_id"].iloc[0])})


st.title("Replay")
session_id = _pick_session()
if session_id is None:
    st.stop()
warm.session(session_id)  # its annotations and lost references, read beside its spans below

path = data.key()
sess = data.replay_session(path, session_id)
info, bounds = sess["info"] or {"session_id": session_id}, sess["bounds"]
if bounds is None:
    st.warning("This session has no spans in the store (yet). Recording sessions appear within seconds.")
    st.stop()
lo, hi = bounds
budget = sess["budget"]["budget"]
ceiling = sess["budget"]["hard_ceiling"]

url_step = _int_param("step")
if STEP not in st.session_state:
    st.session_state[STEP] = max(lo, min(hi, url_step)) if url_step is not None else lo
elif url_step is not None and url_step != st.session_state.get(URL_STEP) and GOTO not in st.session_state:
    # the address changed under us (a link to another step of this session): follow it
    _set_step(url_step, lo, hi)
    st.session_state[PLAY] = False
if GOTO in st.session_state:
    kind, target = st.session_state.pop(GOTO)
    _set_step(target, lo, hi)
    if kind == "stop" or target >= hi:
        st.session_state[PLAY] = False  # reached the end

st.caption(md(session_label(info)) + f" · source {md(info.get('source') or '?')} · steps {lo}–{hi}")
if info.get("source") == "replay" and st.button(
        "Every span: re-run at full detail", key="replay_rerun_full", icon=":material/zoom_in:",
        help="A replay recorded at decisions or checks keeps fewer spans (docs/spans.md). This re-runs it at full "
             "(deterministic, recorded as a re-run of this one) and opens the same step there."):
    from tracer.lab.rerun import rerun_at_full

    try:
        full_id = rerun_at_full(path, session_id)
    except LookupError as exc:
        st.error(str(exc))
    else:
        if full_id == session_id:
            st.caption("This replay was recorded at full detail: every span is here already.")
        else:
            st.query_params["session"] = full_id
            st.rerun()

def _step_view(session_id: str) -> None:
    """The step controls and everything drawn for the step: a fragment, so a click here (next step,
    a jump, the slider) reruns this part only, not the session picker and the sidebar above it."""
    # ---------------------------------------------------------------- controls
    c_prev, c_next, c_play, c_speed, c_v, c_p, c_d = st.columns([1.4, 1.3, 0.8, 1.3, 1.6, 1.5, 1.6])
    c_prev.button("◀ previous step", on_click=_move, args=(-1, lo, hi), width="stretch", key="replay_prev")
    c_next.button("next step ▶", on_click=_move, args=(1, lo, hi), width="stretch", key="replay_next")
    c_play.toggle("Play", key=PLAY)
    stride = c_speed.selectbox("Steps per tick", [1, 5, 25, 100], key="replay_stride", label_visibility="collapsed",
                               format_func=lambda n: f"{n} step{'s' if n > 1 else ''} / tick")
    c_v.button("Next violation", icon=":material/skip_next:", on_click=_jump, args=(session_id, "violation", lo, hi), width="stretch",
               key="replay_jump_violation")
    c_p.button("Next prune", icon=":material/skip_next:", on_click=_jump, args=(session_id, "prune", lo, hi), width="stretch",
               key="replay_jump_prune")
    c_d.button("Next deferral", icon=":material/skip_next:", on_click=_jump, args=(session_id, "deferral", lo, hi), width="stretch",
               key="replay_jump_deferral")
    if hi > lo:
        step = st.slider("Step", lo, hi, key=STEP)
    else:
        step = lo
        st.session_state[STEP] = lo
    if st.session_state.get(NOTE):
        st.caption(st.session_state.pop(NOTE))
    st.query_params["step"] = str(step)
    st.session_state[URL_STEP] = int(step)

    if st.session_state.get(PLAY):
        st.fragment(run_every=TICK_S)(_ticker)(lo, hi, int(stride))

    # ---------------------------------------------------------------- the step
    now = data.replay_step(path, session_id, int(step))
    units: pd.DataFrame = now["units"]
    messages: pd.DataFrame = now["messages"]
    in_context = int(units["tokens"].sum()) if not units.empty else 0

    k1, k2, k3, k4, k5, k6 = st.columns(6)
    k1.metric("Tokens in context", f"{in_context:,}",
              delta=f"{in_context - budget:+,} vs budget" if budget else None, delta_color="inverse")
    k2.metric("Budget", f"{budget:,}" if budget else "—")
    k3.metric("Hard ceiling", f"{ceiling:,}" if ceiling else "—")
    k4.metric("Units · messages", f"{len(units):,} · {len(messages):,}")
    k5.metric("Pending calls", f"{int(messages['pending_calls'].map(len).sum()) if len(messages) else 0:,}")
    k6.metric("Open streams", f"{int(messages['open'].sum()) if len(messages) else 0:,}")

    why = data.why(path, session_id, int(step))
    bad_units: list[str] = []
    if why is not None:
        for ids, mids in zip(why["violations"]["named_ids"], why["violations"]["named_messages"], strict=True):
            bad_units += [u for u in explain.violating_units(messages, ids=ids, message_ids=mids) if u not in bad_units]
    lost.panel(session_id, int(step), lambda s: _set_step(s, lo, hi))

    st.subheader("Context window at this step")
    if bad_units:
        st.text("Violating unit(s) at this step, outlined in black: " + ", ".join(bad_units))
    st.plotly_chart(charts.context_bar(units, budget=budget, hard_ceiling=ceiling, violating=bad_units), width="stretch",
                    key="replay_context_chart")

    if why is not None:
        _why_section(why, session_id, int(step), budget, ceiling)

    st.subheader("Tokens over the session")
    st.plotly_chart(charts.token_timeline(sess["series"], sess["markers"], step=int(step), budget=budget,
                                          hard_ceiling=ceiling), width="stretch", key="replay_token_chart")

    left, right = st.columns([3, 2])
    with left:
        st.subheader("Event log")
        events: pd.DataFrame = now["events"]
        if events.empty:
            st.caption("No events near this step.")
        else:
            # The log opens at the current step: the rows before it (up to 3) stay as context, and the
            # earlier ones are counted above rather than scrolled past.
            log = _event_table(events, int(step))
            here_rows = [i for i, s in enumerate(log["step"]) if s >= int(step)]
            start = max(0, (here_rows[0] if here_rows else len(log)) - 3)
            if start:
                st.caption(f"{start} earlier event(s) of steps {int(log['step'].iloc[0])}–{int(log['step'].iloc[start - 1])} "
                           "are above this view (previous step ◀ shows them).")
            show_table(log.iloc[start:], hide_index=True, width="stretch", height=360, key="replay_events")
    with right:
        st.subheader("Decision at this step")
        conversation.decisions(now["check"], key="replay_decision")

    view_chat, view_trace, view_table = st.tabs(["Conversation", "Trace", "Messages table"], key="view",
                                                bind="query-params")
    if view_chat.open:
        with view_chat:
            if _context_shown(messages):
                st.caption("The context the model received at this step, as a chat in the provider's own shape "
                           f"({md(info.get('provider') or 'unknown provider')}).")
                conversation.thread(messages, info.get("provider"), key="replay_thread")
    if view_trace.open:
        with view_trace:
            tree = data.run_activity(queries.span_tree, session_id)
            total = data.run_activity(queries.trace_size, session_id)
            errors = int((tree["status_code"] == "ERROR").sum()) if not tree.empty else 0
            st.caption(f"{total:,} spans in this session's trace" + (f" (the first {len(tree):,} below)" if total > len(tree)
                       else "") + f", {errors:,} with status ERROR. Each span follows its parent; ▶ and the black "
                       "outline mark the spans of this step. Durations in milliseconds.")
            st.plotly_chart(conversation.trace_figure(tree, int(step)), width="stretch", key="replay_trace_chart")
            show_table(conversation.trace_table(tree, int(step)), hide_index=True, width="stretch", height=420,
                       key="replay_trace_table")
    if view_table.open:
        with view_table:
            if _context_shown(messages):
                table = messages[["position", "message_id", "role", "unit_id", "kind", "tokens", "open", "pending",
                                  "pinned", "pending_calls", "tool_names", "first_seq", "last_event"]]
                show_table(table, hide_index=True, width="stretch", height=min(420, 38 + 35 * len(table)),
                           key="replay_messages")
                st.caption("Ids: t3 is the recording's message 3 (its position in the recorded conversation); "
                           "u3 is the structural unit it belongs to (a message, or a tool call with its results, "
                           "pruned only whole under the gate); t7.r0 is the first tool result of recorded message t7, split out so each result arrives on its own.")

    _annotations_view(session_id, notes.step_targets(now["events"], int(step), notes.root_target(info)))


@st.fragment
def _annotations_view(session_id: str, targets: list[tuple[str, AnnotationTarget | None]]) -> None:
    """The session's annotations and the form that adds one: a fragment inside the step's, so saving
    one reruns this part only (it re-reads the annotations), not the step's charts; the form passes
    the spans it offers as read, so the save looks nothing up."""
    annotated = data.session_annotations(session_id)
    st.subheader("Annotations")
    st.caption("A label and a note on this session, or on a decision or violation at this step; stored with the "
               "spans (the same as `prunegate annotate`), listed on the Annotations page, filterable on Sessions.")
    if annotated.empty:
        st.caption("No annotation on this session yet.")
    else:
        st.text("Labels: " + ", ".join(dict.fromkeys(str(v) for v in annotated["label"])))
        notes.table(annotated, key="replay_annotations", with_session=False)
    notes.form(session_id, targets, key="replay_annotate", rerun="fragment")


st.fragment(_step_view)(session_id)
