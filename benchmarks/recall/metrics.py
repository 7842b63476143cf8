"""Recall of evidence turns, reciprocal rank fusion, and the summary of one method's run.

Pure. recall@k of one question: the fraction of its evidence turns among the first k
ids returned; a method's recall@k is the mean over its questions (each question weighs
the same, however many evidence turns it has). A question "finds nothing" when the
method returns no id at all.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

RRF_K = 60
"""The constant of reciprocal rank fusion (Cormack et al. 2009), as most engines use it."""


def recall_at(found: Sequence[str], evidence: frozenset[str], k: int) -> float:
    return len(evidence.intersection(found[:k])) / len(evidence)


def rrf(rankings: Iterable[Sequence[str]], limit: int, k: int = RRF_K) -> list[str]:
    """Ids by the sum of 1 / (k + rank) over the rankings that hold them (rank from 1);
    ties in the order of first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])[:limit]


@dataclass(frozen=True)
class Answer:
    """One method's answer to one question: the ids it returned (best first), the time."""

    found: tuple[str, ...]
    seconds: float
    cpu_seconds: float = 0.0
    """This process's CPU time for it (all threads): what the answer cost, whatever else
    the machine was running."""
    error: str | None = None


def summary(
    answers: Sequence[Answer],
    evidence: Sequence[frozenset[str]],
    categories: Sequence[int],
) -> dict[str, object]:
    """recall@5/@10 (overall and by category), zero-hit share, errors, seconds per question."""
    assert len(answers) == len(evidence) == len(categories)
    r5 = [recall_at(a.found, e, 5) for a, e in zip(answers, evidence, strict=True)]
    r10 = [recall_at(a.found, e, 10) for a, e in zip(answers, evidence, strict=True)]
    seconds = sorted(a.seconds for a in answers)
    cpu = statistics.fmean(a.cpu_seconds for a in answers)
    by_category: dict[str, float] = {}
    for category in sorted(set(categories)):
        mine = [v for v, c in zip(r10, categories, strict=True) if c == category]
        by_category[str(category)] = round(statistics.fmean(mine), 3)
    return {
        "questions": len(answers),
        "recall_at_5": round(statistics.fmean(r5), 3),
        "recall_at_10": round(statistics.fmean(r10), 3),
        "zero_hit_share": round(sum(1 for a in answers if not a.found) / len(answers), 3),
        "errors": sum(1 for a in answers if a.error is not None),
        "error_examples": sorted({a.error for a in answers if a.error is not None})[:3],
        "recall_at_10_by_category": by_category,
        "seconds_per_question_mean": round(statistics.fmean(seconds), 4),
        "cpu_seconds_per_question_mean": round(cpu, 4),
        "seconds_per_question_p50": round(seconds[len(seconds) // 2], 4),
        "seconds_per_question_p95": round(
            seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 4
        ),
    }
