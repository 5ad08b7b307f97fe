"""Sessions: every recorded and replayed session, searchable, filterable and paged in DuckDB.

The state lives in the address bar (``?q=refund&kind=replay&policy=salience&gate=ungated&violations=1
&label=bug&from=2026-01-01&to=2026-12-31&size=25&page=2``), so a filtered list is a link. Recorded traffic and
replays are told apart by the ``kind`` column (● recorded, ↻ replay of ...). ``q`` is always in the
address (empty when there is no search): with a bare ``/sessions`` URL, Streamlit 1.67 did not add
the query string a widget change wrote (seen in chromium).
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

import pandas as pd
import streamlit as st

from dashboard.components import data, warm
from dashboard.components.widgets import open_links, show_table, ts_column
from tracer import queries

SIZES = (10, 25, 50, 100)
KIND_LABELS = {"all": "recorded and replays", "recorded": "recorded traffic only", "replay": "replays only"}
GATES = {"any": None, "gated": True, "ungated": False}

qp = st.query_params


def _date(name: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(qp.get(name, ""))
    except ValueError:
        return None


st.title("Sessions")
st.caption("Every session in the store. ● recorded: traffic imported or recorded from an agent. "
           "↻ replay: a recorded session replayed through a policy by prunegate replay / compare.")

policies_all = data.session_policies()
c1, c2, c3, c4 = st.columns([3, 1.6, 2, 1.2])
search = c1.text_input("Search sessions", value=qp.get("q", ""), key="sessions_q",
                       placeholder="message text, tool name, decision, reason, violation code, id or name")
kinds = list(KIND_LABELS)
kind: str = c2.selectbox("Kind", kinds, index=kinds.index(qp.get("kind", "all")) if qp.get("kind") in kinds else 0,
                         format_func=lambda k: KIND_LABELS[k], key="sessions_kind")
wanted_pol = [p for p in qp.get("policy", "").split(",") if p in policies_all]
policies = c3.multiselect("Policy", policies_all, default=wanted_pol, key="sessions_policies")
gates = list(GATES)
gate = c4.selectbox("Gate", gates, index=gates.index(qp.get("gate", "any")) if qp.get("gate") in gates else 0,
                    key="sessions_gate")
d1, d2, d3, d4 = st.columns([1.5, 1.5, 1.6, 1.2])
since = d1.date_input("Active from", value=_date("from"), key="sessions_from", format="YYYY-MM-DD")
until = d2.date_input("Active until", value=_date("to"), key="sessions_to", format="YYYY-MM-DD")
only_v = d3.checkbox("With violations", value=qp.get("violations") == "1", key="sessions_only_v")
labels_all = data.run(queries.annotation_labels)
wanted_labels = [x for x in qp.get("label", "").split(",") if x in labels_all]
labels = d3.multiselect("Annotation label", labels_all, default=wanted_labels, key="sessions_labels",
                        placeholder="any") if labels_all else []
size_wanted = int(qp["size"]) if qp.get("size", "").isdigit() and int(qp["size"]) in SIZES else 50
PAGE_SIZE = d4.selectbox("Per page", SIZES, index=SIZES.index(size_wanted), key="sessions_size")

filters = (search.strip(), kind, ",".join(policies), gate, str(since or ""), str(until or ""), only_v, PAGE_SIZE,
           ",".join(labels))
try:
    page_no = max(1, int(qp.get("page", "1")))
except ValueError:
    page_no = 1
if st.session_state.get("_sessions_filters") not in (None, filters):
    page_no = 1  # a new filter starts at the first page
st.session_state["_sessions_filters"] = filters
wanted: dict[str, str] = {k: v for k, v in {
    "q": search.strip(), "kind": None if kind == "all" else kind, "policy": ",".join(policies),
    "gate": None if gate == "any" else gate, "from": since.isoformat() if isinstance(since, dt.date) else None,
    "to": until.isoformat() if isinstance(until, dt.date) else None, "violations": "1" if only_v else None,
    "size": None if PAGE_SIZE == 50 else str(PAGE_SIZE), "page": None if page_no == 1 else str(page_no),
    "label": ",".join(labels) or None,
}.items() if v is not None and (v or k == "q")}  # q always: see the note in the docstring
if wanted != qp.to_dict():
    qp.from_dict(wanted)  # one update of the address bar: the filtered list is a link


def _ns(day: object, *, end: bool = False) -> int | None:
    """Midnight UTC of ``day`` (of the day after it, for an end) in ns, held to the store's 64-bit times:
    any date a URL can hold (9999-12-31, 0001-01-01) is a bound, never an overflow."""
    if not isinstance(day, dt.date) or (end and day == dt.date.max):
        return None  # no day after the last one: no upper bound
    moment = dt.datetime.combine(day + dt.timedelta(days=1) if end else day, dt.time(), tzinfo=dt.UTC)
    return max(-(2**63), min(2**63 - 1, int(moment.timestamp()) * 10**9))


found = data.session_page(search=search.strip() or None, kind=None if kind == "all" else kind,
                   policies=tuple(policies), gated=GATES[gate], only_with_violations=only_v,
                   since_ns=_ns(since), until_ns=_ns(until, end=True), offset=(page_no - 1) * PAGE_SIZE,
                   limit=PAGE_SIZE, labels=tuple(labels))
total = found["total"]
pages = max(1, -(-total // PAGE_SIZE))

m1, m2, m3, m4 = st.columns(4)
m1.metric("Matching sessions", f"{total:,}")
m2.metric("● Recorded", f"{found['recorded']:,}")
m3.metric("↻ Replays", f"{found['replays']:,}")
m4.metric("Violations in them", f"{found['violations']:,}")

df: pd.DataFrame = found["rows"]
if df.empty:
    st.info("No session matches. Record one (prunegate demo, prunegate import, prunegate replay) "
            "or widen the filters.")
    st.stop()

first = (page_no - 1) * PAGE_SIZE + 1
st.text(f"Showing {first:,}–{first + len(df) - 1:,} of {total:,} (page {page_no} of {pages})")
# The session id (what the other pages and the URL name) and the counts a user scans for first
# (violations) sit before the wide columns (names of the recording, labels), so they are on screen
# at 1,500 px: the grid draws only the columns in view. An ungated runtime never defers: its checks
# that found nothing to prune are not deferrals, so its deferrals read "—".
gate_of: list[bool | None] = [None if g is None or pd.isna(g) else bool(g) for g in df["gated"]]  # numpy bools fail `is True`
ungated = [g is False for g in gate_of]
table = pd.DataFrame({
    "kind": ["↻ replay" if k == "replay" else "● recorded" for k in df["kind"]],
    "session": df["session_id"],
    "policy": [f"{p} · {'gated' if g is True else 'ungated' if g is False else '?'}" if isinstance(p, str) else ""
               for p, g in zip(df["policy"], gate_of, strict=True)],
    "violations": df["violations"],
    "prunes": df["prunes"],
    "deferrals": [None if u else d for u, d in zip(ungated, df["deferrals"], strict=True)],
    "spills": df["spills"],
    "failures": df["failures"],
    "name": df["label"].fillna(""),
    "messages": df["messages"].fillna(0).astype(int),
    "peak tokens": df["peak_tokens"].fillna(0).astype(int),
    "budget": [f"{int(b):,}" if pd.notna(b) else "" for b in df["budget"]],
    "replay": ["replay?session=" + quote(str(s), safe="") for s in df["session_id"]],
    "last activity": ts_column(df["last_ns"]),
    "labels": df["labels"].fillna("") if "labels" in df else "",
    "replay of": df["source_id"].where(df["kind"] == "replay", "").fillna(""),
})
event = show_table(
    table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row", key="sessions_table",
    column_config={"replay": st.column_config.LinkColumn("open", display_text="replay ▸"),
                   "peak tokens": st.column_config.NumberColumn(format="%d")},
)
rows = event.selection.rows if event is not None and hasattr(event, "selection") else []
if rows:
    picked = str(df.iloc[rows[0]]["session_id"])
    warm.session(picked)  # read while the page switches
    st.switch_page("views/replay.py", query_params={"session": picked})

p1, p2, p3 = st.columns([1, 1, 4])
if page_no > 1 and p1.button("◀ previous page", key="sessions_prev"):
    qp["page"] = str(page_no - 1)
    st.rerun()
if page_no < pages and p2.button("next page ▶", key="sessions_next"):
    qp["page"] = str(page_no + 1)
    st.rerun()

open_links(df, key="sessions_open")
