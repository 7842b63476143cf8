"""Tests of mindstore.backends: the embedded adapter, the recorder, open_backend, snapshots."""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import inspect
import os
import uuid
from typing import Any

import bson
import pytest
from beanie import Document, init_beanie
from bson import Binary, DBRef, Decimal128, Int64, ObjectId, Timestamp
from bson.errors import InvalidDocument
from pydantic import Field
from pymongo import (
    DeleteOne,
    IndexModel,
    InsertOne,
    ReplaceOne,
    ReturnDocument,
    UpdateMany,
    UpdateOne,
)
from pymongo.errors import BulkWriteError, DuplicateKeyError
from pymongo.monitoring import CommandStartedEvent, CommandSucceededEvent

from mindstore.backends import (
    Backend,
    CommandRecorder,
    EmbeddedClient,
    EmbeddedDatabase,
    RecorderListener,
    load_snapshot,
    open_backend,
    save_snapshot,
)
from mindstore.errors import ConfigurationError

DB = "mindstore_backends_test"
UTC = dt.UTC


@pytest.fixture
def recorder() -> CommandRecorder:
    return CommandRecorder()


@pytest.fixture
def db(recorder: CommandRecorder) -> EmbeddedDatabase:
    return EmbeddedClient(recorder=recorder).get_database(DB)


def enc(doc: dict) -> int:
    return len(bson.encode(doc))


# --------------------------------------------------------------------------- adapter fixes


async def test_list_collection_names_accepts_beanie_keywords(db: EmbeddedDatabase) -> None:
    await db["a"].insert_one({"x": 1})
    names = await db.list_collection_names(authorizedCollections=True, nameOnly=True)
    assert names == ["a"]
    assert await db.list_collection_names(filter={"name": "zzz"}) == []


async def test_aggregate_is_a_coroutine_returning_an_async_cursor(db: EmbeddedDatabase) -> None:
    coll = db["agg"]
    await coll.insert_many([{"g": i % 2, "v": i} for i in range(6)])
    pending = coll.aggregate([{"$match": {}}])
    assert inspect.iscoroutine(pending)  # like pymongo: forgetting `await` fails here too
    cursor = await pending
    assert [d["_id"] async for d in cursor]  # async iteration
    cursor = await coll.aggregate(
        [{"$group": {"_id": "$g", "s": {"$sum": "$v"}}}, {"$sort": {"_id": 1}}]
    )
    assert await cursor.to_list(length=None) == [{"_id": 0, "s": 6}, {"_id": 1, "s": 9}]


async def test_find_cursor_chaining_and_to_list(db: EmbeddedDatabase) -> None:
    coll = db["f"]
    await coll.insert_many([{"_id": i, "v": i * 10} for i in range(10)])
    docs = await coll.find({"v": {"$gte": 20}}, {"v": 1}).sort("v", -1).skip(1).limit(3).to_list()
    assert docs == [{"_id": 8, "v": 80}, {"_id": 7, "v": 70}, {"_id": 6, "v": 60}]
    assert await coll.find_one(3) == {"_id": 3, "v": 30}
    assert await coll.find_one({"_id": 99}) is None
    assert await coll.find({}, ["v"]).limit(1).to_list() == [{"_id": 0, "v": 0}]
    assert await coll.count_documents({"v": {"$lt": 50}}) == 5
    assert await coll.count_documents({}, skip=2, limit=3) == 3
    assert await coll.estimated_document_count() == 10
    assert sorted(await coll.distinct("v", {"_id": {"$lt": 3}})) == [0, 10, 20]
    cursor = coll.find({})
    await cursor.to_list(1)
    with pytest.raises(Exception, match="after executing"):
        cursor.limit(2)


async def test_datetimes_come_back_aware_utc_from_every_path(db: EmbeddedDatabase) -> None:
    coll = db["dates"]
    paris = dt.timezone(dt.timedelta(hours=2))
    local = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=paris)
    await coll.insert_one({"_id": 1, "at": local, "nested": [{"at": local}]})
    found = await coll.find_one({"_id": 1})
    assert found is not None
    assert found["at"].tzinfo is UTC and found["nested"][0]["at"].tzinfo is UTC
    assert found["at"] == dt.datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC)  # ms precision
    updated = await coll.find_one_and_update(
        {"_id": 1},
        {"$set": {"later": local + dt.timedelta(hours=1)}},
        return_document=ReturnDocument.AFTER,
    )
    assert updated is not None and updated["later"].tzinfo is UTC
    cursor = await coll.aggregate(
        [
            {"$match": {"at": {"$lte": dt.datetime.now(UTC)}}},  # aware datetime in a pipeline
            {"$group": {"_id": None, "last": {"$max": "$later"}}},
        ]
    )
    (row,) = await cursor.to_list()
    assert row["last"].tzinfo is UTC
    assert row["last"] == local + dt.timedelta(hours=1) - dt.timedelta(microseconds=456)


async def test_an_empty_timestamp_in_user_data_is_stored_as_given(db: EmbeddedDatabase) -> None:
    """A server keeps ``Timestamp(0, 0)`` nested in a document (it fills in only a top-level
    field of an insert); mongomock replaced it everywhere with the current time, so a
    message holding one did not read back or restore as stored."""
    empty = Timestamp(0, 0)
    coll = db["stamps"]
    await coll.insert_one({"_id": 1, "messages": [{"blob": empty, "at": [empty]}]})
    await coll.update_one({"_id": 1}, {"$set": {"messages.1": {"blob": empty}}})
    await coll.replace_one({"_id": 2}, {"_id": 2, "nested": {"t": empty}}, upsert=True)
    await coll.update_one({"_id": 1}, {"$push": {"messages": {"blob": empty}}})
    first = await coll.find_one({"_id": 1, "messages.blob": empty})
    assert first is not None and first["messages"] == [
        {"blob": empty, "at": [empty]},
        {"blob": empty},
        {"blob": empty},
    ]
    assert (await coll.find_one({"_id": 2}))["nested"] == {"t": empty}
    cursor = await coll.aggregate([{"$match": {"nested.t": empty}}, {"$project": {"_id": 1}}])
    assert await cursor.to_list() == [{"_id": 2}]


async def test_values_pymongo_cannot_encode_fail_like_on_a_server(db: EmbeddedDatabase) -> None:
    with pytest.raises(InvalidDocument):
        await db["bad"].insert_one({"x": object()})
    with pytest.raises(InvalidDocument):
        await db["bad"].update_one({"_id": 1}, {"$set": {"x": {1, 2}}})


async def test_insert_sets_id_on_callers_document_and_duplicate_key(db: EmbeddedDatabase) -> None:
    doc: dict = {"x": 1}
    result = await db["ins"].insert_one(doc)
    assert isinstance(doc["_id"], ObjectId) and result.inserted_id == doc["_id"]
    with pytest.raises(DuplicateKeyError):
        await db["ins"].insert_one({"_id": doc["_id"]})


async def test_sessions_are_accepted_but_there_are_no_transactions(db: EmbeddedDatabase) -> None:
    async with db.client.start_session() as session:
        await db["s"].insert_one({"_id": 1}, session=session)
        assert await db["s"].find_one({"_id": 1}, session=session) == {"_id": 1}
        with pytest.raises(NotImplementedError):
            session.start_transaction()


async def test_partial_unique_index_keeps_its_filter(db: EmbeddedDatabase) -> None:
    coll = db["partial"]
    await coll.create_indexes(
        [
            IndexModel(
                [("tenant", 1), ("key", 1)],
                name="uniq_live",
                unique=True,
                partialFilterExpression={"live": True},
            ),
        ]
    )
    await coll.insert_one({"tenant": "t", "key": "k", "live": False})
    await coll.insert_one({"tenant": "t", "key": "k", "live": False})  # not covered by the index
    await coll.insert_one({"tenant": "t", "key": "k", "live": True})
    with pytest.raises(DuplicateKeyError):
        await coll.insert_one({"tenant": "t", "key": "k", "live": True})
    info = await coll.index_information()
    assert info["uniq_live"]["partialFilterExpression"] == {"live": True}
    assert info["uniq_live"]["key"] == [("tenant", 1), ("key", 1)]


# --------------------------------------------------------------------------- bulk_write


async def test_bulk_write_with_update_one_and_friends(db: EmbeddedDatabase) -> None:
    coll = db["bulk"]
    await coll.insert_many([{"_id": i, "n": i, "tag": "x"} for i in range(5)])
    result = await coll.bulk_write(
        [
            UpdateOne({"_id": 1}, {"$inc": {"n": 100}}),
            UpdateOne({"tag": "x"}, {"$set": {"first": True}}, sort={"n": -1}),  # pymongo >= 4.11
            UpdateMany({"n": {"$lt": 3}}, {"$set": {"small": True}}),
            ReplaceOne({"_id": 2}, {"n": 2, "replaced": True}),
            UpdateOne({"_id": 42}, {"$set": {"n": 42}}, upsert=True),
            InsertOne({"_id": 10, "n": 10}),
            DeleteOne({"_id": 0}),
        ]
    )
    assert result.matched_count == 1 + 1 + 2 + 1
    assert result.modified_count == 1 + 1 + 2 + 1
    assert result.inserted_count == 1
    assert result.deleted_count == 1
    assert result.upserted_count == 1 and result.upserted_ids == {4: 42}
    assert (await coll.find_one({"_id": 1}))["n"] == 101
    # the sort picked the highest n among tag x, i.e. _id 1 after its increment
    assert [d["_id"] for d in await coll.find({"first": True}).to_list()] == [1]
    assert await coll.find_one({"_id": 2}) == {"_id": 2, "n": 2, "replaced": True}
    assert await coll.find_one({"_id": 0}) is None
    assert await coll.find_one({"_id": 10}) == {"_id": 10, "n": 10}


async def test_bulk_write_groups_commands_like_pymongo(
    db: EmbeddedDatabase, recorder: CommandRecorder
) -> None:
    coll = db["bulk2"]
    with recorder.capture() as log:
        await coll.bulk_write(
            [
                InsertOne({"_id": 1}),
                InsertOne({"_id": 2}),
                UpdateOne({"_id": 1}, {"$set": {"a": 1}}),
                UpdateOne({"_id": 2}, {"$set": {"a": 2}}),
                DeleteOne({"_id": 2}),
            ]
        )
    assert log.names() == ["insert", "update", "delete"]
    assert [c.statements for c in log] == [2, 2, 1]
    expected_update = {
        "update": "bulk2",
        "ordered": True,
        "updates": [
            {"q": {"_id": 1}, "u": {"$set": {"a": 1}}, "multi": False},
            {"q": {"_id": 2}, "u": {"$set": {"a": 2}}, "multi": False},
        ],
        "$db": DB,
    }
    assert log[1].bytes_sent == enc(expected_update)


async def test_bulk_write_errors_ordered_and_unordered(db: EmbeddedDatabase) -> None:
    coll = db["bulk3"]
    await coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as info:
        await coll.bulk_write([InsertOne({"_id": 1}), InsertOne({"_id": 2})])
    assert info.value.details["nInserted"] == 0
    assert info.value.details["writeErrors"][0]["index"] == 0
    assert info.value.details["writeErrors"][0]["code"] == 11000
    assert await coll.find_one({"_id": 2}) is None
    with pytest.raises(BulkWriteError) as info:
        await coll.bulk_write([InsertOne({"_id": 1}), InsertOne({"_id": 3})], ordered=False)
    assert info.value.details["nInserted"] == 1
    assert await coll.find_one({"_id": 3}) == {"_id": 3}


# --------------------------------------------------------------------------- interleaving


async def test_concurrent_coroutines_interleave_between_operations(db: EmbeddedDatabase) -> None:
    coll = db["inter"]

    async def worker(tag: str) -> None:
        for i in range(4):
            await coll.insert_one({"tag": tag, "i": i})

    await asyncio.gather(worker("a"), worker("b"))
    tags = [d["tag"] async for d in coll.find({})]  # natural (insertion) order
    assert tags == ["a", "b"] * 4


async def test_read_modify_write_races_are_visible(db: EmbeddedDatabase) -> None:
    """Two writers guarded by a version: on the embedded backend one must lose the race."""
    coll = db["race"]
    await coll.insert_one({"_id": "t", "version": 0, "log": []})

    async def writer(tag: str) -> bool:
        head = await coll.find_one({"_id": "t"}, {"version": 1})
        assert head is not None
        result = await coll.update_one(
            {"_id": "t", "version": head["version"]},
            {"$push": {"log": tag}, "$inc": {"version": 1}},
        )
        return result.modified_count == 1

    outcomes = await asyncio.gather(writer("a"), writer("b"))
    assert sorted(outcomes) == [False, True]
    doc = await coll.find_one({"_id": "t"})
    assert doc is not None and doc["version"] == 1 and len(doc["log"]) == 1


# --------------------------------------------------------------------------- Beanie


class ProbeDoc(Document):
    tenant: str
    name: str
    size: int = 0
    at: dt.datetime = Field(default_factory=lambda: dt.datetime.now(UTC))

    class Settings:
        name = "backend_probe"
        indexes = [  # noqa: RUF012 - a namespace Beanie reads, never mutated (as in src/)
            IndexModel([("tenant", 1), ("name", 1)], name="tenant_name", unique=True)
        ]


async def test_beanie_round_trip_on_the_embedded_backend(recorder: CommandRecorder) -> None:
    backend = await open_backend("embedded", database=DB)
    await init_beanie(database=backend.database, document_models=[ProbeDoc])
    info = await ProbeDoc.get_pymongo_collection().index_information()
    assert info["tenant_name"]["unique"] is True

    await ProbeDoc(tenant="t1", name="a", size=1).insert()
    await ProbeDoc.insert_many(
        [ProbeDoc(tenant="t1", name="b", size=2), ProbeDoc(tenant="t2", name="a", size=5)]
    )
    with pytest.raises(DuplicateKeyError):
        await ProbeDoc(tenant="t1", name="a").insert()

    found = await ProbeDoc.find_one(ProbeDoc.tenant == "t1", ProbeDoc.name == "b")
    assert found is not None and found.size == 2 and found.at.tzinfo is not None
    found.size = 20
    await found.save()
    await ProbeDoc.find(ProbeDoc.tenant == "t1").update({"$inc": {"size": 1}})
    docs = await ProbeDoc.find(ProbeDoc.tenant == "t1").sort(-ProbeDoc.size).to_list()
    assert [(d.name, d.size) for d in docs] == [("b", 21), ("a", 2)]
    assert await ProbeDoc.find(ProbeDoc.size > 1).count() == 3

    rows = (
        await ProbeDoc.find(ProbeDoc.size > 0)
        .aggregate(
            [{"$group": {"_id": "$tenant", "total": {"$sum": "$size"}}}, {"$sort": {"_id": 1}}]
        )
        .to_list()
    )
    assert rows == [{"_id": "t1", "total": 23}, {"_id": "t2", "total": 5}]
    assert await ProbeDoc.find_all().sum(ProbeDoc.size) == 28

    await (await ProbeDoc.find_one(ProbeDoc.tenant == "t2")).delete()
    assert await ProbeDoc.count() == 2
    names = backend.recorder.records.names()
    assert {"createIndexes", "insert", "find", "update", "aggregate", "delete"} <= set(names)
    await backend.close()


# --------------------------------------------------------------------------- recorder


async def test_recorder_bytes_sent_match_the_wire_commands(
    db: EmbeddedDatabase, recorder: CommandRecorder
) -> None:
    coll = db["wire"]
    await coll.insert_one({"_id": 1, "n": 0})
    with recorder.capture(payloads=True) as log:
        await coll.update_one({"_id": 1}, {"$set": {"text": "hello"}})
        await coll.find_one({"_id": 1}, {"text": 1})
        await coll.find_one_and_update(
            {"_id": 1},
            {"$inc": {"n": 1}},
            projection={"n": 1},
            return_document=ReturnDocument.AFTER,
        )
        await coll.delete_many({"n": {"$gt": 5}})
    update, find, fam, delete = log
    assert update.name == "update" and update.collection == "wire"
    assert update.filter == {"_id": 1} and update.update == {"$set": {"text": "hello"}}
    assert update.bytes_sent == enc(
        {
            "update": "wire",
            "ordered": True,
            "updates": [
                {"q": {"_id": 1}, "u": {"$set": {"text": "hello"}}, "multi": False, "upsert": False}
            ],
            "$db": DB,
        }
    )
    assert update.bytes_received == enc({"n": 1, "nModified": 1, "ok": 1.0})
    assert find.name == "find" and find.projection == {"text": 1}
    assert find.bytes_sent == enc(
        {
            "find": "wire",
            "filter": {"_id": 1},
            "projection": {"text": 1},
            "limit": 1,
            "singleBatch": True,
            "$db": DB,
        }
    )
    assert find.bytes_received == enc(
        {
            "cursor": {
                "firstBatch": [{"_id": 1, "text": "hello"}],
                "id": Int64(0),
                "ns": f"{DB}.wire",
            },
            "ok": 1.0,
        }
    )
    assert fam.name == "findAndModify"
    assert fam.bytes_sent == enc(
        {
            "findAndModify": "wire",
            "query": {"_id": 1},
            "new": True,
            "update": {"$inc": {"n": 1}},
            "fields": {"n": 1},
            "upsert": False,
            "$db": DB,
        }
    )
    assert fam.bytes_received == enc(
        {
            "lastErrorObject": {"n": 1, "updatedExisting": True},
            "value": {"_id": 1, "n": 1},
            "ok": 1.0,
        }
    )
    assert delete.bytes_sent == enc(
        {
            "delete": "wire",
            "ordered": True,
            "deletes": [{"q": {"n": {"$gt": 5}}, "limit": 0}],
            "$db": DB,
        }
    )
    assert all(c.round_trips == 1 for c in log)
    assert log.bytes_sent == sum(c.bytes_sent for c in log)


async def test_recorder_figures_grow_with_the_payload(
    db: EmbeddedDatabase, recorder: CommandRecorder
) -> None:
    coll = db["grow"]
    await coll.insert_one({"_id": 1, "msgs": []})
    sizes = []
    for n in (10, 1000, 100_000):
        with recorder.capture() as log:
            await coll.update_one({"_id": 1}, {"$push": {"msgs": "x" * n}})
        sizes.append(log[0].bytes_sent)
    assert sizes[1] - sizes[0] == 990 and sizes[2] - sizes[1] == 99_000
    # reading the document back costs what it holds
    with recorder.capture() as log:
        doc = await coll.find_one({"_id": 1})
    assert log[0].bytes_received > 101_010 and log[0].bytes_received > enc(doc)


async def test_cursor_batches_count_as_round_trips(
    db: EmbeddedDatabase, recorder: CommandRecorder
) -> None:
    coll = db["batches"]
    await coll.insert_many([{"_id": i} for i in range(250)])
    with recorder.capture() as log:
        assert len(await coll.find({}).to_list()) == 250  # 101 + getMore(149)
        assert len(await coll.find({}, batch_size=50).to_list()) == 250  # 5 batches
        cursor = coll.find({})
        async for doc in cursor:
            if doc["_id"] == 5:
                break
        await cursor.close()  # first batch only, then killCursors
        agg = await coll.aggregate([{"$match": {}}], batchSize=100)
        assert len(await agg.to_list()) == 250  # 100 + 100 + 50
    assert [c.round_trips for c in log] == [2, 5, 2, 3]
    assert [c.n_returned for c in log] == [250, 250, 101, 250]
    whole = log[0]
    docs_bytes = sum(enc({"_id": i}) for i in range(250))
    assert whole.bytes_received > docs_bytes


def test_capture_nesting_bounds_and_payloads() -> None:
    from mindstore.backends import RecordedCommand

    rec = CommandRecorder(max_records=3, keep_payloads=False)
    with rec.capture() as outer:
        rec.record(RecordedCommand(name="find", filter={"a": 1}, bytes_sent=10))
        with rec.capture() as inner:
            for _ in range(4):
                rec.record(RecordedCommand(name="update", bytes_sent=5))
    assert len(outer) == 5 and len(inner) == 4 and len(rec.records) == 3
    assert outer.bytes_sent == 30 and outer[0].filter is None
    rec.clear()
    assert rec.records == []


def _started(cmd: dict, request_id: int, db: str = DB) -> CommandStartedEvent:
    return CommandStartedEvent(cmd, db, request_id, ("localhost", 27017), request_id)


def _succeeded(reply: dict, name: str, request_id: int) -> CommandSucceededEvent:
    return CommandSucceededEvent(
        dt.timedelta(milliseconds=1),
        reply,
        name,
        request_id,
        ("localhost", 27017),
        request_id,
        database_name=DB,
    )


async def test_listener_figures_match_the_embedded_backend(
    db: EmbeddedDatabase, recorder: CommandRecorder
) -> None:
    """The same update and find, seen by the listener with the driver's gossip added."""
    coll = db["same"]
    await coll.insert_many([{"_id": i, "t": "y" * 50} for i in range(150)])
    with recorder.capture() as embedded:
        await coll.update_one({"_id": 1}, {"$set": {"t": "z" * 300}})
        await coll.find({"_id": {"$gte": 0}}).to_list()
    real = CommandRecorder()
    listener = RecorderListener(real)
    gossip = {
        "lsid": {"id": Binary(uuid.uuid4().bytes, 4)},
        "$clusterTime": {
            "clusterTime": bson.Timestamp(1, 1),
            "signature": {"hash": Binary(b"0" * 20), "keyId": Int64(0)},
        },
    }
    update_cmd = {
        "update": "same",
        "ordered": True,
        "updates": [
            {"q": {"_id": 1}, "u": {"$set": {"t": "z" * 300}}, "multi": False, "upsert": False}
        ],
        "txnNumber": Int64(1),
        "$db": DB,
        **gossip,
    }
    listener.started(_started(update_cmd, 1))
    listener.succeeded(
        _succeeded(
            {
                "n": 1,
                "nModified": 1,
                "ok": 1.0,
                "operationTime": bson.Timestamp(1, 1),
                "$clusterTime": gossip["$clusterTime"],
            },
            "update",
            1,
        )
    )
    docs = await coll.find({}).to_list()
    listener.started(
        _started({"find": "same", "filter": {"_id": {"$gte": 0}}, "$db": DB, **gossip}, 2)
    )
    listener.succeeded(
        _succeeded(
            {"cursor": {"firstBatch": docs[:101], "id": Int64(77), "ns": f"{DB}.same"}, "ok": 1.0},
            "find",
            2,
        )
    )
    listener.started(_started({"getMore": Int64(77), "collection": "same", "$db": DB, **gossip}, 3))
    listener.succeeded(
        _succeeded(
            {"cursor": {"nextBatch": docs[101:], "id": Int64(0), "ns": f"{DB}.same"}, "ok": 1.0},
            "getMore",
            3,
        )
    )
    # ignored: handshakes and admin commands
    listener.started(_started({"hello": 1, "$db": "admin"}, 4, db="admin"))
    listener.succeeded(_succeeded({"ok": 1.0}, "hello", 4))
    listener.started(_started({"ping": 1, "$db": DB}, 5))
    listener.succeeded(_succeeded({"ok": 1.0}, "ping", 5))

    assert real.records.names() == ["update", "find"]
    for mine, theirs in zip(embedded, real.records, strict=True):
        assert (mine.name, mine.collection) == (theirs.name, theirs.collection)
        assert mine.bytes_sent == theirs.bytes_sent
        assert mine.bytes_received == theirs.bytes_received
        assert mine.round_trips == theirs.round_trips
        assert theirs.overhead_bytes > 0 and theirs.backend == "mongodb"
    assert real.records[1].round_trips == 2 and real.records[1].n_returned == 150
    raw = CommandRecorder()
    raw_listener = RecorderListener(raw, strip_overhead=False)
    raw_listener.started(_started(update_cmd, 9))
    raw_listener.succeeded(_succeeded({"n": 1, "nModified": 1, "ok": 1.0}, "update", 9))
    assert raw.records[0].bytes_sent == enc(update_cmd)


# --------------------------------------------------------------------------- open_backend


async def test_open_backend_defaults_to_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINDSTORE_URI", raising=False)
    backend = await open_backend()
    assert isinstance(backend, Backend) and backend.kind == "embedded"
    assert isinstance(backend.database, EmbeddedDatabase)
    assert backend.database.name == "mindstore" and backend.uri is None
    await backend.database["x"].insert_one({"_id": 1})
    assert backend.recorder.records[-1].name == "insert"
    await backend.close()

    monkeypatch.setenv("MINDSTORE_URI", "mongomock://localhost/fromuri")
    backend = await open_backend()
    assert backend.kind == "embedded" and backend.database.name == "fromuri"
    backend = await open_backend("embedded", database="named")
    assert backend.database.name == "named"
    # each embedded backend is its own store
    other = await open_backend("embedded", database="named")
    await backend.database["c"].insert_one({"_id": 1})
    assert await other.database["c"].find_one({}) is None


@pytest.mark.parametrize("uri", ["http://nope", "", "postgres://x/y", "mongodb:/broken"])
async def test_open_backend_rejects_unsupported_uris(uri: str) -> None:
    with pytest.raises(ConfigurationError):
        await open_backend(uri)


async def test_open_backend_env_uri_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINDSTORE_URI", "http://nope")
    with pytest.raises(ConfigurationError, match="unsupported"):
        await open_backend()


async def test_open_backend_unreachable_server_fails_fast_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One client, waiting for a server only as long as the URI says (200 ms, not the
    5 s default), one ping, then one line naming the host without the password."""
    import pymongo

    real = pymongo.AsyncMongoClient
    built: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(pymongo, "AsyncMongoClient", spy)
    with pytest.raises(ConfigurationError) as info:
        await open_backend("mongodb://app:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=200")
    assert len(built) == 1 and built[0].options.server_selection_timeout == 0.2
    message = str(info.value)
    assert "127.0.0.1:1" in message and "\n" not in message
    assert "s3cret" not in message


async def test_open_backend_invalid_mongodb_uri() -> None:
    with pytest.raises(ConfigurationError, match="localhost"):
        await open_backend("mongodb://localhost:notaport/db", timeout_ms=200)


# --------------------------------------------------------------------------- snapshots


TRICKY = {
    "_id": "task-1",
    "big": Int64(2**40),
    "small64": Int64(5),
    "int32": 7,
    "money": Decimal128("1234.5600"),
    "blob": b"\x00\x01\xffbinary",
    "uuid": Binary(uuid.UUID("12345678-1234-5678-1234-567812345678").bytes, 4),
    "user_bin": Binary(b"abc", 128),
    "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    "float": 1.5,
    "nan_free": [1, 2.5, None, True],
    "tool": {
        "schema": {
            "$ref": "#/defs/x",
            "$id": "urn:x",
            "type": "object",
            "defs": {"x": {"$schema": "s", "$date": "not a date"}},
        }
    },
    "literal": {"$numberLong": "not really", "~esc": 1},
    "fake_dbref": {"~dbref": [["$ref", "x"]]},
    "real_dbref": DBRef("tasks", "task-2", "otherdb", note={"$x": 1}),
    "list_of_dollar": [{"$oid": "zzz"}, {"ok": {"$binary": 1}}],
    "oid": ObjectId("65a1b2c3d4e5f6a7b8c9d0e1"),
}


async def test_snapshot_round_trip_is_lossless(tmp_path: pytest.TempPathFactory) -> None:
    src = EmbeddedClient().get_database("snap")
    await src["tasks"].insert_one(dict(TRICKY))
    await src["tasks"].insert_one({"_id": "task-2", "tenant": "t"})
    await src["tasks"].create_index(
        [("tenant", 1), ("_id", 1)],
        name="tenant_id",
        unique=True,
        partialFilterExpression={"tenant": {"$exists": True}},
    )
    await src.create_collection("empty")
    path = tmp_path / "sub" / "store.json.gz"
    counts = await save_snapshot(src, path)
    assert counts == {"tasks": 2, "empty": 0}
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]

    dst = EmbeddedClient().get_database("snap")
    await dst["tasks"].insert_one({"_id": "stale"})
    assert await load_snapshot(dst, path) == {"tasks": 2, "empty": 0}
    before = await src["tasks"].find_one({"_id": "task-1"})
    after = await dst["tasks"].find_one({"_id": "task-1"})
    assert bson.encode(before) == bson.encode(after)  # same values and same BSON types
    assert isinstance(after["small64"], Int64) and after["at"] == TRICKY["at"]
    # pymongo (both backends) reads a subdocument with a string $ref and an $id as a DBRef
    schema = after["tool"]["schema"]
    assert isinstance(schema, DBRef) and schema.collection == "#/defs/x" and schema.id == "urn:x"
    assert schema.as_doc()["defs"] == {"x": {"$schema": "s", "$date": "not a date"}}
    assert after["literal"] == {"$numberLong": "not really", "~esc": 1}
    assert after["list_of_dollar"] == [{"$oid": "zzz"}, {"ok": {"$binary": 1}}]
    assert await dst["tasks"].find_one({"_id": "stale"}) is None
    assert sorted(await dst.list_collection_names()) == ["empty", "tasks"]
    info = await dst["tasks"].index_information()
    assert info["tenant_id"]["unique"] is True
    assert info["tenant_id"]["partialFilterExpression"] == {"tenant": {"$exists": True}}


async def test_snapshot_missing_empty_and_corrupt_files(tmp_path: pytest.TempPathFactory) -> None:
    db = EmbeddedClient().get_database("snap")
    assert await load_snapshot(db, tmp_path / "missing.gz") == {}
    (tmp_path / "empty.gz").write_bytes(b"")
    assert await load_snapshot(db, tmp_path / "empty.gz") == {}

    garbage = tmp_path / "garbage.gz"
    garbage.write_bytes(b"this is not gzip at all")
    with pytest.raises(ConfigurationError, match="corrupt"):
        await load_snapshot(db, garbage)

    other = tmp_path / "other.gz"
    other.write_bytes(gzip.compress(b'{"hello": "world"}\n'))
    with pytest.raises(ConfigurationError, match="not a mindstore"):
        await load_snapshot(db, other)

    await db["c"].insert_many([{"_id": i, "pad": "p" * 100} for i in range(50)])
    good = tmp_path / "good.gz"
    await save_snapshot(db, good)
    data = gzip.decompress(good.read_bytes())
    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(gzip.compress(data[: len(data) // 2].rsplit(b"\n", 1)[0] + b"\n"))
    fresh = EmbeddedClient().get_database("snap")
    with pytest.raises(ConfigurationError, match="truncated"):
        await load_snapshot(fresh, truncated)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(ConfigurationError):
        await load_snapshot(fresh, cut)
    assert await fresh.list_collection_names() == []  # nothing half-loaded


async def test_snapshot_refuses_a_server_database() -> None:
    with pytest.raises(ConfigurationError, match="embedded"):
        await save_snapshot(object(), "x.gz")


# --------------------------------------------------------------------------- real server


@pytest.mark.skipif(not os.environ.get("MINDSTORE_TEST_URI"), reason="needs MINDSTORE_TEST_URI")
async def test_figures_match_between_embedded_and_a_real_server() -> None:
    """The same operations give the same bytes and round trips on both backends."""
    name = f"mindstore_test_rec_{uuid.uuid4().hex[:10]}"
    real = await open_backend(os.environ["MINDSTORE_TEST_URI"], database=name)
    embedded = await open_backend("embedded", database=name)

    async def run(backend: Backend) -> list:
        coll = backend.database["figures"]
        with backend.recorder.capture() as log:
            await coll.insert_one({"_id": 0, "text": "a" * 200, "n": 1})
            await coll.insert_many([{"_id": i, "n": i} for i in range(1, 151)])
            await coll.update_one({"_id": 0}, {"$push": {"log": "b" * 300}, "$inc": {"n": 1}})
            await coll.find_one({"_id": 0}, {"text": 1})
            await coll.find_one_and_update(
                {"_id": 0},
                {"$set": {"x": 1}},
                projection={"n": 1},
                return_document=ReturnDocument.AFTER,
            )
            await coll.find({"n": {"$gte": 0}}).sort("_id", 1).to_list()
            await coll.count_documents({"n": {"$gt": 10}})
            await coll.delete_many({"n": {"$gt": 100}})
        return [(c.name, c.bytes_sent, c.bytes_received, c.round_trips) for c in log]

    try:
        assert await run(embedded) == await run(real)
    finally:
        await real.client.drop_database(name)
        await real.close()
        await embedded.close()
