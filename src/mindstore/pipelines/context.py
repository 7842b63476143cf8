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

from collections.abc import Sequence
from typing import Any

from mindstore.pipelines.boundaries import (
    Pipeline,
    TaskFilter,
    _in_level_expr,
    _task_match,
    literal,
)

STUB_SKELETON_FIELDS = ("id", "role", "task_id", "started_ts", "finished_ts", "scope", "depth")
"""Fields a stubbed tool message keeps (mindstore.compression.view builds stubs from them)."""


def latest_checkpoint_pipeline(task: TaskFilter, scope: str | None) -> Pipeline:
    """The last compression message of the level (at most one small document)."""
    is_compression = {
        "$and": [_in_level_expr(scope), {"$eq": ["$$m.role", "compression"]}]
    }
    return [
        _task_match(task),
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
    task: TaskFilter,
    scope: str | None,
    excluded_ids: Sequence[str],
    stubbed_ids: Sequence[str] = (),
) -> Pipeline:
    """The level's conversation minus `excluded_ids`, with `stubbed_ids` cut to a skeleton.

    Compression messages are bookkeeping, not context: they are left out here and their
    checkpoint comes from `latest_checkpoint_pipeline`. A stubbed tool message keeps only
    its header fields and the call id and tool name of each result (the client turns
    that into a short stub), so a long tool output never leaves the server.
    """
    cond: dict[str, Any] = {
        "$and": [_in_level_expr(scope), {"$ne": ["$$m.role", "compression"]}]
    }
    if excluded_ids:
        cond = {
            "$and": [cond, {"$eq": [{"$in": ["$$m.id", literal(list(excluded_ids))]}, False]}]
        }
    kept: dict[str, Any] = {"$filter": {"input": "$messages", "as": "m", "cond": cond}}
    if stubbed_ids:
        skeleton: dict[str, Any] = {name: f"$$m.{name}" for name in STUB_SKELETON_FIELDS}
        skeleton["content"] = {
            "$map": {
                "input": "$$m.content",
                "as": "p",
                "in": {
                    "type": "$$p.type",
                    "tool_call_id": "$$p.tool_call_id",
                    "tool_name": "$$p.tool_name",
                },
            }
        }
        kept = {
            "$map": {
                "input": kept,
                "as": "m",
                "in": {"$cond": [{"$in": ["$$m.id", literal(list(stubbed_ids))]}, skeleton, "$$m"]},
            }
        }
    return [
        _task_match(task),
        {"$project": {"_id": 0, "messages": kept}},
    ]
