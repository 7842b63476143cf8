"""Every query served by an index: the shapes of recorded commands, the planner's rule,
the bounded scans, the documented table, and the indexes created and retired at connect.

(The suite-wide audit itself runs on every test: `portable_audit` in tests/conftest.py.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymongo import IndexModel

from index_table import (
    POINT,
    audit,
    documented,
    documented_scans,
    parse_row,
    render,
    row_key,
    served,
)
from mindstore.backends.recorder import RecordedCommand, describe_command
from mindstore.document_models import RETIRED_INDEXES, TaskDoc, bind_documents, retire_indexes
from mindstore.index_audit.allowed import BOUNDED_SCANS, BoundedScan, allowed_by, matches
from mindstore.index_audit.declared import declared_indexes, index_spec
from mindstore.index_audit.plan import ID_INDEX, IndexSpec, Outcome, serving_index
from mindstore.index_audit.shapes import NO_MATCH, QueryShape, filter_fields, shapes_of
from mindstore.store import Store


def wire(name: str, command: dict[str, Any]) -> RecordedCommand:
    """A record built the way both backends build theirs, from the command as sent."""
    return RecordedCommand(name=name, **describe_command(name, {**command, "$db": "d"}))


def shape(
    collection: str = "c",
    *,
    eq: tuple[str, ...] = (),
    ranges: tuple[str, ...] = (),
    residual: tuple[str, ...] = (),
    sort: tuple[tuple[str, int], ...] = (),
    point: bool = False,
    distinct: str | None = None,
) -> QueryShape:
    return QueryShape(
        collection,
        "find",
        frozenset(eq),
        frozenset(ranges),
        frozenset(residual),
        sort,
        point,
        distinct,
    )


def index(name: str, *keys: str | tuple[str, int], partial: tuple[str, ...] = ()) -> IndexSpec:
    pairs = tuple(k if isinstance(k, tuple) else (k, 1) for k in keys)
    return IndexSpec(name, pairs, frozenset(partial))


# ---------------------------------------------------------------- shapes of commands
def test_a_filter_is_read_as_equality_range_and_residual_fields() -> None:
    query = {
        "tenant": "a",
        "state": {"$in": ["x"]},
        "v": {"$eq": 3},
        "updated_at": {"$gt": 1, "$lt": 2},
        "messages.7.id": {"$ne": "m"},
        "$and": [{"owner": "o"}, {"created_at": {"$gte": 0}}],
        "$or": [{"t": {"$lt": 1}}, {"t": 1, "_id": {"$lt": "k"}}],
        "sub": {"k": 1},
    }
    equality, ranges, residual, point = filter_fields(query)
    assert equality == {"tenant", "state", "v", "owner", "sub"}
    assert ranges == {"updated_at", "created_at", "t", "_id"}
    assert residual == {"messages.<n>.id"}  # a position is not part of a shape
    assert point is False  # an _id inside $or bounds, it does not point
    assert filter_fields({"_id": {"$in": ["a", "b"]}, "x": 1})[3] is True
    assert filter_fields({"_id": "a"})[3] is True
    assert filter_fields({"_id": {"$gt": "a"}})[3] is False


CONDITIONS = {
    "=": st.one_of(
        st.integers(),
        st.text(max_size=3),
        st.builds(lambda v: {"$eq": v}, st.integers()),
        st.builds(lambda v: {"$in": v}, st.lists(st.integers(), max_size=3)),
    ),
    "range": st.sampled_from(
        [{"$gt": 1}, {"$lte": 2}, {"$gte": 0, "$lt": 9}, {"$in": [1], "$lt": 3}]
    ),
    "filter": st.sampled_from(
        [
            {"$ne": 1},
            {"$exists": True},
            {"$nin": [1]},
            {"$not": {"$gt": 1}},
            {"$all": [1]},
            {"$gt": 1, "$ne": 3},
        ]
    ),
}


@settings(max_examples=80, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["tenant", "owner", "a.b", "messages.3.id", "x"]),
        st.sampled_from(sorted(CONDITIONS)),
        min_size=1,
    ),
    st.data(),
)
def test_each_field_of_a_filter_lands_in_the_kind_of_its_condition(
    kinds: dict[str, str], data: st.DataObject
) -> None:
    query = {name: data.draw(CONDITIONS[kind]) for name, kind in kinds.items()}
    equality, ranges, residual, _ = filter_fields(query)
    expect = {
        kind: {name.replace(".3.", ".<n>.") for name, k in kinds.items() if k == kind}
        for kind in CONDITIONS
    }
    assert (equality, ranges, residual) == (expect["="], expect["range"], expect["filter"])
    # the same conditions inside $and read the same; inside $or every field bounds
    clauses = [{name: value} for name, value in query.items()]
    assert filter_fields({"$and": clauses})[:3] == (equality, ranges, residual)
    assert filter_fields({"$or": clauses})[:3] == (
        frozenset(),
        equality | ranges | residual,
        frozenset(),
    )


def test_every_query_a_command_carries_is_read() -> None:
    find = wire(
        "find",
        {"find": "tasks", "filter": {"tenant": "a", "_id": {"$gt": "x"}}, "sort": {"_id": 1}},
    )
    assert shapes_of(find) == [
        QueryShape("tasks", "find", frozenset({"tenant"}), frozenset({"_id"}), sort=(("_id", 1),))
    ]
    bulk = wire(
        "update",
        {
            "update": "tasks",
            "updates": [
                {"q": {"tenant": "a", "_id": "1"}, "u": {"$set": {"x": 1}}},
                {
                    "q": {"tenant": "a", "state": "s"},
                    "u": {"$set": {"x": 1}},
                    "multi": True,
                    "sort": {"updated_at": -1},
                },
            ],
        },
    )
    first, second = shapes_of(bulk)
    assert first.point and not second.point and second.sort == (("updated_at", -1),)
    delete = wire(
        "delete",
        {"delete": "payloads", "deletes": [{"q": {"tenant": "a", "task_id": "t"}, "limit": 0}]},
    )
    assert shapes_of(delete)[0].equality == {"tenant", "task_id"}
    fam = wire(
        "findAndModify",
        {
            "findAndModify": "tasks",
            "query": {"tenant": "a"},
            "sort": {"created_at": 1},
            "update": {"$set": {"x": 1}},
        },
    )
    assert shapes_of(fam)[0].sort == (("created_at", 1),)
    distinct = wire("distinct", {"distinct": "task_pages", "key": "task", "query": {"tenant": "a"}})
    assert shapes_of(distinct)[0].distinct == "task"
    assert shapes_of(wire("count", {"count": "tasks"})) == []  # metadata, no query
    assert shapes_of(wire("insert", {"insert": "tasks", "documents": [{"_id": 1}]})) == []


def test_an_aggregate_is_read_by_its_leading_matches_sort_and_lookups() -> None:
    pipeline = [
        {"$match": {"tenant": "a"}},
        {"$match": {"owner": "o"}},
        {"$sort": {"updated_at": -1}},
        {"$lookup": {"from": "task_pages", "localField": "ids", "foreignField": "_id", "as": "p"}},
        {
            "$facet": {
                "x": [
                    {
                        "$lookup": {
                            "from": "payloads",
                            "let": {},
                            "as": "y",
                            "pipeline": [{"$match": {"tenant": "a", "task_id": "t"}}],
                        }
                    }
                ]
            }
        },
    ]
    main, *lookups = shapes_of(
        wire("aggregate", {"aggregate": "tasks", "pipeline": pipeline, "cursor": {}})
    )
    assert main.equality == {"tenant", "owner"} and main.sort == (("updated_at", -1),)
    assert {(s.collection, s.command, s.point) for s in lookups} == {
        ("task_pages", "lookup", True),
        ("payloads", "lookup", False),
    }
    unmatched = shapes_of(
        wire(
            "aggregate", {"aggregate": "tasks", "pipeline": [{"$group": {"_id": 1}}], "cursor": {}}
        )
    )
    assert unmatched[0].residual == {NO_MATCH}
    assert serving_index(unmatched[0], [index("i", "tenant")]).outcome is Outcome.SCAN


# ---------------------------------------------------------------- the planner's rule
def test_a_query_by_id_is_served_by_the_id_index_whatever_else_it_names() -> None:
    verdict = serving_index(shape(eq=("_id", "tenant", "version"), residual=("x",), point=True), [])
    assert verdict.outcome is Outcome.POINT and verdict.index == ID_INDEX


def test_equality_then_sort_then_range() -> None:
    listing = index("tenant_owner_updated", "tenant", "owner", ("updated_at", -1), ("_id", -1))
    # equality prefix in any order, the sort next (or all of it reversed), a range after
    newest = shape(
        eq=("owner", "tenant"), sort=(("updated_at", -1), ("_id", -1)), ranges=("updated_at",)
    )
    assert serving_index(newest, [listing]).index == listing
    oldest = shape(eq=("owner", "tenant"), sort=(("updated_at", 1), ("_id", 1)))
    assert serving_index(oldest, [listing]).outcome is Outcome.SERVED
    mixed = shape(eq=("owner", "tenant"), sort=(("updated_at", -1), ("_id", 1)))
    assert serving_index(mixed, [listing]).outcome is Outcome.SORT
    # an equality the prefix lacks reads everything the prefix selects
    by_state = shape(eq=("owner", "tenant", "state"))
    verdict = serving_index(by_state, [listing])
    assert verdict.outcome is Outcome.SCAN and "equality on state" in verdict.problems[0]
    # a sort on a field fixed by an equality is no sort
    assert serving_index(shape(eq=("tenant", "owner"), sort=(("owner", 1),)), [listing]).ok


def test_a_range_must_bound_the_key_after_the_prefix_or_follow_the_sort() -> None:
    by_owner = index("tenant_owner_id", "tenant", "owner", "_id")
    by_id = index("tenant_1__id_1", "tenant", "_id")
    keyset = shape(eq=("tenant",), ranges=("_id",))
    assert serving_index(keyset, [by_owner]).outcome is Outcome.SCAN  # owner lies between
    assert serving_index(keyset, [by_owner, by_id]).index == by_id
    # a filter on a field outside the index fetches documents only to drop them
    verdict = serving_index(shape(eq=("tenant",), ranges=("_id",), residual=("kind",)), [by_id])
    assert verdict.outcome is Outcome.SCAN and "kind" in verdict.problems[0]


def test_a_partial_index_serves_only_queries_that_name_its_filter() -> None:
    forks = index("tenant_forks", "tenant", "owner", partial=("metadata.mindstore_fork",))
    repair = shape(eq=("tenant",), residual=("metadata.mindstore_fork",))
    assert serving_index(repair, [forks]).index == forks
    assert serving_index(shape(eq=("tenant", "owner")), [forks]).outcome is Outcome.SCAN
    paged = index("tenant_paged", "tenant", "pages", partial=("pages",))
    assert serving_index(shape(eq=("tenant",), ranges=("pages",)), [paged]).ok


def test_a_distinct_without_a_filter_needs_an_index_leading_with_its_field() -> None:
    tenants = shape(distinct="tenant")
    assert serving_index(tenants, [index("tenant_id", "tenant", "_id")]).ok
    assert serving_index(tenants, []).outcome is Outcome.SCAN
    assert serving_index(shape(), [index("i", "tenant")]).outcome is Outcome.SCAN  # no filter
    # with a filter, the field must follow the equality prefix
    tasks_of = shape(eq=("tenant",), distinct="task")
    assert (
        serving_index(tasks_of, [index("tenant_1__id_1", "tenant", "_id")]).outcome is Outcome.SORT
    )
    assert serving_index(tasks_of, [index("t", "tenant", "task", "page")]).ok


def test_reading_a_whole_collection_in_index_order_reads_only_what_it_asks() -> None:
    everything = shape(sort=(("_id", 1),))
    assert serving_index(everything, []).index == ID_INDEX
    since = shape(sort=(("_id", 1),), ranges=("updated_at",))
    assert serving_index(since, []).outcome is Outcome.SCAN


FIELDS = st.sampled_from(
    ["tenant", "owner", "state", "task", "page", "start", "updated_at", "kind"]
)


@st.composite
def fitting(draw: st.DrawFn) -> tuple[IndexSpec, QueryShape]:
    """An index, and a query built to fit it: its equality prefix (shuffled), its next keys
    as the sort (as declared or all reversed), and a range on the key after them."""
    fields = draw(st.lists(FIELDS, min_size=1, max_size=6, unique=True))
    directions = draw(
        st.lists(st.sampled_from([1, -1]), min_size=len(fields), max_size=len(fields))
    )
    keys = tuple(zip(fields, directions, strict=True))
    prefix = draw(st.integers(1, len(keys)))
    sort_len = draw(st.integers(0, len(keys) - prefix))
    flip = draw(st.sampled_from([1, -1]))
    sort = tuple((f, d * flip) for f, d in keys[prefix : prefix + sort_len])
    after = keys[prefix + sort_len :]
    ranges = (after[0][0],) if after and draw(st.booleans()) else ()
    equality = draw(st.permutations([f for f, _ in keys[:prefix]]))
    return IndexSpec("fit", keys), shape(eq=tuple(equality), sort=sort, ranges=ranges)


@settings(max_examples=60, deadline=None)
@given(fitting(), st.lists(st.lists(FIELDS, min_size=1, max_size=4, unique=True), max_size=3))
def test_a_query_built_to_fit_an_index_is_served_and_more_indexes_never_hurt(
    case: tuple[IndexSpec, QueryShape], others: list[list[str]]
) -> None:
    fit, query = case
    assert serving_index(query, [fit]).ok
    more = [IndexSpec(f"other{i}", tuple((f, 1) for f in keys)) for i, keys in enumerate(others)]
    assert serving_index(query, [*more, fit]).ok


@settings(max_examples=60, deadline=None)
@given(fitting(), st.lists(st.lists(FIELDS, min_size=1, max_size=4, unique=True), max_size=3))
def test_an_equality_on_a_field_no_index_holds_is_never_served(
    case: tuple[IndexSpec, QueryShape], others: list[list[str]]
) -> None:
    fit, query = case
    indexes = [fit, *(IndexSpec(f"o{i}", tuple((f, 1) for f in k)) for i, k in enumerate(others))]
    widened = QueryShape(
        query.collection,
        query.command,
        query.equality | {"unindexed"},
        query.ranges,
        query.residual,
        query.sort,
    )
    verdict = serving_index(widened, indexes)
    assert not verdict.ok and any("unindexed" in p for p in verdict.problems)


@settings(max_examples=60, deadline=None)
@given(fitting())
def test_a_row_of_the_table_reads_back_as_its_shape(case: tuple[IndexSpec, QueryShape]) -> None:
    _, query = case
    collection, text = row_key(query)
    back = parse_row(collection, text)
    assert (back.equality, back.ranges, back.residual, back.sort) == (
        query.equality,
        query.ranges,
        query.residual,
        query.sort,
    )


# ---------------------------------------------------------------- bounded scans
def test_a_bounded_scan_covers_its_family_only() -> None:
    pages = next(e for e in BOUNDED_SCANS if e.name == "a task's pages by _id")
    erase = shape("task_pages", eq=("tenant", "task"), sort=(("_id", 1),))
    assert pages.covers(erase) and allowed_by(erase) is not None
    assert not pages.covers(shape("task_pages", eq=("tenant",), sort=(("_id", 1),)))  # the tenant's
    assert not pages.covers(shape("tasks", eq=("tenant", "task"), sort=(("_id", 1),)))
    metadata = BoundedScan(
        "m",
        "c",
        frozenset({"tenant"}),
        "r",
        "b",
        optional=frozenset({"md.*"}),
        filters=frozenset({"_id"}),
        needs=frozenset({"_id"}),
    )
    assert metadata.covers(shape(eq=("tenant", "md.step", "md.source"), ranges=("_id",)))
    assert not metadata.covers(shape(eq=("tenant", "md.step")))  # needs the thread's range
    assert not metadata.covers(shape(eq=("tenant", "mdx"), ranges=("_id",)))
    assert matches("md.*", "md.a.b") and not matches("md.*", "md") and matches("x", "x")


def test_every_bounded_scan_says_why_and_how_much_and_is_documented() -> None:
    names = [entry.name for entry in BOUNDED_SCANS]
    assert len(set(names)) == len(names)
    for entry in BOUNDED_SCANS:
        assert entry.reason.strip() and entry.bound.strip(), entry.name
    listed = documented_scans()
    assert set(listed) == set(names), "docs/operations.md: rewrite with tests/index_table.py"
    for entry in BOUNDED_SCANS:
        collection, query, reason, bound = listed[entry.name]
        assert (query, reason, bound) == (entry.describe(), entry.reason, entry.bound), entry.name
        assert collection == (entry.collection or "every collection")


def test_each_documented_query_is_planned_as_the_table_says() -> None:
    rows = documented()
    assert rows, "docs/operations.md lists no query shape"
    checker = audit()
    for (collection, query), (_, index_cell) in rows.items():
        finding = checker.check(parse_row(collection, query))
        assert finding.ok, f"{collection}: {query} is documented but no index serves it"
        assert index_cell == served(finding), f"{collection}: {query}"
    # each collection's queries by _id are one row
    assert all(query != POINT or collection for collection, query in rows)


def test_rendering_merges_commands_and_points_into_one_row_each() -> None:
    shapes = [
        QueryShape("tasks", "find", frozenset({"_id", "tenant"}), point=True),
        QueryShape("tasks", "update", frozenset({"_id", "tenant", "version"}), point=True),
        QueryShape("tasks", "aggregate", frozenset({"tenant"})),
        QueryShape("tasks", "find", frozenset({"tenant"})),
    ]
    lines = render(shapes).splitlines()[2:]
    assert len(lines) == 2
    assert lines[0].startswith(f"| `tasks` | `{POINT}` | find, update | `_id_`")
    assert "| aggregate, find |" in lines[1]


# ---------------------------------------------------------------- declared and created
def test_declared_indexes_are_read_from_the_models() -> None:
    spec = index_spec(
        IndexModel(
            [("tenant", 1), ("pages", -1)], name="p", partialFilterExpression={"pages": {"$gt": 0}}
        )
    )
    assert spec == IndexSpec("p", (("tenant", 1), ("pages", -1)), frozenset({"pages"}))
    declared = declared_indexes([TaskDoc])
    assert declared["tasks"][0] == ID_INDEX
    names = {i.name: i for i in declared["tasks"]}
    # tasks.list(state=...) sorts by (updated_at, _id): its index holds both
    assert names["tenant_state_updated_id"].fields == ("tenant", "state", "updated_at", "_id")


async def test_list_by_state_is_served_with_its_sort_and_was_not_before(store: Store) -> None:
    acme = store.scoped("acme")
    for _ in range(3):
        await acme.tasks.create()
    with store.backend.recorder.capture(payloads=True) as log:
        await acme.tasks.list(state="running", limit=2)
    (query,) = [s for c in log for s in shapes_of(c) if s.collection == "tasks"]
    assert query.sort == (("updated_at", -1), ("_id", -1))
    checker = audit()
    assert checker.check(query).verdict.index.name == "tenant_state_updated_id"
    before = [i for i in checker.indexes["tasks"] if i.name != "tenant_state_updated_id"]
    before.append(index("tenant_state_updated", "tenant", "state", ("updated_at", -1)))
    assert serving_index(query, before).outcome is Outcome.SORT


async def test_connect_migrates_an_existing_database_once(store: Store) -> None:
    """An existing database gets the new indexes and loses the ones they replace; a second
    run changes nothing; an index of a retired name with other keys is not ours."""
    db = store.database
    for collection, retired in RETIRED_INDEXES.items():
        for name, keys in retired.items():
            if collection != "agents":
                await db[collection].create_index(list(keys), name=name)
    await db["tasks"].drop_index("tenant_1__id_1")
    await db["agents"].drop_index("tenant_owner_id")
    await db["agents"].create_index([("owner", 1)], name="tenant_owner")  # someone else's
    await bind_documents(db)
    for model in (TaskDoc,):
        names = set(await db[model.Settings.name].index_information())
        assert {i.document["name"] for i in model.Settings.indexes} <= names
    for collection, retired in RETIRED_INDEXES.items():
        present = set(await db[collection].index_information())
        left = set(retired) & present
        assert left == ({"tenant_owner"} if collection == "agents" else set()), collection
    assert "tenant_owner_id" in await db["agents"].index_information()
    assert await retire_indexes(db) == []  # idempotent
    before = {c: await db[c].index_information() for c in RETIRED_INDEXES}
    await bind_documents(db)
    assert {c: await db[c].index_information() for c in RETIRED_INDEXES} == before


async def test_a_collection_sharded_before_connect_keeps_its_shard_key_index(store: Store) -> None:
    """`shardCollection` creates `tenant_1__id_1`; connect declares the same name and keys,
    so it finds the index present instead of failing on a second name for it."""
    db = store.database
    await db["payloads"].drop_index("tenant_1__id_1")
    await db["payloads"].create_index([("tenant", 1), ("_id", 1)])  # as shardCollection names it
    await bind_documents(db)
    info = await db["payloads"].index_information()
    assert info["tenant_1__id_1"]["key"] == [("tenant", 1), ("_id", 1)]


@pytest.mark.parametrize("drop", ["tenant_1__id_1", "tenant_task_page"])
async def test_the_audit_fails_a_query_whose_index_is_gone(store: Store, drop: str) -> None:
    """What the suite-wide audit would say if an index were not declared: a backup of one
    tenant, or a range read of a paged task, is then unserved."""
    checker = audit()
    collection = "tasks" if drop == "tenant_1__id_1" else "task_pages"
    query = (
        shape(collection, eq=("tenant",), sort=(("_id", 1),))
        if drop == "tenant_1__id_1"
        else shape(collection, eq=("tenant", "task"), ranges=("page", "start", "end"))
    )
    assert checker.check(query).ok
    without = [i for i in checker.indexes[collection] if i.name != drop]
    assert not serving_index(query, without).ok
    assert allowed_by(query) is None


async def test_every_listing_and_tree_read_of_a_view_is_served_or_bounded(store: Store) -> None:
    """The reads whose filters a caller combines: `tasks.list` with each mix of owner,
    state, cursor and time, and the dialog tree of a tenant view and of an owner's. A
    test that combines them at random (tests/test_hostile_inputs.py) then meets only
    shapes the table lists; the suite-wide audit checks each one sent here."""

    seen: list[QueryShape] = []
    for owner in (None, "alice"):
        view = store.scoped("acme", owner=owner)
        root = await view.tasks.create(owner="alice")
        await view.tasks.add_human_message(root.id, "hi")
        await view.dialogs.fork(root.id, owner="alice")
        with store.backend.recorder.capture(payloads=True) as log:
            for list_owner in (None, "alice"):
                for state in (None, "running"):
                    first = await view.tasks.list(owner=list_owner, state=state, limit=1)
                    assert first.next_cursor is not None
                    await view.tasks.list(
                        owner=list_owner, state=state, limit=1, cursor=first.next_cursor
                    )
                    await view.tasks.list(
                        owner=list_owner,
                        state=state,
                        updated_after=datetime(2000, 1, 1, tzinfo=UTC),
                    )
            await view.dialogs.children(root.id)
            await view.dialogs.subtree_ids(root.id)
            await view.dialogs.tree_json(root.id)
            await view.dialogs.repair()
        seen += [s for c in log for s in shapes_of(c)]
    checker = audit()
    assert all(checker.check(s).ok for s in seen)
    listings = {s.equality | s.ranges for s in seen if s.collection == "tasks" and s.sort}
    assert len(listings) >= 12  # {owner, state} x {first page, cursor, updated_after}
