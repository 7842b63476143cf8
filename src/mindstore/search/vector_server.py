"""Where a deployment ranks vectors (docs/search.md, "On a server with a vector index"):
the capability check, decided once per store, and the command shapes of a server's
vector index (pure builders, tested against MongoDB's documented syntax).

A deployment ranks on the server when it has a `vectorSearch` index named `INDEX_NAME`
on ``search_vectors`` that is queryable (MongoDB 8.2+ with its search process, or
Atlas): `$vectorSearch` then runs there, the tenant, model, owner, roles, time and tasks
inside the stage's `filter` (`vector_search.ranked_by_meaning`). Everywhere else, and for
a tenant under a keyring (its vectors are sealed: no server can index them), the ranking
runs in the process. None of the server shapes was run on such a server here: the
suite's backend is the embedded one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pymongo.errors import OperationFailure

from mindstore.collection_names import SEARCH_VECTORS
from mindstore.errors import ConfigurationError, ValidationError

__all__ = [
    "INDEX_NAME",
    "IN_PROCESS",
    "MAX_DIMENSIONS",
    "ON_SERVER",
    "VectorPath",
    "create_vector_index",
    "rank_fusion_stage",
    "vector_index_command",
    "vector_path",
    "vector_search_pipeline",
]

INDEX_NAME = "mindstore_vectors"
IN_PROCESS = "in process"
ON_SERVER = "server ($vectorSearch)"
FILTER_FIELDS = ("tenant", "e", "o", "r", "t", "task")
"""The vector documents' fields a `$vectorSearch` filter may name (indexed as filters)."""


@dataclass(frozen=True)
class VectorPath:
    """Where this store ranks vectors (`path`: `IN_PROCESS` or `ON_SERVER`), and why."""

    path: str
    reason: str


MAX_DIMENSIONS = 8192
"""The most dimensions a `vectorSearch` index takes (MongoDB's documented limit)."""


def vector_index_command(dimensions: int) -> dict[str, Any]:
    """`createSearchIndexes` for the vectors: one `vector` field (cosine; int8 binary
    vectors are indexed as they are) and the scope's fields as filters."""
    fields: list[dict[str, Any]] = [
        {"type": "vector", "path": "v", "numDimensions": dimensions, "similarity": "cosine"}
    ]
    fields += [{"type": "filter", "path": name} for name in FILTER_FIELDS]
    return {
        "createSearchIndexes": SEARCH_VECTORS,
        "indexes": [{"name": INDEX_NAME, "type": "vectorSearch", "definition": {"fields": fields}}],
    }


def vector_search_pipeline(
    query_vector: Sequence[float],
    *,
    tenant: str,
    tag: str,
    limit: int,
    owner: str | None = None,
    roles: Sequence[str] = (),
    since: int | None = None,
    until: int | None = None,
    task_ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The `$vectorSearch` pipeline of one ranking: exact (ENN) nearest neighbours, the
    tenant and the model always in its `filter` (owner, roles, time in microseconds and
    tasks when asked), then the fields a hit shows and the score."""
    clauses: list[dict[str, Any]] = [{"tenant": {"$eq": tenant}}, {"e": {"$eq": tag}}]
    if owner is not None:
        clauses.append({"o": {"$eq": owner}})
    if roles:
        clauses.append({"r": {"$in": sorted(roles)}})
    if since is not None:
        clauses.append({"t": {"$gte": since}})
    if until is not None:
        clauses.append({"t": {"$lt": until}})
    if task_ids is not None:
        clauses.append({"task": {"$in": sorted(task_ids)}})
    return [
        {
            "$vectorSearch": {
                "index": INDEX_NAME,
                "path": "v",
                "queryVector": [float(x) for x in query_vector],
                "exact": True,
                "limit": limit,
                "filter": {"$and": clauses},
            }
        },
        {
            "$project": {
                "task": 1, "o": 1, "r": 1, "t": 1,
                "score": {"$meta": "vectorSearchScore"},
            }
        },
    ]  # fmt: skip


def rank_fusion_stage(pipelines: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """A `$rankFusion` stage over named input pipelines (reciprocal rank fusion, k = 60,
    on the server). Not used by mindstore's hybrid search: its lexical ranking is its own
    index's, not a pipeline on ``search_vectors`` that the stage could take, and its
    fusion takes k = 2 (`fusion.RRF_K`), which the stage cannot (docs/search.md)."""
    return {"$rankFusion": {"input": {"pipelines": pipelines}}}


async def vector_path(database: Any, kind: str) -> VectorPath:
    """The capability check: whether `$vectorSearch` can rank this store's vectors."""
    if kind == "embedded":
        return VectorPath(IN_PROCESS, "the embedded backend has no vector index")
    try:
        cursor = await database[SEARCH_VECTORS].aggregate(
            [{"$listSearchIndexes": {"name": INDEX_NAME}}]
        )
        found = await cursor.to_list(None)
    except Exception as error:  # no search process: the command is unknown or refused
        return VectorPath(IN_PROCESS, f"no search index support ({type(error).__name__})")
    if not found:
        return VectorPath(IN_PROCESS, f"no vectorSearch index {INDEX_NAME!r} on {SEARCH_VECTORS}")
    if not found[0].get("queryable"):
        return VectorPath(IN_PROCESS, f"the index {INDEX_NAME!r} is not queryable yet")
    return VectorPath(ON_SERVER, f"vectorSearch index {INDEX_NAME!r}")


async def create_vector_index(database: Any, kind: str, dimensions: int) -> None:
    """Ask the server to build the `vectorSearch` index (`vector_index_command`). The
    server builds it in the background: it serves queries once `$listSearchIndexes` says
    it is queryable, which a store checks when it is opened (`vector_path`)."""
    if (
        isinstance(dimensions, bool)
        or not isinstance(dimensions, int)
        or not (1 <= dimensions <= MAX_DIMENSIONS)
    ):
        raise ValidationError(f"dimensions: a whole number from 1 to {MAX_DIMENSIONS}")
    if kind == "embedded":
        raise ConfigurationError(
            "the embedded backend has no vector index: vectors are ranked in the process"
        )
    try:
        await database.command(vector_index_command(dimensions))
    except OperationFailure as error:  # no search process, or the index exists already
        raise ConfigurationError(
            f"the server refused createSearchIndexes: {error.details or error}"
        ) from None
