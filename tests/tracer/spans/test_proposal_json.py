"""A prune's proposal as JSON: the fast path writes exactly what ``dumps(proposal.to_dict())`` writes."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given
from hypothesis import strategies as st

from policies.messages import Message
from policies.policy import Eviction, Proposal, Rewrite, Summary
from tracer.spans.redact import dumps, proposal_json

text = st.text(max_size=12)  # any code point, lone surrogates included
score = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-2**70, max_value=2**70))
eviction = st.builds(Eviction, st.lists(text, max_size=4).map(tuple), score, text)
proposal = st.builds(Proposal, text, st.lists(eviction, max_size=6),
                     scores=st.dictionaries(text, st.one_of(st.floats(), st.integers(min_value=-2**70, max_value=2**70)),
                                            max_size=4),
                     notes=text, error=st.one_of(st.none(), text))


@given(proposal)
def test_evictions_only_proposal_is_the_general_paths_text(p: Proposal) -> None:
    assert proposal_json(p) == dumps(p.to_dict())


@dataclasses.dataclass(frozen=True)
class ScoredEviction(Eviction):  # a policy's own Eviction with a field more: to_dict leaves it out
    detail: str = "kept out"


def test_other_shapes_take_the_general_path() -> None:
    m = Message(role="assistant", blocks=[], id="s1")
    for p in (Proposal("p", [ScoredEviction(("a",), 1.0, "r")]),
              Proposal("p", [Eviction(("a",))], rewrites=[Rewrite("a", m, "shorter")]),
              Proposal("p", summaries=[Summary(("u1",), m, "sum", "llm")]),
              Proposal("p", [Eviction(("a",), math.nan, "nan")], scores={"u1": 2**80})):
        assert proposal_json(p) == dumps(p.to_dict())
    assert "kept out" not in proposal_json(Proposal("p", [ScoredEviction(("a",), 1.0, "r")]))
