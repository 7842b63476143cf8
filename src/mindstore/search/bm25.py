"""BM25 (pure): the score a hit is ranked by.

Lucene's form (also bm25s's default): ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``
and ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))`` per query term, summed,
with k1 = 1.2 and b = 0.75. `N`, `avglen` and every `df` are the tenant's (all its
indexed messages), whatever the query's filters (owner, role, time), so a message's
score does not depend on who asks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Corpus", "Scorer", "idf", "score"]

K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class Corpus:
    """The tenant's statistics: `documents` indexed messages of `length` terms in all."""

    documents: int
    length: int

    @property
    def average(self) -> float:
        return self.length / self.documents if self.documents > 0 else 1.0


def idf(corpus: Corpus, df: int) -> float:
    """The inverse document frequency of a term `df` messages hold (never negative)."""
    n = max(corpus.documents, df)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Scorer:
    """`score` for one query under fixed statistics, each term's idf computed once: a
    search scores every matching message (hundreds of thousands for common words)."""

    average: float
    weights: tuple[tuple[str, float], ...]
    """Each query term, in query order, with its idf."""

    @classmethod
    def of(
        cls, corpus: Corpus, query_terms: Iterable[str], document_frequencies: Mapping[str, int]
    ) -> Scorer:
        return cls(
            corpus.average,
            tuple((t, idf(corpus, document_frequencies.get(t, 0))) for t in query_terms),
        )

    def __call__(self, frequencies: Mapping[str, int], length: int) -> float:
        norm = K1 * (1.0 - B + B * length / self.average)
        total = 0.0
        for term, weight in self.weights:
            tf = frequencies.get(term, 0)
            if tf <= 0:
                continue
            total += weight * tf * (K1 + 1.0) / (tf + norm)
        return total


def score(
    corpus: Corpus,
    frequencies: Mapping[str, int],
    length: int,
    query_terms: Iterable[str],
    document_frequencies: Mapping[str, int],
) -> float:
    """BM25 of one message: `frequencies` its term counts (of the query's terms at
    least), `length` its term count."""
    return Scorer.of(corpus, query_terms, document_frequencies)(frequencies, length)
