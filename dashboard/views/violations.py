"""Violations: every structural violation traced to the eviction that caused it.

A violation span links (``prunegate.link = caused_by``) to the prune span whose eviction caused
it. For the violation picked (``?violation=SPAN_ID`` opens one directly) the page shows that
prune: its policy and the score it gave the evicted unit, the partners it evicted (the messages
the violation is about), its proposal, and the context just before and just after it.
Below: repeated side-effecting calls (``execute_tool`` spans flagged ``prunegate.tool.retry``).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.components import charts, data
from dashboard.components.safe import md, short
from dashboard.components.widgets import show_table
from tracer import queries
from tracer.contract import names as sn

PICK = "violations_pick"
PAGE = "violations_page"
PAGE_ROWS = data.VIOLATION_ROWS


def _attrs(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return {}
    return dict(value or {})


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _pretty(raw: Any) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(raw)


st.title("Violations")

scope = st.query_params.get("session")
counts = data.run_activity(queries.violation_codes, session_id=scope)  # per code: the filter and the page count
c1, c2 = st.columns([3, 1])
if scope:
    c1.caption("Violations of session " + md(scope))
    if c2.button("Show all sessions", key="violations_all"):
        st.query_params.pop("session", None)
        st.query_params.pop("violation", None)
        st.rerun()

if counts.empty:
    st.success("No violations recorded" + (" in this session." if scope else "."))
else:
    per_code = {str(c): int(n) for c, n in zip(counts["code"], counts["n"], strict=True) if c is not None}
    chosen = st.multiselect("Code", sorted(per_code), key="violations_codes",
                            format_func=lambda c: f"{c} ({per_code[c]:,})")
    total = sum(per_code[c] for c in chosen) if chosen else int(counts["n"].sum())
    pages = max(1, -(-total // PAGE_ROWS))
    if int(st.session_state.get(PAGE, 1)) > pages:  # fewer pages after a filter: back to the first
        st.session_state[PAGE] = 1
    page = int(st.number_input(f"Page (of {pages:,}; {PAGE_ROWS} violations each, newest first)", min_value=1,
                               max_value=pages, step=1, key=PAGE)) if pages > 1 else 1
    shown = data.violation_page(scope, tuple(chosen), page)
    first = (page - 1) * PAGE_ROWS
    st.caption(f"Violations {first + 1:,}–{first + len(shown):,} of {total:,}")
    table = pd.DataFrame({
        "session": shown["session_id"],
        "name": shown["label"],
        "step": shown["seq"],
        "code": shown["code"],
        "caused by": [f"{str(n).replace(sn.PREFIX, '')} @ step {int(s)}" if isinstance(n, str) else "— (no link)"
                      for n, s in zip(shown["cause_name"], shown["prune_seq"].fillna(-1), strict=True)],
        "policy": shown["policy"],
        "gated": shown["prune_gated"],
        "message": shown["message"],
        "ids": shown["ids"],
    })
    # one table (and selection) per page: a row picked on one page is never applied to another
    event = show_table(table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                         key="violations_table" + (f"_p{page}" if page > 1 else ""), height=min(400, 38 + 35 * len(table)))

    ids = [str(s) for s in shown["span_id"]]
    labels = {str(r["span_id"]): f"{short(r['session_id'], 30)} · step {r['seq']} · {r['code']}"
              for r in shown.to_dict("records")}
    wanted = st.query_params.get("violation")
    if wanted and wanted not in ids:  # a link to a violation on another page (or filtered out): still shown
        ids.insert(0, wanted)
        labels[wanted] = "the violation in the link"
    rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
    if rows:
        st.session_state[PICK] = ids[ids.index(str(shown["span_id"].iloc[rows[0]]))]
    elif wanted in ids and st.session_state.get(PICK) not in ids:
        st.session_state[PICK] = wanted
    elif st.session_state.get(PICK) not in ids:
        st.session_state[PICK] = data.first_violation(shown)  # prefer one whose cause is known
    picked = st.selectbox("Violation", ids, key=PICK, format_func=lambda s: labels.get(s, s),
                          help="The violations of this page (and the one a link names)")
    st.query_params["violation"] = picked

    detail = data.violation_detail(data.key(), picked)
    if detail is None:
        st.warning("This violation is no longer in the store.")
        st.stop()
    v = _attrs(detail["violation"])
    st.subheader("The violation")
    st.text(f"{v.get(sn.VIOLATION_CODE, '?')} at step {detail['seq']} of session {detail['session_id']}")
    st.code(str(v.get(sn.VIOLATION_MESSAGE) or detail.get("status_message") or ""), language=None)
    with st.expander("Violation span attributes"):
        st.json(v)

    st.subheader("Causal eviction")
    if not detail.get("prune_span_id"):
        st.warning("This violation carries no link to a prune: nothing the tracer saw evicted its partner "
                   "(e.g. a malformed recording, or the message was never in context).")
    else:
        p = _attrs(detail["prune"])
        chk = _attrs(detail.get("check_attributes"))
        seq = int(detail["prune_seq"])
        gated = p.get(sn.GATED)
        facts = pd.DataFrame({
            "": ["decision span", "step", "budget check", "policy", "gated", "tokens before → after",
                 "budget", "pruned units", "pruned message ids", "grown units", "shrunk units", "skipped units"],
            "value": [
                str(detail["prune_name"]), str(seq), str(chk.get(sn.CHECK, "?")),
                str(p.get(sn.POLICY, "?")), "yes" if gated else "no (naive runtime)" if gated is False else "?",
                f"{p.get(sn.TOKENS_BEFORE, '?')} → {p.get(sn.TOKENS_AFTER, '?')}",
                str(chk.get(sn.BUDGET, "?")),
                ", ".join(f"{u}" + ("" if whole else " (split)")
                          for u, whole in zip(detail["evicted"]["unit_id"], detail["evicted"]["whole"], strict=True)),
                ", ".join(map(str, p.get(sn.PRUNED_IDS) or [])),
                ", ".join(map(str, p.get(sn.GROWN_UNITS) or [])),
                ", ".join(map(str, p.get(sn.SHRUNK_UNITS) or [])),
                ", ".join(map(str, p.get(sn.SKIPPED_UNITS) or [])),
            ],
        })
        pruned_ids = ", ".join(map(str, p.get(sn.PRUNED_IDS) or [])) or "nothing"
        st.text(f"Caused by {detail['prune_name']} at step {seq} (budget check #{chk.get(sn.CHECK, '?')}): "
                f"policy {p.get(sn.POLICY, '?')}, {'gated' if gated else 'ungated'}, evicted {pruned_ids}")
        c1, c2 = st.columns([2, 3])
        with c1:
            show_table(facts, hide_index=True, width="stretch", key="violations_facts",
                         height=38 + 35 * len(facts))
            st.page_link("views/replay.py", label=f"Open in replay at step {seq} ▸",
                         query_params={"session": str(detail["session_id"]), "step": str(seq)})
        with c2:
            st.markdown("**The partner it evicted** (the messages this violation is about) and the policy's score")
            partners: pd.DataFrame = detail["partners"]
            if partners.empty:
                st.caption("No pruned message matches the violation's ids; all pruned units are outlined below.")
            else:
                show_table(partners[["message_id", "role", "unit_id", "score", "tokens", "direct", "call_ids",
                                       "answers", "cause"]], hide_index=True, width="stretch",
                             key="violations_partners")
                with_content = partners[partners["content"].notna()]
                for rec in with_content.head(3).to_dict("records"):
                    st.text(f"Evicted content of {rec['message_id']} ({rec['role']}):")
                    st.code(_pretty(rec["content"]), language=None)
            with st.expander("Proposal and scores"):
                st.json({k: _maybe_json(p.get(k)) for k in (sn.PROPOSAL, sn.PROPOSAL_IDS,
                                                             sn.SCORES) if k in p})
        # every unit the prune took messages from (an ungated prune records ids only; units recovered)
        pruned_units = [*dict.fromkeys([*map(str, detail["evicted"]["unit_id"]),
                                        *map(str, p.get(sn.PRUNED_UNITS) or [])])]
        budget = chk.get(sn.BUDGET)
        ceiling = chk.get(sn.HARD_CEILING)
        b1, b2 = st.columns(2)
        b1.plotly_chart(charts.context_bar(detail["before"], budget=budget, hard_ceiling=ceiling,
                                           highlight=pruned_units, title=f"before the prune (step {seq - 1})"),
                        width="stretch", key="violations_before")
        b2.plotly_chart(charts.context_bar(detail["after"], budget=budget, hard_ceiling=ceiling,
                                           title=f"after the prune (step {seq})"),
                        width="stretch", key="violations_after")

st.subheader("Repeated side-effecting calls")
retries = data.repeated_calls(scope)
if retries.empty:
    st.caption("No tool call was executed twice.")
else:
    if int(retries["total"].iloc[0]) > len(retries):
        st.caption(f"The newest {len(retries):,} of {int(retries['total'].iloc[0]):,} repeated calls.")
    show_table(pd.DataFrame({
        "session": retries["session_id"], "step": retries["seq"], "tool": retries["tool"],
        "call id": retries["call_id"], "side effect": retries["side_effect"],
        "first run at step": retries["first_seq"], "executions": retries["executions"],
    }), hide_index=True, width="stretch", key="violations_retries")
