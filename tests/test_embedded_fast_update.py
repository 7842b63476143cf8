"""The embedded backend's fast update path against mongomock's own update.

`EmbeddedClient(fast_updates=True)` runs updates of mindstore's shape without copying the
document (`backends/embedded/fast_update.py`, with the guard index of `guard_index.py`);
`fast_updates=False` runs every update mongomock's way. Both must give the same results,
errors and stored documents (bytes, key order and types included), for generated documents
and statements, mixed with every other kind of write that could leave an index stale.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pymongo import IndexModel, UpdateOne, monitoring
from pymongo.errors import DuplicateKeyError

from mindstore.backends import EmbeddedClient
from mindstore.backends.embedded import fast_update as fast_module
from mindstore.backends.embedded import guard_index
from mindstore.backends.embedded import writes as writes_module

DB = "fast_update_test"
COLL = "probe"  # not one of mindstore's collections: the portable audit leaves it alone

# -- generated documents and statements ---------------------------------------------------


def mostly(
    common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int = 5
) -> st.SearchStrategy[Any]:
    """`common`, and `rare` about once in `one_in` draws (not at the ends of the range,
    which hypothesis draws more often)."""
    return st.integers(1, one_in).flatmap(lambda n: rare if n == 2 else common)


IDS = st.sampled_from(["a", "b", "c", "d", "e"])
DATES = st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2100, 1, 1))
SCALARS = st.one_of(
    st.integers(-3, 3),
    st.integers(2**40, 2**41),
    st.floats(allow_infinity=False, width=32),
    st.text(alphabet="abc", max_size=2),
    st.none(),
    st.booleans(),
    DATES,
)
PARTS = st.lists(st.fixed_dictionaries({}, optional={"text": SCALARS}), max_size=2)
MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "id": mostly(IDS, st.one_of(st.lists(IDS, max_size=2), st.integers(0, 2)), 4),
        "text": SCALARS,
        "parts": PARTS,
    },
)
ELEMENT = mostly(MESSAGE, st.one_of(st.text(alphabet="ab", max_size=1), st.lists(IDS)), 6)
VALUES = st.one_of(
    SCALARS, MESSAGE, st.lists(SCALARS, max_size=2), st.fixed_dictionaries({"c": SCALARS})
)


def document(key: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "_id": st.just(key),
            "tenant": st.sampled_from(["acme", "acme", "other"]),
            "version": st.sampled_from([0, 0, 1]),
            "messages": st.lists(ELEMENT, max_size=8),
        },
        optional={
            "meta": st.fixed_dictionaries(
                {"a": SCALARS, "b": st.fixed_dictionaries({"c": SCALARS})}
            )
        },
    )


#: Paths of the fast shape (whether they apply depends on the document: an index past the
#: end, a path through a scalar or $inc of a string still go mongomock's way)...
FIELD_PATHS = st.sampled_from(
    [
        "version",
        "tenant",
        "new",
        "meta.a",
        "meta.b.c",
        "meta.z.y",
        "meta",
        "messages.0.id",
        "messages.1.id",
        "messages.2.text",
        "messages.0.parts.0.text",
        "messages.1.id.deep",
    ]
)
ELEMENT_PATHS = st.builds("messages.{}".format, st.integers(0, 9))  # only $set can use these
#: ...and paths never of the fast shape
ODD_PATHS = st.sampled_from(
    ["messages", "messages.01", "messages.x", "version.x", "messages.$.id", "a..b"]
)
PATHS = {
    "$set": mostly(st.one_of(FIELD_PATHS, ELEMENT_PATHS), ODD_PATHS, 8),
    "$unset": mostly(FIELD_PATHS, st.one_of(ELEMENT_PATHS, ODD_PATHS), 6),
    "$inc": mostly(FIELD_PATHS, st.one_of(ELEMENT_PATHS, ODD_PATHS), 6),
}
INC = mostly(
    st.one_of(st.integers(-2, 2), st.floats(-2, 2), st.integers(2**40, 2**41)), st.just("x"), 8
)
GUARD = st.one_of(
    st.builds(lambda s: {"$ne": s}, IDS),
    st.builds(lambda ids: {"$nin": ids}, st.lists(IDS, min_size=1, max_size=3)),
)
FAST_FILTER = st.fixed_dictionaries(
    {"_id": st.sampled_from(["t1", "t1", "t1", "t1", "t2", "zz"])},
    optional={
        "tenant": st.sampled_from(["acme", "acme", "acme", "other"]),
        "version": st.sampled_from([0, 0, 0, 1]),
        "messages.id": GUARD,
    },
)
PATCH_FILTER = st.tuples(FAST_FILTER, IDS).map(lambda t: {**t[0], "messages.0.id": t[1]})
ODD_FILTER = st.just({"_id": "t1", "version": {"$gte": 1}})  # not the fast shape
FILTER = mostly(FAST_FILTER, st.one_of(PATCH_FILTER, ODD_FILTER), 5)


def overlaps(path: str, others: list[str]) -> bool:
    return any(p == path or p.startswith(path + ".") or path.startswith(p + ".") for p in others)


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    """$set/$unset/$inc of 1-3 paths; overlapping paths (never of the fast shape) are rare."""
    update: dict[str, Any] = {}
    used: list[str] = []
    operators = draw(
        st.lists(st.sampled_from(["$set", "$unset", "$inc"]), min_size=1, max_size=3, unique=True)
    )
    for operator in operators:
        value = {"$set": VALUES, "$unset": st.just(""), "$inc": INC}[operator]
        fields: dict[str, Any] = {}
        for path in draw(st.lists(PATHS[operator], min_size=1, max_size=2, unique=True)):
            if overlaps(path, used) and draw(st.integers(1, 8)) != 2:
                continue
            used.append(path)
            fields[path] = draw(value)
        if fields:
            update[operator] = fields
    return update or {"$set": {"new": 1}}


UPDATE = st.tuples(st.just("update"), FILTER, updates(), st.just(False), st.just(False))
STATEMENTS = mostly(
    UPDATE,
    st.one_of(
        st.tuples(
            st.just("update"), FILTER, updates(), st.booleans(), st.booleans()
        ),  # upsert, many
        st.tuples(st.just("bulk"), FILTER, updates()),
        st.tuples(st.just("push"), IDS),  # mongomock's own update, straight on its collection
        st.tuples(st.just("find_and_modify"), IDS),
        st.tuples(st.just("replace"), document("t1")),
        st.tuples(st.just("reinsert"), document("t1")),
    ),
    3,
)


async def run_statement(client: EmbeddedClient, statement: tuple[Any, ...]) -> Any:
    """One statement on `client`; its outcome with what depends on the client left out."""
    coll = client.get_database(DB)[COLL]
    kind = statement[0]
    try:
        if kind == "update":
            _, query, update, upsert, multi = statement
            method = coll.update_many if multi else coll.update_one
            result = await method(query, update, upsert=upsert)
            raw = {k: v for k, v in result.raw_result.items() if k != "connectionId"}
            return (result.matched_count, result.modified_count, result.upserted_id, raw)
        if kind == "bulk":
            bulk = await coll.bulk_write([UpdateOne(statement[1], statement[2])])
            return (bulk.matched_count, bulk.modified_count)
        if kind == "push":
            result = coll.delegate.update_one(
                {"_id": "t1"}, {"$push": {"messages": {"id": statement[1]}}}
            )
            return result.modified_count
        if kind == "find_and_modify":
            return await coll.find_one_and_update(
                {"_id": "t1"}, {"$set": {"messages.0.id": statement[1]}}
            )
        if kind == "replace":
            return (await coll.replace_one({"_id": "t1"}, statement[1])).modified_count
        await coll.delete_one({"_id": "t1"})
        return (await coll.insert_one(dict(statement[1]))).inserted_id
    except Exception as exc:  # the same error on both paths is the expected outcome
        return ("error", type(exc).__name__, str(exc))


def stored(client: EmbeddedClient) -> list[tuple[Any, Any]]:
    """Every stored document as BSON (types and key order count), in storage order."""
    documents = client.get_database(DB)[COLL].delegate._store.documents
    out = []
    for doc in documents:
        try:
            out.append((doc["_id"], bson.encode(doc)))
        except Exception:  # what mongomock left half-updated after an error: compare repr
            out.append((doc["_id"], repr(doc)))
    return out


def comparable(outcome: Any) -> Any:
    """An outcome where NaN equals NaN, types and key order still count: a returned document
    as BSON (as `stored` compares documents), anything else by its repr."""
    if isinstance(outcome, dict):
        return bson.encode(outcome)
    return repr(outcome)


async def both(docs: list[dict[str, Any]]) -> tuple[EmbeddedClient, EmbeddedClient]:
    clients = EmbeddedClient(fast_updates=True), EmbeddedClient(fast_updates=False)
    for client in clients:
        await client.get_database(DB)[COLL].insert_many([dict(d) for d in docs])
    return clients


@pytest.fixture(params=["indexed", "scanned"])
def guard_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Guards answered by the index (every array indexed) or by scanning (none is)."""
    monkeypatch.setattr(guard_index, "MIN_LENGTH", 0 if request.param == "indexed" else 10**9)
    return str(request.param)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    t1=document("t1"), t2=document("t2"), statements=st.lists(STATEMENTS, min_size=1, max_size=8)
)
def test_fast_path_and_mongomock_agree_on_generated_updates(guard_mode, t1, t2, statements) -> None:
    async def scenario() -> None:
        fast, slow = await both([t1, t2])
        assert stored(fast) == stored(slow)
        for statement in statements:
            outcome = await run_statement(fast, statement)
            assert comparable(outcome) == comparable(await run_statement(slow, statement)), (
                statement
            )
            assert stored(fast) == stored(slow), statement

    asyncio.run(scenario())


# -- the fast path is really taken, and only for its shape --------------------------------


def count_fast(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Spy on the fast path: one entry per call, True when it handled the statement."""
    calls: list[bool] = []
    real = fast_module.fast_update

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(writes_module, "fast_update", spy)
    return calls


async def test_mindstore_shaped_updates_take_the_fast_path(monkeypatch) -> None:
    calls = count_fast(monkeypatch)
    client = EmbeddedClient()
    coll = client.get_database(DB)[COLL]
    await coll.insert_one({"_id": "t", "version": 0, "messages": []})
    for n in range(3):
        query = {"_id": "t", "version": n, "messages.id": {"$ne": f"m{n}"}}
        update = {"$set": {f"messages.{n}": {"id": f"m{n}"}, "version": n + 1}, "$inc": {"seq": 1}}
        assert (await coll.update_one(query, update)).modified_count == 1
    assert calls == [True, True, True]
    # a lost race is answered by the fast path too (matched 0, nothing changed)
    lost = await coll.update_one({"_id": "t", "version": 0}, {"$set": {"x": 1}})
    assert (lost.matched_count, calls[-1]) == (0, True)
    # not the shape: a $push, an operator filter, a positional path -> mongomock's own update
    await coll.update_one({"_id": "t"}, {"$push": {"messages": {"id": "p"}}})
    await coll.update_one({"_id": "t", "version": {"$gte": 1}}, {"$set": {"y": 1}})
    await coll.update_one({"_id": "t", "messages.id": "p"}, {"$set": {"messages.$.seen": True}})
    assert calls[-3:] == [False, False, False]
    doc = await coll.find_one({"_id": "t"})
    assert [m["id"] for m in doc["messages"]] == ["m0", "m1", "m2", "p"]
    assert doc["messages"][3]["seen"] is True and doc["seq"] == 3 and doc["y"] == 1


async def test_switched_off_every_update_runs_mongomock_s_way(monkeypatch) -> None:
    calls = count_fast(monkeypatch)
    client = EmbeddedClient(fast_updates=False)
    coll = client.get_database(DB)[COLL]
    await coll.insert_one({"_id": "t", "messages": []})
    await coll.update_one({"_id": "t"}, {"$set": {"messages.0": {"id": "a"}}})
    client.fast_updates = True  # the switch may change at any time
    await coll.update_one({"_id": "t"}, {"$set": {"messages.1": {"id": "b"}}})
    assert calls == [True]


class KeepCommands(monitoring.CommandListener):
    """A listener that keeps every command it is shown (and could change it later)."""

    def __init__(self) -> None:
        self.commands: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.commands.append(event.command)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_stored_values_are_copies_and_reads_never_hand_out_the_stored_object() -> None:
    listener = KeepCommands()
    client = EmbeddedClient(event_listeners=[listener])
    coll = client.get_database(DB)[COLL]
    await coll.insert_one({"_id": "t", "messages": []})
    message = {"id": "a", "parts": [{"text": "x"}], "at": dt.datetime(2024, 1, 1, 0, 0, 0, 123456)}
    await coll.update_one({"_id": "t"}, {"$set": {"messages.0": message}})
    message["parts"].append({"text": "changed by the caller"})
    read = await coll.find_one({"_id": "t"})
    assert read["messages"][0]["parts"] == [{"text": "x"}]
    # stored as a server stores a date: milliseconds, UTC (read back aware)
    assert read["messages"][0]["at"] == dt.datetime(2024, 1, 1, 0, 0, 0, 123000, tzinfo=dt.UTC)
    read["messages"][0]["id"] = "changed by the reader"
    # a listener holding the command as the server decoded it shares nothing with the store
    (shown,) = [c for c in listener.commands if "update" in c]
    shown["updates"][0]["u"]["$set"]["messages.0"]["parts"].append({"text": "by a listener"})
    again = await coll.find_one({"_id": "t"})
    assert again["messages"][0]["id"] == "a" and again["messages"][0]["parts"] == [{"text": "x"}]


# -- unique indexes, rollback, index invalidation -------------------------------------------


async def test_a_unique_index_refuses_a_fast_update_and_the_document_is_put_back_exactly() -> None:
    outcomes = []
    for fast in (True, False):
        client = EmbeddedClient(fast_updates=fast)
        coll = client.get_database(DB)[COLL]
        await coll.create_indexes([IndexModel([("slug", 1)], unique=True)])
        await coll.insert_many(
            [
                {"_id": "t1", "a": 1, "slug": "one", "b": 2, "messages": [{"id": "m0"}]},
                {"_id": "t2", "slug": "two"},
            ]
        )
        before = stored(client)
        update = {
            "$unset": {"a": ""},
            "$set": {"slug": "two", "messages.1": {"id": "m1"}},
            "$inc": {"n": 1},
        }
        with pytest.raises(DuplicateKeyError) as error:
            await coll.update_one({"_id": "t1", "messages.id": {"$ne": "m1"}}, update)
        assert stored(client) == before  # key order ("a" first) included
        # the refused message id is not stored: the guard lets the next append through
        ok = await coll.update_one(
            {"_id": "t1", "messages.id": {"$ne": "m1"}},
            {"$set": {"messages.1": {"id": "m1"}, "slug": "uno"}},
        )
        assert ok.modified_count == 1
        outcomes.append((error.value.details, stored(client)))
    assert outcomes[0] == outcomes[1]


async def test_a_partial_unique_index_applies_only_to_matching_documents() -> None:
    client = EmbeddedClient()
    coll = client.get_database(DB)[COLL]
    await coll.create_indexes(
        [IndexModel([("slug", 1)], unique=True, partialFilterExpression={"live": True})]
    )
    await coll.insert_many([{"_id": "t1", "slug": "s", "live": True}, {"_id": "t2", "live": False}])
    assert (await coll.update_one({"_id": "t2"}, {"$set": {"slug": "s"}})).modified_count == 1
    with pytest.raises(DuplicateKeyError):
        await coll.update_one({"_id": "t2"}, {"$set": {"live": True}})
    assert (await coll.find_one({"_id": "t2"}))["live"] is False


@pytest.mark.parametrize(
    "change",
    ["push", "raw_set", "replace", "find_and_modify", "reinsert", "delete"],
)
async def test_every_other_write_leaves_no_stale_guard_index(monkeypatch, change) -> None:
    monkeypatch.setattr(guard_index, "MIN_LENGTH", 0)
    client = EmbeddedClient()
    coll = client.get_database(DB)[COLL]
    await coll.insert_one({"_id": "t", "messages": [{"id": "a"}, {"id": "b"}]})
    await coll.update_one(
        {"_id": "t", "messages.id": {"$ne": "c"}}, {"$set": {"messages.2": {"id": "c"}}}
    )
    store = coll.delegate._store
    assert guard_index.indexes_of(store, "t", store["t"])  # the index exists now
    if change == "push":
        coll.delegate.update_one({"_id": "t"}, {"$push": {"messages": {"id": "x"}}})
    elif change == "raw_set":  # same length, an id changed in place by mongomock
        coll.delegate.update_one({"_id": "t"}, {"$set": {"messages.0.id": "x"}})
    elif change == "replace":
        await coll.replace_one({"_id": "t"}, {"messages": [{"id": "x"}, {"id": "b"}, {"id": "c"}]})
    elif change == "find_and_modify":
        await coll.find_one_and_update({"_id": "t"}, {"$set": {"messages.0.id": "x"}})
    elif change in ("reinsert", "delete"):
        await coll.delete_one({"_id": "t"})
        if change == "reinsert":
            await coll.insert_one({"_id": "t", "messages": [{"id": "x"}, {"id": "b"}, {"id": "c"}]})
    # the guard sees what is stored now: "x" is there; "a" is not, unless pushed after it
    blocked = await coll.update_one({"_id": "t", "messages.id": {"$ne": "x"}}, {"$set": {"k": 1}})
    allowed = await coll.update_one(
        {"_id": "t", "messages.id": {"$nin": ["a", "z"]}}, {"$set": {"k": 2}}
    )
    expected = (0, 0) if change in ("delete", "push") else (0, 1)
    assert (blocked.matched_count, allowed.matched_count) == expected


def test_nan_and_equal_values_count_as_mongomock_counts_them() -> None:
    async def scenario() -> list[Any]:
        fast, slow = await both([{"_id": "t1", "x": math.nan, "y": 1, "messages": []}])
        outcomes = []
        for client in (fast, slow):
            coll = client.get_database(DB)[COLL]
            same = await coll.update_one(
                {"_id": "t1"}, {"$set": {"y": 1.0}}
            )  # 1 == 1.0: not modified
            nan = await coll.update_one(
                {"_id": "t1"}, {"$set": {"x": math.nan}}
            )  # nan != nan: modified
            zero = await coll.update_one({"_id": "t1"}, {"$inc": {"y": 0}})
            outcomes.append(
                ([same.modified_count, nan.modified_count, zero.modified_count], stored(client))
            )
        return outcomes

    fast, slow = asyncio.run(scenario())
    assert fast == slow and fast[0] == [0, 1, 0]
