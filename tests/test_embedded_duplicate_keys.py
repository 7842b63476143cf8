"""A duplicate key error names what it collided on, as a server's does.

A server's E11000 error carries ``keyPattern`` and ``keyValue``; mongomock's carries no
details, so the embedded backend adds them (`backends/embedded/duplicate_keys.py`). Run
on the suite's backend (`MINDSTORE_TEST_URI` too), the same assertions hold on both."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import ASCENDING, InsertOne, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from mindstore.store import Store

COLL = "scratch_duplicates"


async def _collection(store: Store) -> Any:
    coll = store.database[COLL]
    await coll.create_index([("tenant", ASCENDING), ("key", ASCENDING)], unique=True, name="by_key")
    await coll.insert_one({"_id": "a", "tenant": "t", "key": "k", "n": 1})
    return coll


async def test_a_duplicate_in_a_unique_index_names_its_key(store: Store) -> None:
    coll = await _collection(store)
    with pytest.raises(DuplicateKeyError) as caught:
        await coll.insert_one({"_id": "b", "tenant": "t", "key": "k"})
    details = caught.value.details or {}
    assert caught.value.code == 11000
    assert details["keyPattern"] == {"tenant": 1, "key": 1}
    assert details["keyValue"] == {"tenant": "t", "key": "k"}
    assert "by_key" in str(caught.value)
    assert await coll.find({}).to_list() == [{"_id": "a", "tenant": "t", "key": "k", "n": 1}]


async def test_a_duplicate_id_names_the_id(store: Store) -> None:
    coll = await _collection(store)
    with pytest.raises(DuplicateKeyError) as caught:
        await coll.insert_one({"_id": "a", "tenant": "t", "key": "other"})
    details = caught.value.details or {}
    assert details["keyPattern"] == {"_id": 1} and details["keyValue"] == {"_id": "a"}
    assert await coll.count_documents({}) == 1


async def test_an_update_into_a_duplicate_names_its_key_and_changes_nothing(store: Store) -> None:
    coll = await _collection(store)
    await coll.insert_one({"_id": "b", "tenant": "t", "key": "j", "n": 2})
    with pytest.raises(DuplicateKeyError) as caught:
        await coll.update_one({"_id": "b"}, {"$set": {"key": "k"}})
    assert (caught.value.details or {})["keyValue"] == {"tenant": "t", "key": "k"}
    assert await coll.find_one({"_id": "b"}) == {"_id": "b", "tenant": "t", "key": "j", "n": 2}


async def test_a_bulk_write_reports_the_duplicate_and_does_the_rest(store: Store) -> None:
    coll = await _collection(store)
    with pytest.raises(BulkWriteError) as caught:
        await coll.bulk_write(
            [
                InsertOne({"_id": "b", "tenant": "t", "key": "k"}),
                InsertOne({"_id": "c", "tenant": "t", "key": "c"}),
                UpdateOne({"_id": "a"}, {"$inc": {"n": 1}}),
            ],
            ordered=False,
        )
    [error] = caught.value.details["writeErrors"]
    assert error["index"] == 0 and error["code"] == 11000
    assert error["keyValue"] == {"tenant": "t", "key": "k"}
    assert sorted(d["_id"] for d in await coll.find({}).to_list()) == ["a", "c"]
    assert (await coll.find_one({"_id": "a"}))["n"] == 2


async def test_sparse_and_partial_unique_indexes_refuse_only_their_duplicates(
    store: Store,
) -> None:
    coll = store.database[COLL]
    await coll.create_index("email", unique=True, sparse=True, name="email")
    await coll.create_index(
        "slot", unique=True, name="open_slot", partialFilterExpression={"open": True}
    )
    await coll.insert_many([{"_id": 1}, {"_id": 2}])  # no email: the sparse index skips them
    await coll.insert_many([{"_id": 3, "slot": 7, "open": False}, {"_id": 4, "slot": 7}])
    await coll.insert_one({"_id": 5, "slot": 7, "open": True})
    with pytest.raises(DuplicateKeyError) as caught:
        await coll.insert_one({"_id": 6, "slot": 7, "open": True})
    details = caught.value.details or {}
    assert details["keyPattern"] == {"slot": 1} and details["keyValue"] == {"slot": 7}
    await coll.insert_one({"_id": 7, "email": "a@x"})
    with pytest.raises(DuplicateKeyError) as caught:
        await coll.insert_one({"_id": 8, "email": "a@x"})
    assert (caught.value.details or {})["keyValue"] == {"email": "a@x"}
    assert sorted(d["_id"] for d in await coll.find({}).to_list()) == [1, 2, 3, 4, 5, 7]
