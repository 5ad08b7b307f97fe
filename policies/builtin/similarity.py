"""Keep the messages most similar to the current query; evict the least similar first.

Offline lexical similarity (BM25 via ``rank_bm25``) by default; ``embed=`` plugs in embeddings.
Like retrieval-based memories, it ranks messages one by one: ungated it keeps a tool result that
matches the query and drops the call that produced it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..errors import PolicyError
from ..messages import Message
from ..policy import ContextView, Eviction, Proposal
from . import _params
from ._text import goal, words

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


def bm25_scores(query: str, documents: list[str]) -> list[float]:
    """BM25 (Okapi) score of each document against the query; all zeros when either has no words."""
    q = words(query)
    corpus = [words(d) for d in documents]
    if not q or not any(corpus):
        return [0.0] * len(documents)
    try:
        from rank_bm25 import BM25Okapi  # noqa: PLC0415 - imported when a similarity policy first scores
    except ImportError as exc:  # pragma: no cover - rank_bm25 is a dependency of the distribution
        raise PolicyError("similarity: the default scorer needs the 'rank_bm25' package") from exc
    bm25 = BM25Okapi([doc or ["\x00"] for doc in corpus])  # an empty document would divide by zero
    return [float(s) for s in bm25.get_scores(q)]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


class SimilarityPolicy:
    """Evict the unpinned messages least similar to ``view.query`` until ``target`` × budget.

    ``embed(texts) -> vectors`` (one vector per text; the first text is the query) switches from
    BM25 to cosine similarity of embeddings. Ties (e.g. no shared words) go oldest first.
    ``Proposal.scores`` holds each candidate unit's best similarity.
    """

    name = "similarity"

    def __init__(self, target: float = 0.8, embed: Embed | None = None) -> None:
        self.target = _params.fraction(self.name, "target", target)
        self.embed = None if embed is None else _params.function(self.name, "embed", embed, "(texts) -> vectors")

    def similarities(self, query: str, messages: list[Message]) -> list[float]:
        texts = [m.plain_text() for m in messages]
        if self.embed is None:
            return bm25_scores(query, texts)
        vectors = list(self.embed([query, *texts]))
        if len(vectors) != len(texts) + 1:
            raise PolicyError(f"similarity: embed returned {len(vectors)} vectors for {len(texts) + 1} texts")
        q = vectors[0]
        out = []
        for i, v in enumerate(vectors[1:]):
            if len(v) != len(q):
                raise PolicyError(f"similarity: embed vector {i + 1} has {len(v)} dimensions, the query's {len(q)}")
            out.append(cosine(q, v))
        return out

    def propose(self, view: ContextView) -> Proposal:
        need = goal(view, self.target)
        query = view.query
        proposal = Proposal(policy=self.name, notes=f"target {self.target:g} of budget; query {query[:80]!r}")
        if need <= 0:
            return proposal
        candidates = [(u.id, m) for u in view.units() if not u.pinned for m in view.messages(u.id)]
        if not candidates:
            return proposal
        sims = self.similarities(query, [m for _, m in candidates])
        ranked = sorted(zip(sims, candidates, strict=True), key=lambda s: (s[0], s[1][1].seq))
        for sim, (uid, _m) in ranked:
            proposal.scores[uid] = max(sim, proposal.scores.get(uid, sim))
        for sim, (_uid, m) in ranked:
            if need <= 0:
                break
            proposal.evictions.append(Eviction((m.id,), score=sim, reason=f"similarity {sim:.3f} to the query"))
            need -= m.tokens
        return proposal
