"""The server path of recall by meaning (docs/search.md): the capability check and the
command shapes, judged against MongoDB's documented syntax (`createSearchIndexes` with a
`vectorSearch` index: `fields` of type `vector` with `path`, `numDimensions`,
`similarity`, and of type `filter`; `$vectorSearch`: `index`, `path`, `queryVector`,
`numCandidates` unless `exact`, `limit`, `filter` with MQL comparison operators, first in
its pipeline; `$rankFusion`: `input.pipelines`). Never run on such a server here; the
`filter` the stage sends is checked against the in-process scope by running it as a
find filter on the embedded backend, which shares no code with `_in_scope`."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo.errors import OperationFailure

from conftest import StoreFactory
from mindstore import Store
from mindstore.collection_names import SEARCH_VECTORS
from mindstore.model.parts import TaskConfigPart
from mindstore.search import HashingEmbedder
from mindstore.search.service import check_filters
from mindstore.search.vector_search import _in_scope
from mindstore.search.vector_server import (
    IN_PROCESS,
    INDEX_NAME,
    ON_SERVER,
    VectorPath,
    rank_fusion_stage,
    vector_index_command,
    vector_path,
    vector_search_pipeline,
)

VECTOR_SEARCH_FIELDS = {"index", "path", "queryVector", "numCandidates", "limit", "filter", "exact"}
FILTER_OPERATORS = {"$eq", "$ne", "$gt", "$lt", "$gte", "$lte", "$in", "$nin", "$and", "$or",
                    "$not", "$exists"}  # fmt: skip


def _operators(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {k for k in value if k.startswith("$")} | {
            o for v in value.values() for o in _operators(v)
        }
    if isinstance(value, list):
        return {o for v in value for o in _operators(v)}
    return set()


def test_the_index_command_is_the_documented_shape() -> None:
    command = vector_index_command(384)
    assert list(command) == ["createSearchIndexes", "indexes"]
    assert command["createSearchIndexes"] == SEARCH_VECTORS
    (index,) = command["indexes"]
    assert index["name"] == INDEX_NAME and index["type"] == "vectorSearch"
    fields = index["definition"]["fields"]
    assert fields[0] == {"type": "vector", "path": "v", "numDimensions": 384,
                         "similarity": "cosine"}  # fmt: skip
    assert all(set(f) == {"type", "path"} and f["type"] == "filter" for f in fields[1:])
    assert {f["path"] for f in fields[1:]} == {"tenant", "e", "o", "r", "t", "task"}


def test_the_vector_search_stage_is_the_documented_shape() -> None:
    pipeline = vector_search_pipeline(
        [0.5, -0.5], tenant="acme", tag="abcd1234", limit=50, owner="bob", roles=["user"],
        since=1, until=2, task_ids=["t1"],
    )  # fmt: skip
    stage = pipeline[0]["$vectorSearch"]
    assert list(pipeline[0]) == ["$vectorSearch"]  # the first stage
    assert set(stage) <= VECTOR_SEARCH_FIELDS
    assert stage["exact"] is True and "numCandidates" not in stage  # ENN: no candidates
    assert stage["queryVector"] == [0.5, -0.5] and stage["limit"] == 50
    assert _operators(stage["filter"]) <= FILTER_OPERATORS
    assert {"tenant": {"$eq": "acme"}} in stage["filter"]["$and"]
    assert pipeline[1]["$project"]["score"] == {"$meta": "vectorSearchScore"}
    fused = rank_fusion_stage({"vector": pipeline})
    assert fused == {"$rankFusion": {"input": {"pipelines": {"vector": pipeline}}}}


@pytest.mark.parametrize(
    "scope",
    [
        {},
        {"owner": "bob"},
        {"roles": ["assistant"]},
        {"since": "past"},
        {"until": "past"},
        {"task_ids": "first"},
        {"owner": "alice", "roles": ["user"], "since": "past", "until": "future"},
    ],
)
async def test_the_server_filter_selects_what_the_process_selects(
    stores: StoreFactory, scope: dict[str, Any]
) -> None:
    store = Store(stores.store.backend, embedder=HashingEmbedder(16))
    acme = store.scoped("acme")
    config = TaskConfigPart(model_name="m")
    first = await acme.tasks.create(owner="alice", config=config)
    second = await acme.tasks.create(owner="bob", config=config)
    for task in (first, second):
        await acme.tasks.add_human_message(task.id, "hello there")
        turn = await acme.tasks.add_assistant_message(task.id)
        await acme.tasks.add_text_part(task.id, turn.id, "hello back")
    await acme.search("hello", mode="semantic")
    now = datetime.now(UTC)
    times = {"past": now - timedelta(days=1), "future": now + timedelta(days=1)}
    options = {
        "owner": scope.get("owner"),
        "roles": scope.get("roles"),
        "since": times.get(scope.get("since", "")),
        "until": times.get(scope.get("until", "")),
        "task_ids": [first.id] if scope.get("task_ids") else None,
    }
    filters = check_filters(None, **options)
    stored = await store.database[SEARCH_VECTORS].find({"tenant": "acme"}).to_list(None)
    tag = stored[0]["e"]
    in_process = {d["_id"] for d in stored if _in_scope(d, filters, frozenset())}
    micros = {k: round(v.timestamp() * 1e6) if v else None for k, v in
              (("since", options["since"]), ("until", options["until"]))}  # fmt: skip
    stage = vector_search_pipeline(
        [1.0], tenant="acme", tag=tag, limit=100, owner=filters.owner,
        roles=sorted(filters.roles), since=micros["since"], until=micros["until"],
        task_ids=sorted(filters.task_ids) if filters.task_ids is not None else None,
    )[0]["$vectorSearch"]  # fmt: skip
    on_server = {
        d["_id"] async for d in store.database[SEARCH_VECTORS].find(stage["filter"], {"_id": 1})
    }
    assert on_server == in_process


async def test_the_capability_check(stores: StoreFactory) -> None:
    assert (await stores.store.vector_path()).path == IN_PROCESS
    store = stores.store
    assert await store.vector_path() is await store.vector_path()  # decided once

    class Cursor:
        def __init__(self, rows: list[dict[str, Any]]) -> None:
            self.rows = rows

        async def to_list(self, _length: int | None) -> list[dict[str, Any]]:
            return self.rows

    class Collection:
        def __init__(self, rows: list[dict[str, Any]] | None) -> None:
            self.rows = rows
            self.sent: list[Any] = []

        async def aggregate(self, pipeline: list[dict[str, Any]]) -> Cursor:
            self.sent.append(pipeline)
            if self.rows is None:
                raise OperationFailure("Unrecognized pipeline stage name: '$listSearchIndexes'")
            return Cursor(self.rows)

    for rows, path in (
        (None, IN_PROCESS),
        ([], IN_PROCESS),
        ([{"name": INDEX_NAME, "queryable": False}], IN_PROCESS),
        ([{"name": INDEX_NAME, "queryable": True}], ON_SERVER),
    ):
        collection = Collection(rows)
        found = await vector_path({SEARCH_VECTORS: collection}, "mongodb")
        assert found.path == path, rows
        assert collection.sent == [[{"$listSearchIndexes": {"name": INDEX_NAME}}]]


class EmulatedVectorSearch:
    """`search_vectors` with `$vectorSearch` emulated: the stage's `filter` run as a find
    on the embedded backend, exact cosine in plain Python over the stored int8 vectors,
    the score as the server gives it for cosine ((1 + cosine) / 2)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self.stages: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.collection, name)

    async def aggregate(self, pipeline: list[dict[str, Any]]) -> Any:
        from mindstore.search.vectors import dequantise

        stage = pipeline[0]["$vectorSearch"]
        self.stages.append(stage)
        wanted = stage["queryVector"]
        rows = []
        async for doc in self.collection.find(stage["filter"]):
            values = dequantise(bytes(doc["v"]))
            norm = math.sqrt(sum(x * x for x in values)) or 1.0
            cosine = sum(a * b for a, b in zip(values, wanted, strict=True)) / norm
            rows.append({**{k: doc.get(k) for k in ("_id", "task", "o", "r", "t")},
                         "score": (1 + cosine) / 2})  # fmt: skip
        rows.sort(key=lambda r: -r["score"])

        class Cursor:
            async def to_list(self, _length: int | None) -> list[dict[str, Any]]:
                return rows[: stage["limit"]]

        return Cursor()


async def test_on_a_server_the_ranking_runs_in_vector_search(stores: StoreFactory) -> None:
    texts = ["my sister got married", "hotel in lisbon", "wedding photos", "rain tomorrow",
             "marriage paperwork", "server deploy"]  # fmt: skip
    local = Store(stores.store.backend, embedder=HashingEmbedder(32)).scoped("acme")
    task = await local.tasks.create(owner="alice")
    for n, text in enumerate(texts):
        await local.tasks.add_human_message(task.id, text, message_id=f"m{n}")
    server = Store(stores.store.backend, embedder=HashingEmbedder(32))
    server._vector_path = VectorPath(ON_SERVER, "emulated")
    acme = server.scoped("acme")
    emulated = EmulatedVectorSearch(acme._search_store.vectors)
    acme._search_store.vectors = emulated
    for query in ("married sister", "wedding", "lisbon hotel"):
        here = await local.search(query, mode="semantic", limit=10)
        there = await acme.search(query, mode="semantic", limit=10)
        assert [h.message_id for h in there.hits][:1] == [h.message_id for h in here.hits][:1]
        assert sorted(h.message_id for h in there.hits) == sorted(h.message_id for h in here.hits)
        for a, b in zip(sorted(here.hits, key=lambda h: h.message_id),
                        sorted(there.hits, key=lambda h: h.message_id), strict=True):  # fmt: skip
            assert abs(a.score - b.score) < 1e-4
    walked = await acme.search("wedding", mode="hybrid", owner="alice", limit=2)
    assert walked.hits and walked.next_cursor is not None
    stage = emulated.stages[-1]
    assert {"o": {"$eq": "alice"}} in stage["filter"]["$and"] and stage["exact"] is True
    assert (await acme.search("wedding", mode="semantic", roles=["tool"])).hits == []
