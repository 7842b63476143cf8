"""Exact distributions from value histograms (pure).

The server cannot compute percentiles portably, so pipelines return how often each value
occurs; a histogram is as small as the number of distinct values (lengths are whole
numbers, durations are rounded to the millisecond) and gives the same percentiles as the
full list of values. The mean is the exact sum of the values, then one rounding: it does not
depend on the order the values are added in (float sums do, in the last bit).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from pydantic import BaseModel

PERCENTILES: tuple[int, ...] = (50, 90, 99)


class Distribution(BaseModel):
    """Summary of a set of numbers; every field is None when the set is empty.

    Percentiles use the nearest-rank definition: p is the smallest value such that at
    least p% of the values are less than or equal to it, so it is always an observed value.
    """

    count: int = 0
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


def nearest_rank(sorted_counts: list[tuple[float, int]], total: int, percentile: float) -> float:
    """The nearest-rank percentile of a histogram given as sorted (value, count) pairs."""
    rank = max(1, math.ceil(percentile / 100 * total))
    seen = 0
    for value, count in sorted_counts:
        seen += count
        if seen >= rank:
            return value
    return sorted_counts[-1][0]


def exact_sum(counts: Iterable[tuple[float, int]]) -> float:
    """The sum of `value * count` over (value, count) pairs, correctly rounded once (what
    `math.fsum` gives for the expanded list): every float is an integer over a power of
    two, so the sum is an integer over the largest of them."""
    ratios = [(value.as_integer_ratio(), count) for value, count in counts]
    if not ratios:
        return 0.0
    scale = max(denominator for (_, denominator), _ in ratios)
    total = sum(n * count * (scale // d) for (n, d), count in ratios)
    return total / scale


def distribution(histogram: Mapping[int, int] | Mapping[float, int]) -> Distribution:
    """Exact summary of the values a histogram (value -> occurrences) describes."""
    counts = sorted((value, count) for value, count in histogram.items() if count > 0)
    total = sum(count for _, count in counts)
    if total == 0:
        return Distribution()
    mean = exact_sum(counts) / total
    return Distribution(
        count=total,
        min=counts[0][0],
        max=counts[-1][0],
        mean=round(mean, 6),
        **{f"p{p}": nearest_rank(counts, total, p) for p in PERCENTILES},
    )


def histogram(values: Iterable[float]) -> dict[float, int]:
    """The histogram of a list of values (the reference side of the tests, and small data)."""
    found: dict[float, int] = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return found
