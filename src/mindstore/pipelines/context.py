"""Context-view pipelines: the current level with the latest checkpoint applied, on the server.

Compression never deletes messages; it appends a compression message whose checkpoint
lists the compressed ids (docs/compression.md). Building the model's context therefore
means: take the current level's messages, find its latest checkpoint, drop what it
compressed. Doing that in the pipeline means a 5,000-message task with a checkpoint
sends only what is kept.

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
"""Fields a stubbed tool message keeps (`compression.checkpoint_view` builds stubs from them)."""


def compression_messages_pipeline(task: TaskFilter) -> Pipeline:
    """Every compression message of the task, all levels, as `messages` (redaction looks
    for the summaries written from a message it redacts)."""
    is_compression = {"$eq": ["$$m.role", "compression"]}
    return [
        _task_match(task),
        {"$project": {"messages": {"$filter": {"input": "$messages", "as": "m",
                                               "cond": is_compression}}}},
    ]  # fmt: skip


def latest_checkpoint_pipeline(
    task: TaskFilter, scope: str | None, field: str = "latest", *, kept_ids: bool = True
) -> Pipeline:
    """The last compression message of the level (at most one small document), in a
    one-element list named `field` (a paged task's reader takes the last of its pages' and
    its open page's). Without `kept_ids` the checkpoint's kept-id list (one id per message
    the round kept: thousands) stays on the server; a window needs only what was dropped
    and stubbed."""
    is_compression = {"$and": [_in_level_expr(scope), {"$eq": ["$$m.role", "compression"]}]}
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
        {"$project": {field: {"$slice": ["$compressions", -1]}}},
        # Only what the view needs: the part's own copy of the id lists stays on the server.
        {
            "$project": {
                f"{field}.id": 1,
                **(
                    {f"{field}.content.metadata": 1}
                    if kept_ids
                    else {
                        f"{field}.content.metadata.checkpoint.{name}": 1
                        for name in CHECKPOINT_FIELDS_BUT_KEPT
                    }
                ),
                f"{field}.content.cache": 1,
            }
        },
    ]


CHECKPOINT_FIELDS_BUT_KEPT = ("checkpoint_id", "timestamp", "compressed_message_ids", "metadata")
"""What `CompressionCheckpoint.from_parts` reads of a stored checkpoint, its kept ids aside."""


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
    cond: dict[str, Any] = {"$and": [_in_level_expr(scope), {"$ne": ["$$m.role", "compression"]}]}
    if excluded_ids:
        cond = {"$and": [cond, {"$eq": [{"$in": ["$$m.id", literal(list(excluded_ids))]}, False]}]}
    kept: dict[str, Any] = {"$filter": {"input": "$messages", "as": "m", "cond": cond}}
    if stubbed_ids:
        skeleton = _stub_skeleton()
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


# ---------------------------------------------------------------------------------------
# The model window read: the level's start and its newest messages, from one snapshot.
# ---------------------------------------------------------------------------------------

MODEL_ROLES = ("system", "user", "assistant", "tool")
"""Roles a model sees as they are; an informational message only when a part says so."""
MAX_SLICE = 2**31 - 1
"""`$slice` takes a 32-bit count on a server."""
CHECKPOINT_PATH = "cp.metadata.checkpoint"
HEAVY_FIELDS = ("level", "view", "visible", "compressed", "stubbed")
"""Working arrays of the window pipelines: computed on the server, never sent."""
CHECKPOINT_ID_LISTS = (
    "cp.compressed_message_ids",
    "cp.kept_message_ids",
    f"{CHECKPOINT_PATH}.compressed_message_ids",
    f"{CHECKPOINT_PATH}.kept_message_ids",
    f"{CHECKPOINT_PATH}.metadata.stubbed_message_ids",
)
"""A checkpoint's id lists grow with the level (thousands of ids): they are used on the
server to filter the view and left there; the client gets counts instead."""


def _if_null(expression: Any, default: Any) -> dict[str, Any]:
    return {"$ifNull": [expression, default]}


def model_visible_expr(var: str = "$$m") -> dict[str, Any]:
    """True for a message the model may see: a model role, or an informational message
    with a part marked `is_visible_ai` (mirrors `mindstore.compression.window.model_visible`).
    A missing `is_visible_ai` reads as false (`$ifNull`: comparing a missing field raises
    on the embedded backend)."""
    visible_part = {
        "$filter": {
            "input": _if_null(f"{var}.content", []),
            "as": "p",
            "cond": {"$eq": [_if_null("$$p.is_visible_ai", False), True]},
        }
    }
    return {
        "$or": [
            {"$in": [f"{var}.role", literal(list(MODEL_ROLES))]},
            {
                "$and": [
                    {"$eq": [f"{var}.role", "informational"]},
                    {"$gt": [{"$size": visible_part}, 0]},
                ]
            },
        ]
    }


def _stub_skeleton() -> dict[str, Any]:
    """A stubbed tool message (`$$m`): its header fields and, of each result, only the
    type, call id and tool name."""
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
    return skeleton


def _view_stages(task: TaskFilter, scope: str | None, config_index: int | None) -> Pipeline:
    """Stages leaving one row with the level's view and its visible part (working fields).

    `level`: the level without compression messages; `cp`: the latest checkpoint's part
    (`$unwind` of at most one element, so always one row); `view`: `level` minus the ids
    the checkpoint dropped, stubbed tool results cut to a skeleton; `visible`: what a
    model may see of `view`, plus the checkpoint's summary anchor (the client places the
    summary after it, then drops it if it is bookkeeping).
    """
    in_level = _in_level_expr(scope)
    is_mark = {"$and": [in_level, {"$eq": ["$$m.role", "compression"]}]}
    not_mark = {"$and": [in_level, {"$ne": ["$$m.role", "compression"]}]}
    first: dict[str, Any] = {
        "_id": 0,
        "level": {"$filter": {"input": "$messages", "as": "m", "cond": not_mark}},
        "marks": {"$slice": [{"$filter": {"input": "$messages", "as": "m", "cond": is_mark}}, -1]},
    }
    if config_index is not None:
        first["config"] = {"$slice": ["$messages", min(config_index, MAX_SLICE), 1]}
    has_checkpoint = {"$ne": [_if_null("$$p.metadata.checkpoint", None), None]}
    dropped = {
        "$and": [
            {"$in": ["$$m.id", "$compressed"]},
            {"$eq": [{"$in": ["$$m.id", "$stubbed"]}, False]},
        ]
    }
    kept = {"$filter": {"input": "$level", "as": "m", "cond": {"$eq": [dropped, False]}}}
    stubbed = {"$cond": [{"$in": ["$$m.id", "$stubbed"]}, _stub_skeleton(), "$$m"]}
    carried = dict.fromkeys(
        ("level", "config", "mark_id", "cp", "compressed", "stubbed", "anchor"), 1
    )
    return [
        _task_match(task),
        {"$project": first},
        {"$unwind": {"path": "$marks", "preserveNullAndEmptyArrays": True}},
        {
            "$project": {
                "level": 1,
                "config": 1,
                "mark_id": _if_null("$marks.id", None),
                "cp": {
                    "$slice": [
                        {
                            "$filter": {
                                "input": _if_null("$marks.content", []),
                                "as": "p",
                                "cond": has_checkpoint,
                            }
                        },
                        1,
                    ]
                },
            }
        },
        {"$unwind": {"path": "$cp", "preserveNullAndEmptyArrays": True}},
        {
            "$project": {
                "level": 1,
                "config": 1,
                "mark_id": 1,
                "cp": 1,
                "compressed": _if_null(f"${CHECKPOINT_PATH}.compressed_message_ids", []),
                "stubbed": _if_null(f"${CHECKPOINT_PATH}.metadata.stubbed_message_ids", []),
                "anchor": _if_null(f"${CHECKPOINT_PATH}.metadata.summary_after_id", None),
            }
        },
        {"$project": {**carried, "view": {"$map": {"input": kept, "as": "m", "in": stubbed}}}},
        {
            "$project": {
                **carried,
                "view": 1,
                "visible": {
                    "$filter": {
                        "input": "$view",
                        "as": "m",
                        "cond": {"$or": [model_visible_expr(), {"$eq": ["$$m.id", "$anchor"]}]},
                    }
                },
            }
        },
    ]


def _stubbed_among(ids: Any) -> dict[str, Any]:
    """The ids of `ids` (an id array expression, evaluated once) that the checkpoint
    stubbed: the client stubs those messages."""
    return {"$filter": {"input": ids, "as": "i", "cond": {"$in": ["$$i", "$stubbed"]}}}


def _strip() -> dict[str, Any]:
    return {
        "$project": {
            **dict.fromkeys(HEAVY_FIELDS, 0),
            **dict.fromkeys(CHECKPOINT_ID_LISTS, 0),
        }
    }


def context_window_pipeline(
    task: TaskFilter,
    scope: str | None,
    *,
    head: int,
    tail: int,
    config_index: int | None = None,
) -> Pipeline:
    """One row: the level's first `head` view messages (bookkeeping included), the system
    messages after them, the last `tail` visible messages, the counts that say what was
    not read, the latest checkpoint without its id lists, and optionally the message at
    `config_index` (the level's task config, when it is not at the level's start).

    Row fields: `head`, `systems`, `tail`, `stubbed_head` / `stubbed_tail` (ids to stub
    there), `stubbed_count`,
    `level_count` (level messages, compression messages aside), `view_count` (after the
    checkpoint's drops), `visible_count`, `mark_id` (the checkpoint's message id, absent
    without one), `cp` (its compression part), `config`.
    """
    head = max(1, min(head, MAX_SLICE))
    tail = max(1, min(tail, MAX_SLICE))
    return [
        *_view_stages(task, scope, config_index),
        {
            "$project": {
                "mark_id": 1,
                "cp": 1,
                "config": 1,
                "level_count": {"$size": "$level"},
                "view_count": {"$size": "$view"},
                "visible_count": {"$size": "$visible"},
                "model_count": {
                    "$size": {
                        "$filter": {"input": "$visible", "as": "m", "cond": model_visible_expr()}
                    }
                },
                "head": {"$slice": ["$view", head]},
                "systems": {
                    "$filter": {
                        "input": {"$slice": ["$view", head, MAX_SLICE]},
                        "as": "m",
                        "cond": {"$eq": ["$$m.role", "system"]},
                    }
                },
                "tail": {"$slice": ["$visible", -tail]},
                "stubbed_count": {"$size": "$stubbed"},
                "stubbed_head": _stubbed_among({"$slice": ["$view.id", head]}),
                "stubbed_tail": _stubbed_among({"$slice": ["$visible.id", -tail]}),
            }
        },
        _strip(),
    ]


def context_range_pipeline(task: TaskFilter, scope: str | None, start: int, count: int) -> Pipeline:
    """One row: visible messages ``[start, start + count)`` of the level (what a window
    read that fell short adds), with `mark_id` and `visible_count` so the caller can tell
    that the checkpoint it read with is still the latest one."""
    start = max(0, min(start, MAX_SLICE))
    count = max(1, min(count, MAX_SLICE))
    return [
        *_view_stages(task, scope, None),
        {
            "$project": {
                "mark_id": 1,
                "visible_count": {"$size": "$visible"},
                "range": {"$slice": ["$visible", start, count]},
                "stubbed_range": _stubbed_among({"$slice": ["$visible.id", start, count]}),
            }
        },
        _strip(),
    ]
