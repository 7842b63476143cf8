"""`$unwind` on the embedded backend (backends/embedded/unwind.py): the same documents as
mongomock's own stage, without copying the unwound array once per element."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from mongomock import aggregate

from mindstore import Store
from mindstore.backends.embedded.unwind import unwind

ORIGINAL = aggregate._handle_unwind_stage
VALUES = st.one_of(
    st.none(), st.integers(0, 9), st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.sampled_from("xy"), st.integers(0, 9), max_size=2),
)  # fmt: skip
DOCUMENTS = st.lists(
    st.fixed_dictionaries({"_id": st.integers(0, 99)}, optional={"a": VALUES, "b": VALUES}),
    max_size=4,
)


@given(
    documents=DOCUMENTS,
    path=st.sampled_from(["$a", "$b", "$a.x"]),
    preserve=st.booleans(),
    index=st.sampled_from([None, "i"]),
)
def test_unwind_gives_mongomocks_documents(
    documents: list[dict[str, Any]], path: str, preserve: bool, index: str | None
) -> None:
    options: dict[str, Any] = {"path": path, "preserveNullAndEmptyArrays": preserve}
    if index:
        options["includeArrayIndex"] = index
    expected = ORIGINAL(copy.deepcopy(documents), None, options)
    found = unwind(copy.deepcopy(documents), options, ORIGINAL)
    assert found == expected
    assert [list(d) for d in found] == [list(d) for d in expected]  # field order too
    assert unwind(copy.deepcopy(documents), path, ORIGINAL) == ORIGINAL(
        copy.deepcopy(documents), None, path
    )


def test_the_documents_it_makes_are_independent() -> None:
    rows = unwind([{"_id": 1, "a": [{"k": 1}, {"k": 2}], "b": {"n": [1]}}], "$a", ORIGINAL)
    rows[0]["b"]["n"].append(2)
    rows[0]["a"]["k"] = 9
    assert rows[1] == {"_id": 1, "a": {"k": 2}, "b": {"n": [1]}}


async def test_pipelines_unwind_alike(store: Store) -> None:
    """The suite's backend (embedded, or a server with MINDSTORE_TEST_URI)."""
    collection = store.database["scratch_unwind"]
    await collection.insert_many([
        {"_id": 1, "a": [{"k": 1}, {"k": 2}], "t": "x"}, {"_id": 2, "a": []}, {"_id": 3},
    ])  # fmt: skip
    cursor = await collection.aggregate([
        {"$unwind": {"path": "$a", "preserveNullAndEmptyArrays": True}},
        {"$sort": {"_id": 1, "a.k": 1}},
    ])  # fmt: skip
    rows = await cursor.to_list(None)
    assert rows == [
        {"_id": 1, "a": {"k": 1}, "t": "x"},
        {"_id": 1, "a": {"k": 2}, "t": "x"},
        {"_id": 2},
        {"_id": 3},
    ]
