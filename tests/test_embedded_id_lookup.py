"""The embedded backend's lookup by `_id` against mongomock's scan.

`EmbeddedClient(fast_reads=True)` finds the documents of a filter that starts with `_id`
equal to a plain value (or `$in` a list of them) by key in mongomock's store
(`backends/embedded/id_lookup.py`); `fast_reads=False` tests every stored document, as
mongomock does. Both must give the same documents, in the same order, the same errors and
the same stored documents after writes, for generated collections, filters and writes.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import mongomock
import pytest
from bson import Int64, ObjectId
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mongomock import collection as mongomock_collection
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure

from mindstore.backends import EmbeddedClient
from mindstore.backends.embedded import id_lookup
from mindstore.backends.embedded.pipeline import run_pipeline

DB = "id_lookup_test"
COLL = "probe"  # not one of mindstore's collections: the portable audit leaves it alone

OID_A, OID_B, OID_MISSING = ObjectId(b"a" * 12), ObjectId(b"b" * 12), ObjectId(b"z" * 12)
NAN = float("nan")

# -- generated collections, filters and statements -----------------------------------------

#: `_id` values of different types; 1, 1.0, True and Int64(1) are one key to mongomock
COMMON_IDS = st.sampled_from(
    ["1", "a", "b", 1, 2, 1.0, 2.5, True, False, 0, -0.0, Int64(2), Int64(7), OID_A, OID_B, None]
)
#: `_id`s that are not their own key in mongomock's store: such a store is always scanned
RARE_IDS = st.sampled_from([{"k": 1}, dt.datetime(2024, 1, 1, 0, 0, 0, 123456)])
STORED_IDS = st.integers(1, 12).flatmap(lambda n: RARE_IDS if n == 1 else COMMON_IDS)
MISSING_IDS = st.sampled_from(["zz", 9, 9.5, OID_MISSING, "A", ""])
PLAIN_IDS = st.one_of(STORED_IDS, MISSING_IDS)
#: `_id` filter values the lookup does not take (they must be scanned, with the same result)
OTHER_ID_FILTERS = st.one_of(
    st.just(NAN),
    st.lists(PLAIN_IDS, max_size=2),
    st.builds(lambda v: {"$gt": v}, st.sampled_from([0, "a", 1.5])),
    st.builds(lambda v: {"$ne": v}, PLAIN_IDS),
    st.just(re.compile("^a")),
    st.just({"$in": "not a list"}),
    st.builds(lambda v: {"$in": [v, NAN]}, PLAIN_IDS),
    st.builds(lambda v: {"$in": [v, None]}, PLAIN_IDS),
    st.builds(lambda v: {"$in": [v], "$nin": ["b"]}, PLAIN_IDS),
    st.just({"$badop": 1}),
)
ID_FILTERS = st.one_of(
    PLAIN_IDS,
    PLAIN_IDS,
    st.builds(lambda vs: {"$in": vs}, st.lists(PLAIN_IDS, max_size=4)),
    OTHER_ID_FILTERS,
)
CONDITIONS = st.one_of(
    st.builds(lambda n: {"a": n}, st.integers(0, 3)),
    st.builds(lambda n: {"a": {"$gt": n}}, st.integers(0, 3)),
    st.builds(lambda b: {"b": {"$exists": b}}, st.booleans()),
    st.builds(lambda n: {"$or": [{"a": n}, {"b": n}]}, st.integers(0, 3)),
    st.just({"a": {"$badop": 1}}),  # an error wherever it is evaluated
    st.just({"$comment": "why"}),
    st.just({"b": [1, 2]}),
    st.just({"c": None}),
    st.builds(lambda n: {"b.0": n}, st.integers(0, 3)),
    st.just({"b.-1": 1}),  # raises IndexError on an empty array
)


@st.composite
def filters(draw: st.DrawFn) -> dict[str, Any]:
    """`_id` first, after other conditions (some plain: the lookup's shape too), or
    absent."""
    conditions = draw(st.lists(CONDITIONS, max_size=2))
    where = draw(st.sampled_from(["first", "first", "later", "later", "absent"]))
    built: dict[str, Any] = {}
    if where == "first":
        built["_id"] = draw(ID_FILTERS)
    for condition in conditions:
        for key, value in condition.items():
            built.setdefault(key, value)
    if where == "later":
        built["_id"] = draw(ID_FILTERS)
    return built


DOCUMENTS = st.fixed_dictionaries(
    {"_id": STORED_IDS, "a": st.integers(0, 3)},
    optional={
        "b": st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=2)),
        "c": st.sampled_from([None, "x"]),
    },
)
SMALL = st.integers(0, 3)
STATEMENTS = st.one_of(
    st.tuples(st.just("find"), filters()),
    st.tuples(st.just("find_sorted"), filters()),
    st.tuples(st.just("find_one"), filters()),
    st.tuples(st.just("count"), filters()),
    st.tuples(st.just("aggregate"), filters()),
    st.tuples(st.just("insert"), DOCUMENTS),
    st.tuples(st.just("update_one"), filters(), SMALL),
    st.tuples(st.just("update_many"), filters(), SMALL),
    # an upsert names its `_id` (else mongomock makes up a new ObjectId on each side)
    st.tuples(
        st.just("upsert"),
        st.builds(
            lambda v, f: {"_id": v} | {k: x for k, x in f.items() if k != "_id"},
            PLAIN_IDS.filter(lambda v: v is not None),
            filters(),
        ),
        SMALL,
    ),
    st.tuples(st.just("set_id"), filters(), PLAIN_IDS),
    st.tuples(st.just("replace_one"), filters(), SMALL),
    st.tuples(st.just("delete_one"), filters()),
    st.tuples(st.just("delete_many"), filters()),
    st.tuples(st.just("find_one_and_update"), filters(), SMALL),
    st.tuples(st.just("find_one_and_delete"), filters()),
)


def run(coll: Any, statement: tuple[Any, ...]) -> str:
    """One statement on the mongomock collection `coll`; its outcome (repr: types count)."""
    kind, query, *rest = statement
    try:
        if kind == "find":
            outcome: Any = list(coll.find(query))
        elif kind == "find_sorted":
            outcome = list(coll.find(query, {"a": 1}, sort=[("a", -1)], skip=1, limit=2))
        elif kind == "find_one":
            outcome = coll.find_one(query)
        elif kind == "count":
            outcome = coll.count_documents(query)
        elif kind == "aggregate":
            outcome = run_pipeline(coll, [{"$match": query}, {"$project": {"a": 1}}])
        elif kind == "insert":
            outcome = coll.insert_one(dict(query)).inserted_id
        elif kind in ("update_one", "update_many", "upsert"):
            method = coll.update_many if kind == "update_many" else coll.update_one
            result = method(query, {"$inc": {"a": rest[0]}}, upsert=kind == "upsert")
            outcome = {k: v for k, v in result.raw_result.items() if k != "connectionId"}
        elif kind == "set_id":
            outcome = coll.update_one(query, {"$set": {"_id": rest[0]}}).modified_count
        elif kind == "replace_one":
            outcome = coll.replace_one(query, {"a": rest[0]}).modified_count
        elif kind == "delete_one":
            outcome = coll.delete_one(query).deleted_count
        elif kind == "delete_many":
            outcome = coll.delete_many(query).deleted_count
        elif kind == "find_one_and_update":
            outcome = coll.find_one_and_update(
                query, {"$set": {"b": rest[0]}}, return_document=ReturnDocument.AFTER
            )
        else:
            outcome = coll.find_one_and_delete(query)
    except Exception as exc:  # the same error on both paths is the expected outcome
        outcome = ("error", type(exc).__name__, str(exc))
    return repr(outcome)


def stored(coll: Any) -> str:
    """The store as mongomock holds it: keys, documents, order and types."""
    return repr(list(coll._store._documents.items()))


def pair() -> tuple[Any, Any]:
    fast, slow = EmbeddedClient(fast_reads=True), EmbeddedClient(fast_reads=False)
    return fast.get_database(DB)[COLL].delegate, slow.get_database(DB)[COLL].delegate


@settings(max_examples=150, deadline=None)
@given(
    documents=st.lists(DOCUMENTS, max_size=8),
    statements=st.lists(STATEMENTS, min_size=1, max_size=12),
)
def test_lookup_and_scan_agree_on_generated_collections_filters_and_writes(
    documents, statements
) -> None:
    fast, slow = pair()
    for document in documents:
        assert run(fast, ("insert", document)) == run(slow, ("insert", document))
    assert stored(fast) == stored(slow)
    for statement in statements:
        assert run(fast, statement) == run(slow, statement), statement
        assert stored(fast) == stored(slow), statement


# -- the lookup is really taken, and only for its shape -----------------------------------


def count_tests(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many documents mongomock's scan and the lookup hand to the matcher."""
    counts = {"scan": 0, "lookup": 0}

    def spy(name: str, real: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
        def counted(filter: Any, document: Any) -> bool:
            counts[name] += 1
            return real(filter, document)

        return counted

    monkeypatch.setattr(
        mongomock_collection, "filter_applies", spy("scan", mongomock_collection.filter_applies)
    )
    monkeypatch.setattr(id_lookup, "_filter_applies", spy("lookup", id_lookup._filter_applies))
    return counts


async def filled(client: EmbeddedClient, n: int = 200) -> Any:
    coll = client.get_database(DB)[COLL]
    await coll.insert_many([{"_id": f"k{i}", "a": i % 3} for i in range(n)])
    return coll


async def every_read_by_id(coll: Any) -> list[Any]:
    """What mindstore sends by `_id`, through the async API: every kind of operation."""
    return [
        await coll.find_one({"_id": "k7"}),
        await coll.find_one({"_id": "k7", "a": 2}),
        await coll.count_documents({"_id": {"$in": ["k9", "k3", "missing"]}}),
        await (await coll.aggregate([{"$match": {"_id": "k5"}}, {"$project": {"a": 1}}])).to_list(),
        [d async for d in coll.find({"_id": {"$in": ["k9", "k3"]}}, {"_id": 1})],
        await coll.find_one_and_update({"_id": "k8"}, {"$set": {"b": 1}}),
        (
            await coll.update_one({"_id": "k8", "a": {"$gte": 0}}, {"$push": {"c": 1}})
        ).modified_count,
        (await coll.delete_one({"_id": "k4"})).deleted_count,
        await coll.distinct("a", {"_id": {"$in": ["k1", "k2"]}}),
    ]


async def test_reads_by_id_take_the_lookup_and_test_only_the_found_documents(monkeypatch) -> None:
    counts = count_tests(monkeypatch)
    fast = await filled(EmbeddedClient())
    fast_results = await every_read_by_id(fast)
    assert counts["scan"] == 0
    assert 0 < counts["lookup"] <= 20
    counts.update(scan=0, lookup=0)
    slow = await filled(EmbeddedClient(fast_reads=False))
    assert await every_read_by_id(slow) == fast_results
    # find_one stops at its match; counts, $in, updates and distinct test all 200
    assert counts["lookup"] == 0 and counts["scan"] >= 5 * 200
    assert fast_results[0] == {"_id": "k7", "a": 1} and fast_results[1] is None
    assert fast_results[2] == 2 and fast_results[4] == [{"_id": "k3"}, {"_id": "k9"}]


async def test_other_filters_are_scanned(monkeypatch) -> None:
    counts = count_tests(monkeypatch)
    coll = await filled(EmbeddedClient(), 50)
    await coll.find_one({"a": {"$gte": 1}, "_id": "k1"})  # an operator before `_id`
    await coll.find_one({"a.b": 1, "_id": "k1"})  # a dotted path before `_id`
    await coll.find_one({"_id": {"$gte": "k1"}})  # an operator
    await coll.find_one({"_id": ["k1"]})  # a list
    await coll.count_documents({"_id": {"$in": ["k1", None]}})  # None is not looked up
    assert counts["lookup"] == 0 and counts["scan"] >= 5 * 50
    await coll.find_one({"tenant": "acme", "_id": "k1", "owner": None})  # mindstore's shape
    assert counts["lookup"] == 1


async def test_the_switch_may_change_at_any_time_and_plain_mongomock_is_left_alone(
    monkeypatch,
) -> None:
    counts = count_tests(monkeypatch)
    client = EmbeddedClient(fast_reads=False)
    coll = await filled(client, 50)
    assert client.fast_reads is False
    await coll.find_one({"_id": "k1"})
    assert (counts["scan"], counts["lookup"]) == (50, 0)
    client.fast_reads = True
    await coll.find_one({"_id": "k1"})
    assert (counts["scan"], counts["lookup"]) == (50, 1)
    plain = mongomock.MongoClient()[DB][COLL]  # owned by no EmbeddedClient
    plain.insert_many([{"_id": i} for i in range(30)])
    assert plain.find_one({"_id": 3}) == {"_id": 3}
    assert (counts["scan"], counts["lookup"]) == (80, 1)


# -- order, types, errors, copies ---------------------------------------------------------


async def test_in_returns_documents_in_storage_order_like_the_scan() -> None:
    for fast in (True, False):
        coll = EmbeddedClient(fast_reads=fast).get_database(DB)[COLL]
        await coll.insert_many([{"_id": key} for key in ("a", "b", "c", "d")])
        await coll.delete_one({"_id": "a"})
        await coll.insert_one({"_id": "a"})  # now stored last
        await coll.replace_one({"_id": "c"}, {"x": 1})  # a replacement keeps its place
        found = [d async for d in coll.find({"_id": {"$in": ["a", "d", "c", "a", "zz"]}})]
        assert found == [{"_id": "c", "x": 1}, {"_id": "d"}, {"_id": "a"}], fast


async def test_numbers_of_different_types_are_one_id_and_a_string_is_another() -> None:
    coll = EmbeddedClient().get_database(DB)[COLL]
    await coll.insert_many([{"_id": 1, "v": "int"}, {"_id": "1", "v": "str"}])
    assert (await coll.find_one({"_id": 1.0}))["v"] == "int"
    assert (await coll.find_one({"_id": Int64(1)}))["v"] == "int"
    assert (await coll.find_one({"_id": "1"}))["v"] == "str"
    assert await coll.find_one({"_id": 1.5}) is None
    assert await coll.count_documents({"_id": {"$in": [1.0, "1", 1]}}) == 2


async def test_errors_are_raised_where_the_scan_raises_them() -> None:
    for fast in (True, False):
        coll = EmbeddedClient(fast_reads=fast).get_database(DB)[COLL]
        await coll.insert_many([{"_id": "a"}, {"_id": "b"}])
        bad = {"$badop": 1}
        # the found document is tested with the whole filter: the error is raised
        with pytest.raises(OperationFailure, match="unknown operator: \\$badop"):
            await coll.find_one({"_id": "a", "x": bad})
        # no document has that `_id`: the scan never reaches the bad operator either
        assert await coll.find_one({"_id": "zz", "x": bad}) is None
        # `_id` after it: the scan evaluates it on the first document
        with pytest.raises(OperationFailure, match="unknown operator"):
            await coll.find_one({"x": bad, "_id": "zz"})
        # a dotted path before `_id` can fail on a document a lookup would skip: mongomock's
        # cursor takes the IndexError for the end of the results; its count raises it
        await coll.update_one({"_id": "a"}, {"$set": {"list": []}})
        await coll.update_one({"_id": "b"}, {"$set": {"list": [1]}})
        assert await coll.find_one({"list.-1": 1, "_id": "b"}) is None
        with pytest.raises(IndexError):
            await coll.count_documents({"list.-1": 1, "_id": "b"})
        with pytest.raises(OperationFailure, match="\\$in needs an array"):
            await coll.find_one({"_id": {"$in": "a"}})


async def test_an_empty_collection_validates_the_filter_as_mongomock_does() -> None:
    """mongomock applies the filter to an empty document when the collection is empty:
    that stops at a leading `_id` (absent), and raises for what comes before it."""
    for fast in (True, False):
        coll = EmbeddedClient(fast_reads=fast).get_database(DB)[COLL]
        assert await coll.find_one({"_id": "a", "$bad": 1}) is None
        assert await coll.count_documents({"_id": {"$in": ["a"]}, "x": {"$badop": 1}}) == 0
        with pytest.raises(OperationFailure, match="unknown top level operator: \\$bad"):
            await coll.find_one({"$bad": 1, "_id": "a"})


async def test_returned_documents_are_copies() -> None:
    coll = EmbeddedClient().get_database(DB)[COLL]
    await coll.insert_one({"_id": "t", "messages": [{"id": "a"}]})
    first = await coll.find_one({"_id": "t"})
    first["messages"].append({"id": "changed by the reader"})
    raw = coll.delegate.find_one({"_id": "t"})
    raw["messages"][0]["id"] = "changed through mongomock's own find_one"
    assert await coll.find_one({"_id": "t"}) == {"_id": "t", "messages": [{"id": "a"}]}


def test_expired_documents_are_not_found() -> None:
    """A TTL index removes expired documents on every read of the store, the lookup's too."""
    fast, slow = pair()
    old = dt.datetime(2000, 1, 1)
    for coll in (fast, slow):
        coll.create_index([("at", 1)], expireAfterSeconds=60)
        coll.insert_many([{"_id": "new"}, {"_id": "old", "at": old}])  # expired last
    assert fast.find_one({"_id": "old"}) is None and slow.find_one({"_id": "old"}) is None
    assert fast.count_documents({"_id": {"$in": ["old", "new"]}}) == 1
    assert stored(fast) == stored(slow)


def test_a_store_that_held_a_tuple_id_is_always_scanned() -> None:
    """mongomock matches a plain value inside a tuple `_id` (as inside an array), which
    a lookup by key cannot see: such a store falls back to the scan for good."""
    fast, slow = pair()
    for coll in (fast, slow):
        coll.insert_one({"_id": (1, 2), "v": "tuple"})  # only mongomock's own API allows it
        coll.insert_one({"_id": 2, "v": "int"})
    for query in ({"_id": 1}, {"_id": 2}, {"_id": {"$in": [1, 3]}}):
        assert run(fast, ("find", query)) == run(slow, ("find", query))
    assert [d["v"] for d in fast.find({"_id": 2})] == ["tuple", "int"]
    assert fast._store in id_lookup._IRREGULAR and slow._store in id_lookup._IRREGULAR


def test_a_refused_change_of_a_datetime_id_leaves_a_document_that_only_a_scan_finds() -> None:
    """mongomock keys a datetime `_id` with its microseconds but stores it truncated; when
    it refuses an update of `_id` it puts the document back under the truncated value and
    the changed one stays under the old key, with the new `_id`."""
    fast, slow = pair()
    at = dt.datetime(2024, 1, 1, 0, 0, 0, 123456)
    for coll in (fast, slow):
        coll.insert_one({"_id": at})
        with pytest.raises(mongomock.WriteError):
            coll.update_one({"_id": {"$ne": "x"}}, {"$set": {"_id": "x"}})
    assert len(fast._store) == 2
    assert run(fast, ("find", {"_id": "x"})) == run(slow, ("find", {"_id": "x"})) != "[]"
    assert fast._store in id_lookup._IRREGULAR


def test_nan_is_never_looked_up() -> None:
    """NaN equals nothing, but a dict finds the same NaN object by identity."""
    fast, slow = pair()
    for coll in (fast, slow):
        coll.insert_one({"_id": NAN})
    assert fast.find_one({"_id": NAN}) is None and slow.find_one({"_id": NAN}) is None
    # mongomock's `$in` tests list membership, which finds the same object by identity
    in_nan = {"_id": {"$in": [NAN]}}
    assert fast.count_documents(in_nan) == slow.count_documents(in_nan) == 1


@pytest.mark.parametrize(
    "query, lookup",
    [
        ({"_id": "a"}, ["a"]),
        ({"_id": 1, "a": {"$gt": 0}}, [1]),
        ({"_id": {"$in": [OID_A, 2.5, True]}}, [OID_A, 2.5, True]),
        ({"_id": {"$in": []}}, []),
        ({"tenant": "acme", "owner": None, "_id": "a", "x": {"$gt": 1}}, ["a"]),
        ({"$comment": "x", "a": OID_A, "_id": {"$in": [1, 2]}}, [1, 2]),
        ({"a.b": 1, "_id": "a"}, None),
        ({"a": {"$gt": 1}, "_id": "a"}, None),
        ({"a": [1], "_id": "a"}, None),
        ({"a": re.compile("a"), "_id": "a"}, None),
        ({"$or": [{"a": 1}], "_id": "a"}, None),
        ({"$and": [{"_id": "a"}]}, None),
        ({"_id": None}, None),
        ({"_id": NAN}, None),
        ({"_id": {"k": 1}}, None),
        ({"_id": {"$in": ("a",)}}, None),
        ({"_id": {"$in": ["a"], "$ne": "b"}}, None),
        ({"_id": {"$eq": "a"}}, None),
        ({"_id": re.compile("a")}, None),
        ({"_id": dt.datetime(2024, 1, 1)}, None),
        ({}, None),
    ],
)
def test_lookup_keys_takes_plain_ids_after_nothing_but_plain_equalities(query, lookup) -> None:
    assert id_lookup.lookup_keys(query) == lookup


ORDER_KEYS = st.sampled_from(["a", "b", "c", "d", 1, 2.0, True])
ORDER_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), ORDER_KEYS),
        st.tuples(st.just("delete"), ORDER_KEYS),
        st.tuples(st.just("replace"), ORDER_KEYS),
        st.tuples(st.just("read"), st.lists(ORDER_KEYS, min_size=2, max_size=4)),
        st.tuples(st.just("drop"), st.none()),
    ),
    max_size=14,
)


@settings(max_examples=60, deadline=None)
@example(steps=[("insert", "a"), ("insert", "b"), ("read", ["b", "a"]), ("insert", "c"),
                ("read", ["c", "a"]), ("delete", "a"), ("insert", "a"), ("replace", "b"),
                ("read", ["a", "b", "c"]), ("drop", None), ("insert", "c"), ("insert", "b"),
                ("read", ["b", "c"])])  # fmt: skip
@given(steps=ORDER_STEPS)
async def test_several_keys_come_back_in_store_order_however_the_store_changed(
    steps: list[tuple[str, Any]],
) -> None:
    """`$in` of several `_id`s: the documents in the order the scan gives (keys that left
    and came back go last; a replaced document keeps its place; a dropped collection
    starts over), with the order kept as the store changes, not walked."""
    seen: list[list[Any]] = []
    for fast in (True, False):
        coll = EmbeddedClient(fast_reads=fast).get_database(DB)[COLL]
        reads: list[Any] = []
        for action, argument in steps:
            if action == "insert" and await coll.count_documents({"_id": argument}) == 0:
                await coll.insert_one({"_id": argument, "v": 0})
            elif action == "delete":
                await coll.delete_one({"_id": argument})
            elif action == "replace":
                await coll.replace_one({"_id": argument}, {"v": 1})
            elif action == "read":
                found = await coll.find({"_id": {"$in": argument}}).to_list(None)
                reads.append([(d["_id"], type(d["_id"]).__name__, d["v"]) for d in found])
            elif action == "drop":
                await coll.drop()
        seen.append(reads)
    assert seen[0] == seen[1]
