"""The embedded backend's query matcher and finds (backends/embedded/matching.py, finds.py)
against mongomock's own: the same answers and errors on generated filters and documents,
and the same returned documents (as a driver hands them over) for generated finds."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import re
from collections.abc import Callable, Iterator
from typing import Any

import bson
import mongomock
from bson import Int64, ObjectId
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mongomock import aggregate, filtering

from mindstore.backends.embedded import matching
from mindstore.backends.embedded.codec import as_returned
from mindstore.backends.embedded.finds import find_documents
from mindstore.backends.embedded.pipeline import run_pipeline

ORIGINAL = matching.ORIGINALS


@contextlib.contextmanager
def mongomocks_own() -> Iterator[None]:
    """mongomock's own matcher for the block (its recursion included)."""
    replaced = (filtering._Filterer.apply, filtering._iter_key_candidates_sublist)
    filtering._Filterer.apply = ORIGINAL["apply"]
    filtering._iter_key_candidates_sublist = ORIGINAL["_iter_key_candidates_sublist"]
    try:
        yield
    finally:
        filtering._Filterer.apply, filtering._iter_key_candidates_sublist = replaced


def outcome(run: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", run()
    except Exception as error:
        return type(error).__name__, repr(error.args)


OID = ObjectId(b"a" * 12)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(0, 3), st.sampled_from([1.0, 2.5, float("nan")]),
    st.sampled_from(["a", "b", ""]), st.just(Int64(2)), st.just(OID), st.just(str(OID)),
    st.just(dt.datetime(2024, 1, 1)),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["id", "k", "x"]), inner, max_size=2),
    ),
    max_leaves=6,
)
DOCUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "a": VALUES, "b": VALUES, "id": SCALARS,
        "messages": st.lists(st.one_of(
            st.fixed_dictionaries({}, optional={"id": VALUES, "k": VALUES}), SCALARS),
            max_size=4),
    },
)  # fmt: skip
KEYS = st.sampled_from(
    ["a", "b", "id", "messages", "messages.id", "messages.k", "messages.0", "messages.1.id",
     "messages.id.x", "a.k", "a.0", "a.-1", "missing"]
)  # fmt: skip
LISTED = st.lists(st.one_of(SCALARS, st.just([1]), st.just({"k": 1}), st.just(re.compile("^a"))),
                  max_size=10)  # a set from 8 values  # fmt: skip
EIGHT = ["p", "q", "r", "s", "t", "u", "v", "w"]  # the matcher looks a list this long up in a set
OPERATORS = st.one_of(
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$in", "$nin"]), LISTED),
    st.builds(lambda op, v: {op: v}, st.sampled_from(["$in", "$nin"]), SCALARS),  # not a list
    st.builds(lambda op, v: {op: v},
              st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), VALUES),
    st.builds(lambda v: {"$exists": v}, st.booleans()),
    st.builds(lambda v: {"$size": v}, st.integers(0, 2)),
    st.builds(lambda v: {"$not": {"$in": v}}, LISTED),
    st.builds(lambda v: {"$all": v}, st.lists(SCALARS, max_size=2)),
    st.builds(lambda v: {"$elemMatch": {"id": v}}, SCALARS),
    st.just({"$regex": "^a", "$options": "i"}),
    st.just({"$type": "string"}),
    st.just({"$badop": 1}),
    st.just({"$bitsAllSet": [0]}),
    st.just({"$near": 1}),
    st.builds(lambda a, b: {"$in": a, "$ne": b}, LISTED, SCALARS),
)  # fmt: skip
CONDITIONS = st.one_of(
    st.builds(lambda k, v: {k: v}, KEYS, st.one_of(OPERATORS, VALUES)),
    st.builds(lambda k: {k: re.compile("^a")}, KEYS),
    st.just({"$comment": "why"}),
    st.just({"$unknown": 1}),
    st.just({"$where": "1"}),
)
FILTERS = st.recursive(
    st.lists(CONDITIONS, max_size=3).map(lambda cs: {k: v for c in cs for k, v in c.items()}),
    lambda inner: st.builds(
        lambda op, qs: {op: qs},
        st.sampled_from(["$and", "$or", "$nor"]),
        st.lists(inner, max_size=2),
    ),
    max_leaves=4,
)


@settings(max_examples=200, deadline=None)
@example(
    search={"messages.id": {"$in": [1, "a", None, *EIGHT]}}, document={"messages": [{"k": 1}, 3]}
)
@example(search={"messages.id": {"$nin": ["a", *EIGHT]}}, document={"messages": [{"id": ["a"]}]})
@example(search={"a": {"$in": [1, "a", *EIGHT]}}, document={"a": [[1], {"k": 1}, 2]})  # unhashable
@example(
    search={"a": {"$in": [True, 2.0, *EIGHT]}}, document={"a": [1, Int64(2)]}
)  # equal, not alike
@example(search={"a": {"$in": [1], "$ne": 1}}, document={"a": 1})  # every operator holds
@example(search={"a": {"$in": [None, 2]}}, document={})  # a missing value is None
@example(search={"a": {"$nin": [None]}}, document={"b": 1})
@example(search={"a": {"$in": [[1], 3]}}, document={"a": [[1], 2]})  # a list held whole
@example(search={"a": {"$in": [1, 2]}}, document={"a": 2})  # any value of the list
@example(search={"a": {"$in": [2, "b"]}}, document={"a": [1, 2]})  # any value of an array
@example(search={"a": {"$in": [re.compile("^a"), 5]}}, document={"a": "ab"})  # a regex listed
@example(search={"a": {"$nin": [re.compile("^a")]}}, document={"a": ["b", "a"]})
@given(search=FILTERS, document=DOCUMENTS)
def test_filters_match_as_mongomocks_own(search: dict[str, Any], document: dict[str, Any]) -> None:
    def run() -> Any:
        return bool(filtering.filter_applies(search, document))

    with mongomocks_own():
        expected = outcome(run)
    assert outcome(run) == expected


@settings(max_examples=100, deadline=None)
@given(key=KEYS, document=DOCUMENTS)
def test_paths_reach_the_values_mongomock_reaches(key: str, document: dict[str, Any]) -> None:
    def run() -> Any:
        return repr(filtering.iter_key_candidates(key, document))

    with mongomocks_own():
        expected = outcome(run)
    assert outcome(run) == expected


PROJECTIONS = st.one_of(
    st.none(), st.just({"a": 1}), st.just({"messages": 0}), st.just({"_id": 0, "b": 1}),
    st.just({"messages": {"$slice": -1}, "a": 1}),
)  # fmt: skip
SORTS = st.one_of(st.none(), st.just([("a", 1)]), st.just([("_id", -1)]),
                  st.just([("$natural", -1)]), st.just([("$bad", 1)]))  # fmt: skip


@settings(max_examples=60, deadline=None)
@example(
    documents=[{"list": []}], search={"list.-1": 1}, projection=None, sort=None, skip=0, limit=0
)  # mongomock's cursor takes the IndexError for the end of the results
@given(
    documents=st.lists(DOCUMENTS, max_size=4),
    search=FILTERS,
    projection=PROJECTIONS,
    sort=SORTS,
    skip=st.integers(0, 2),
    limit=st.integers(0, 2),
)
def test_finds_return_what_mongomocks_find_returns(
    documents: list[dict[str, Any]], search: dict[str, Any], projection: Any, sort: Any,
    skip: int, limit: int,
) -> None:  # fmt: skip
    collection = mongomock.MongoClient(tz_aware=True).db.probe
    for number, document in enumerate(documents):
        collection.insert_one({"_id": number, **document})

    def found(run: Callable[[], list[dict[str, Any]]]) -> Any:
        return outcome(lambda: [bson.encode(as_returned(d)[0]) for d in run()])  # NaN == NaN

    expected = found(lambda: list(collection.find(
        search, None if projection is None else dict(projection), skip=skip, limit=limit,
        sort=sort)))  # fmt: skip
    stored_before = [bson.encode(d) for d in collection.find()]
    assert found(lambda: find_documents(
        collection, search, None if projection is None else dict(projection), skip, limit, sort,
    )) == expected  # fmt: skip
    assert [bson.encode(d) for d in collection.find()] == stored_before


VALUE_PROJECTIONS = st.one_of(
    st.just({"_id": 0, "a": 1, "tail": {"$slice": ["$messages", -2]}}),
    st.just({"head": {"$slice": ["$messages", 1]}, "n": {"$size": "$messages"}}),
    st.just({"a": 0}),
    st.just({"x": {"$slice": ["$a", 1, 1]}}),
    st.just({"x": {"$size": "$missing"}}),
    st.just({"x": {"$concat": ["$a"]}}),  # not a value projection: mongomock's path
)


@settings(max_examples=60, deadline=None)
@example(
    documents=[],
    search={"a": {"$in": dt.datetime(2024, 1, 1)}},
    projection={"_id": 0, "a": 1, "tail": {"$slice": ["$messages", -2]}},
)  # found in CI: a bad filter over no document was refused by find, not by the aggregate
@given(documents=st.lists(DOCUMENTS, max_size=3), search=FILTERS, projection=VALUE_PROJECTIONS)
def test_a_projection_of_stored_values_gives_what_mongomocks_aggregate_gives(
    documents: list[dict[str, Any]], search: dict[str, Any], projection: dict[str, Any]
) -> None:
    """`tasks.ends()`'s shape, `$match` then a `$project` of slices, over stored documents:
    what the backend's pipeline gave when it copied them first."""
    collection = mongomock.MongoClient(tz_aware=True).db.probe
    for number, document in enumerate(documents):
        collection.insert_one({"_id": number, **document})
    stages = [{"$match": search}, {"$project": projection}]
    stored_before = [bson.encode(d) for d in collection.find()]

    def run(pipeline: Callable[[], Any]) -> Any:
        return outcome(lambda: [bson.encode(as_returned(d)[0]) for d in pipeline()])

    def before() -> Any:  # run_pipeline before: the `$match` as a find, then mongomock's stage
        found = list(collection.find(copy.deepcopy(search)))
        return list(aggregate.process_pipeline(found, collection.database, stages[1:], None))

    expected = run(before)
    assert run(lambda: run_pipeline(collection, copy.deepcopy(stages))) == expected
    assert [bson.encode(d) for d in collection.find()] == stored_before
