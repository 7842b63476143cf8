"""Context-view pipelines: the current level with the latest checkpoint applied, on the server.

Compression never deletes messages; it appends a compression message whose checkpoint
lists the compressed ids (seed 004). Building the model's context therefore means: take the
current level's messages, find its latest checkpoint, drop what it compressed. Doing that
in the pipeline means a 5,000-message task with a checkpoint sends only what is kept.

Portable operators only: `$filter` with `$and`/`$or`/`$eq`/`$ne`/`$in` expressions and
`$slice`; negation is written `{"$eq": [expr, false]}` because mongomock evaluates the
array form of `$not` wrongly inside `$filter`.
"""

from __future__ import annotations

from typing import Any, Sequence

from mindstore.pipelines.boundaries import Pipeline, _in_level_expr, _task_match


def latest_checkpoint_pipeline(task_id: str, tenant: str, scope: str | None) -> Pipeline:
    """The last compression message of the level (at most one small document)."""
    is_compression = {
        "$and": [_in_level_expr(scope), {"$eq": ["$$m.role", "compression"]}]
    }
    return [
        _task_match(task_id, tenant),
        {
            "$project": {
                "_id": 0,
                "compressions": {
                    "$filter": {"input": "$messages", "as": "m", "cond": is_compression}
                },
            }
        },
        {"$project": {"latest": {"$slice": ["$compressions", -1]}}},
        # Only what the view needs: the part's own copy of the id lists stays on the server.
        {"$project": {"latest.id": 1, "latest.content.metadata": 1, "latest.content.cache": 1}},
    ]


def context_messages_pipeline(
    task_id: str, tenant: str, scope: str | None, excluded_ids: Sequence[str]
) -> Pipeline:
    """The level's conversation minus `excluded_ids` (the latest checkpoint's compressed ids).

    Compression messages are bookkeeping, not context: they are left out here and their
    checkpoint comes from `latest_checkpoint_pipeline`.
    """
    cond: dict[str, Any] = {
        "$and": [_in_level_expr(scope), {"$ne": ["$$m.role", "compression"]}]
    }
    if excluded_ids:
        cond = {
            "$and": [cond, {"$eq": [{"$in": ["$$m.id", list(excluded_ids)]}, False]}]
        }
    return [
        _task_match(task_id, tenant),
        {
            "$project": {
                "_id": 0,
                "messages": {"$filter": {"input": "$messages", "as": "m", "cond": cond}},
            }
        },
    ]
