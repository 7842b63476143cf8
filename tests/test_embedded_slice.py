"""`$slice` with computed arguments on the embedded backend (backends/embedded/array_slices.py),
as MongoDB has it: the paged context window slices each page's share on the server with
positions and counts computed in the pipeline."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mongomock import OperationFailure

from mindstore import Store
from mindstore.backends.embedded.array_slices import slice_arguments

SMALL = st.integers(-40, 40)


@given(position=SMALL, count=st.integers(1, 40))
def test_slice_arguments_are_the_integers_given(position: int, count: int) -> None:
    assert slice_arguments([position, count]) == [position, count]
    assert slice_arguments([float(position), count]) == [position, count]  # an integral double
    assert slice_arguments([position]) == [position]  # the two-argument form: a count


@pytest.mark.parametrize("arguments", [
    [], [1, 2, 3], ["1"], [None], [1.5], [True], [0, 0], [0, -1], [2**31], [0, 2**31],
])  # fmt: skip
def test_bad_slice_arguments_are_errors(arguments: list[object]) -> None:
    with pytest.raises(OperationFailure, match="slice"):
        slice_arguments(arguments)


@given(
    items=st.lists(st.integers(0, 9), max_size=12),
    position=st.integers(-14, 14),
    count=st.integers(1, 14),
)
def test_computed_arguments_slice_as_literal_ones(
    items: list[int], position: int, count: int
) -> None:
    """Pure: the same arguments computed or literal give the same slice (mongomock's own
    code does the slicing), and the two-argument form too."""
    import mongomock

    import mindstore.backends.embedded  # noqa: F401  (installs the extension)

    collection = mongomock.MongoClient().db.scratch
    collection.insert_one({"_id": 1, "a": items, "p": position, "n": count})
    computed = {"$slice": ["$a", {"$add": ["$p", 0]}, "$n"]}
    literal = {"$slice": ["$a", position, count]}
    first = {"$slice": ["$a", {"$subtract": ["$n", 0]}]}
    row = next(collection.aggregate([{"$project": {"c": computed, "l": literal, "f": first}}]))
    assert row["c"] == row["l"]
    assert row["f"] == items[:count]


async def test_pipelines_evaluate_it(store: Store) -> None:
    """The same pipeline on the suite's backend (embedded, or a server with
    MINDSTORE_TEST_URI): field paths and expressions as position and count, a negative
    position, a missing array (null), and a count that is not positive is an error."""
    collection = store.database["scratch_slice"]
    await collection.insert_many([
        {"_id": 1, "a": [0, 1, 2, 3, 4], "p": 1, "n": 2},
        {"_id": 2, "a": [0, 1, 2], "p": -2, "n": 5},
        {"_id": 3, "p": 0, "n": 1},
    ])  # fmt: skip
    cursor = await collection.aggregate([
        {"$project": {"s": {"$slice": ["$a", "$p", "$n"]},
                      "t": {"$slice": ["$a", {"$subtract": ["$n", 1]}]}}},
        {"$sort": {"_id": 1}},
    ])  # fmt: skip
    rows = await cursor.to_list(None)
    assert [r.get("s") for r in rows] == [[1, 2], [1, 2], None]
    assert [r.get("t") for r in rows] == [[0], [0, 1, 2], None]
    with pytest.raises(OperationFailure):
        cursor = await collection.aggregate(
            [{"$project": {"s": {"$slice": ["$a", 0, {"$subtract": ["$n", "$n"]}]}}}]
        )
        await cursor.to_list(None)
