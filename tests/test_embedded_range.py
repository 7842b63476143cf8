"""`$range` on the embedded backend (backends/embedded/array_ranges.py), as MongoDB has it:
analytics over paged tasks names a task's visible pages by their numbers with it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mongomock import OperationFailure

from mindstore import Store
from mindstore.backends.embedded.array_ranges import int_range

SMALL = st.integers(-40, 40)


@given(start=SMALL, end=SMALL, step=SMALL.filter(bool))
def test_int_range_is_the_integers_from_start_by_step_before_end(
    start: int, end: int, step: int
) -> None:
    numbers = int_range([start, end, step])
    assert numbers == list(range(start, end, step))
    assert int_range([start, end]) == list(range(start, end))
    assert int_range([float(start), end]) == int_range([start, end])  # an integral double


@pytest.mark.parametrize("arguments", [
    [0], [0, 1, 1, 1], "0..3", [None, 3], [0, "3"], [0, 2.5], [True, 3], [0, 3, 0],
    [0, 2**31], [-(2**31) - 1, 0],
])  # fmt: skip
def test_bad_range_arguments_are_errors(arguments: object) -> None:
    with pytest.raises(OperationFailure, match="range"):
        int_range(arguments)


async def test_pipelines_evaluate_it(store: Store) -> None:
    """The same pipeline on the suite's backend (embedded, or a server with
    MINDSTORE_TEST_URI): field paths and expressions as arguments, empty ranges."""
    collection = store.database["scratch_range"]
    await collection.insert_many([{"_id": 1, "n": 3}, {"_id": 2, "n": 0}, {"_id": 3, "n": 5}])
    cursor = await collection.aggregate([
        {"$project": {"up": {"$range": [0, "$n"]}, "down": {"$range": ["$n", 0, -2]},
                      "ids": {"$map": {
                          "input": {"$range": [1, {"$ifNull": ["$none", 3]}]}, "as": "i",
                          "in": {"$concat": ["k#", {"$toString": "$$i"}]}}}}},
        {"$sort": {"_id": 1}},
    ])  # fmt: skip
    rows = await cursor.to_list(None)
    assert [r["up"] for r in rows] == [[0, 1, 2], [], [0, 1, 2, 3, 4]]
    assert [r["down"] for r in rows] == [[3, 1], [], [5, 3, 1]]
    assert rows[0]["ids"] == ["k#1", "k#2"]
