"""Reciprocal rank fusion (pure): hybrid recall's ranking (docs/search.md).

Each ranking gives an item at rank r (1 first) the score 1 / (k + r); an item's fused
score is the sum over the rankings that hold it, so an item two rankings agree on rises
above one only a single ranking puts first; the rankings' own scores (BM25, cosine), on
scales of their own, are never compared.

k = 2, not the 60 of the method's authors (Cormack, Clarke and Buettcher, 2009) and of
MongoDB's `$rankFusion`. With k = 60 the first ten places of a ranking score almost alike
(1/61 to 1/70), so a message both rankings put in their middle beats either ranking's
first: on LoCoMo (docs/search.md, "Retrieval quality") hybrid with k = 60 found less than
the lexical ranking alone (recall@10 0.524 against 0.561). k was chosen on two of the ten
conversations (k = 1 to 5 all gain there) and measured on the other eight: 0.610
against the lexical ranking's 0.561 and the semantic one's 0.447.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["RRF_K", "fuse"]

RRF_K = 2

Item = TypeVar("Item", bound=Hashable)


def fuse(rankings: Sequence[Sequence[Item]], *, k: int = RRF_K) -> list[tuple[Item, float]]:
    """Each item of `rankings` (best first; an item repeated within one counts at its
    first place) with its fused score, best first; ties keep the order in which the
    items were first met (the first ranking's order, then the next's)."""
    if k < 1:
        raise ValueError("k: at least 1")
    scores: dict[Item, float] = {}
    for ranking in rankings:
        seen: set[Item] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: n for n, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))
