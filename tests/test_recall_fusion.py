"""Reciprocal rank fusion (`mindstore.search.fusion.fuse`), judged by the formula written
out again (each ranking's first place of an item, 1 / (k + rank)), over any rankings."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindstore.search import fuse

RANKINGS = st.lists(st.lists(st.integers(0, 12), max_size=15), max_size=4)


@given(RANKINGS, st.integers(1, 100))
@settings(max_examples=200, deadline=None)
def test_fused_scores_are_the_formulas(rankings: list[list[int]], k: int) -> None:
    fused = fuse(rankings, k=k)
    expected = {
        item: sum(1 / (k + r.index(item) + 1) for r in rankings if item in r)
        for ranking in rankings
        for item in ranking
    }
    assert {item for item, _ in fused} == set(expected)
    for item, value in fused:
        assert value == pytest.approx(expected[item], rel=1e-12)
    values = [value for _, value in fused]
    assert values == sorted(values, reverse=True)


def test_agreement_beats_a_single_first_place() -> None:
    fused = dict(fuse([["a", "b"], ["c", "b"]]))
    assert fused["b"] > fused["a"] and fused["b"] > fused["c"]
    assert fuse([["x", "y"], []]) == [("x", 1 / 3), ("y", 1 / 4)]  # k = 2 by default
    assert fuse([["x", "y"], []], k=60) == [("x", 1 / 61), ("y", 1 / 62)]
    with pytest.raises(ValueError, match="k"):
        fuse([["a"]], k=0)
