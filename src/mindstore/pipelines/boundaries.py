"""Aggregation pipelines for levels, boundaries and sub-task spans (pure builders).

They rely on the `scope` and `depth` of every stored message (written once at append
time), so each is a filter or a group, never a replay of the history. Operators stay in the
portable subset of docs/design.md: `$match`, `$unwind` with `includeArrayIndex`, `$project`,
`$filter`, `$group`, `$cond`, `$sort`, and the basic comparison expressions.

The lean stored form leaves a field out when it holds its default (`scope` at the root,
`depth` 0; docs/data-model.md), and documents stored before write it out. A find-style
`$match` treats a missing field as null (`{"messages.scope": null}` matches both), but an
aggregation expression does not: `{$eq: ["$$m.scope", null]}` is false for a missing
field, on a server and on the embedded backend alike, and `{$add: [missing, 1]}` is null.
So every expression reads such a field through `stored()` (`$ifNull` with its default),
which gives the same answer for both forms.
"""

from __future__ import annotations

from typing import Any

Pipeline = list[dict[str, Any]]


TaskFilter = dict[str, Any]
"""The repository's filter for one task: stored key, tenant and (when scoped) owner."""


def literal(value: Any) -> dict[str, Any]:
    """A caller's value inside an aggregation expression, never read as one.

    A string such as ``"$$m.scope"`` or ``"$seq"`` is a variable or a field path to the
    expression language; ids are data, so every id an expression compares is wrapped.
    """
    return {"$literal": value}


STORED_DEFAULTS: dict[str, Any] = {"scope": None, "depth": 0}
"""Message fields the lean form leaves out at their default, as expressions read them."""


def stored(path: str) -> dict[str, Any]:
    """A message field inside an expression, its default when the lean form left it out
    (`path` ends with the field name: `$$m.scope`, `$messages.depth`)."""
    return {"$ifNull": [path, STORED_DEFAULTS[path.rsplit(".", 1)[-1]]]}


def _task_match(task: TaskFilter) -> dict[str, Any]:
    return {"$match": dict(task)}


def _in_level_expr(scope: str | None, var: str = "$$m") -> dict[str, Any]:
    """True for the messages of level `scope`: its entry, then its own non-entry messages."""
    own = {
        "$and": [
            {"$eq": [stored(f"{var}.scope"), literal(scope)]},
            {"$ne": [f"{var}.role", "taskentry"]},
        ]
    }
    if scope is None:
        return own
    entry = {
        "$and": [{"$eq": [f"{var}.id", literal(scope)]}, {"$eq": [f"{var}.role", "taskentry"]}]
    }
    return {"$or": [entry, own]}


def level_messages_pipeline(task: TaskFilter, scope: str | None) -> Pipeline:
    """The messages of one level, filtered server-side: only they travel over the wire."""
    return [
        _task_match(task),
        {
            "$project": {
                "_id": 0,
                "messages": {
                    "$filter": {"input": "$messages", "as": "m", "cond": _in_level_expr(scope)}
                },
            }
        },
    ]


def locate_message_pipeline(
    task: TaskFilter, message_id: str, header_fields: tuple[str, ...] = ()
) -> Pipeline:
    """One message and its position in the document's array (plus, optionally, header
    fields from the same snapshot); a paged task adds its `sealed` for the index."""
    projection: dict[str, Any] = {"_id": 0, "index": 1, "message": "$messages"}
    projection.update(dict.fromkeys(header_fields, 1))
    return [
        _task_match(task),
        {"$unwind": {"path": "$messages", "includeArrayIndex": "index"}},
        {"$match": {"messages.id": message_id}},
        {"$limit": 1},
        {"$project": projection},
    ]


TASK_BASE = "$sealed"
"""Where a task document's array starts in the history (absent: 0); a page's is `$start`."""


def _indexed(base: str) -> list[dict[str, Any]]:
    """Unwind the messages with their index in the whole history: the array position plus
    the document's `base` (a task document holds messages from `sealed` on, a sealed page
    from its `start`; docs/data-model.md "Paged messages")."""
    return [
        {"$unwind": {"path": "$messages", "includeArrayIndex": "index"}},
        {"$project": {"messages": 1, "index": {"$add": ["$index", {"$ifNull": [base, 0]}]}}},
    ]


def boundaries_pipeline(task: TaskFilter, scope: str, base: str = TASK_BASE) -> Pipeline:
    """Index of a sub-task's entry and, if it has exited, of its exit."""
    return [
        _task_match(task),
        *_indexed(base),
        {
            "$match": {
                "$or": [
                    {"messages.id": scope, "messages.role": "taskentry"},
                    {"messages.scope": scope, "messages.role": "taskexit"},
                ]
            }
        },
        {"$project": {"_id": 0, "index": 1, "role": "$messages.role"}},
    ]


IS_ENTRY = {"$eq": ["$messages.role", "taskentry"]}
IS_EXIT = {"$eq": ["$messages.role", "taskexit"]}
SPAN_ID = {"$cond": [IS_ENTRY, "$messages.id", "$messages.scope"]}
"""An unwound message's sub-task: its own id for an entry, else its scope."""


def span_members() -> dict[str, Any]:
    """`$match` the unwound messages that belong to some sub-task: entries and scoped ones."""
    return {"$match": {"$or": [{"messages.role": "taskentry"}, {"messages.scope": {"$ne": None}}]}}


def span_accumulators() -> dict[str, Any]:
    """`$group` fields of a span grouped by `SPAN_ID`: depth, own message count (entry and
    exit included), the entry's start and the exit's start (None while it runs). Shared by
    `spans_pipeline` and the analytics sub-task report."""
    return {
        "depth": {"$max": {"$cond": [IS_ENTRY, {"$add": [stored("$messages.depth"), 1]}, None]}},
        "message_count": {"$sum": 1},
        "started_ts": {"$max": {"$cond": [IS_ENTRY, "$messages.started_ts", None]}},
        "finished_ts": {"$max": {"$cond": [IS_EXIT, "$messages.started_ts", None]}},
    }


def spans_pipeline(task: TaskFilter, base: str = TASK_BASE, *, partial: bool = False) -> Pipeline:
    """Every sub-task of a task: entry, exit, depth, own message count, start and end.

    `partial`: the groups of one collection of a paged task (its pages, or its open page),
    merged by `merge_span_groups`; a sub-task whose entry lies in the other is kept."""
    pipeline = [
        _task_match(task),
        *_indexed(base),
        span_members(),
        {
            "$group": {
                "_id": SPAN_ID,
                "entry_index": {"$max": {"$cond": [IS_ENTRY, "$index", None]}},
                "exit_index": {"$max": {"$cond": [IS_EXIT, "$index", None]}},
                "parent_scope": {"$max": {"$cond": [IS_ENTRY, stored("$messages.scope"), None]}},
                **span_accumulators(),
            }
        },
    ]
    if partial:
        return pipeline
    return [*pipeline, {"$match": {"entry_index": {"$ne": None}}}, {"$sort": {"entry_index": 1}}]


def merge_span_groups(*groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows `spans_pipeline` gives for a whole history, from the partial groups of its
    parts: maxima of maxima, sums of counts; sub-tasks without an entry dropped, in entry
    order (pure)."""
    merged: dict[Any, dict[str, Any]] = {}
    for rows in groups:
        for row in rows:
            into = merged.setdefault(row["_id"], {"_id": row["_id"], "message_count": 0})
            into["message_count"] += int(row.get("message_count", 0))
            for name in ("entry_index", "exit_index", "parent_scope", "depth", "started_ts",
                         "finished_ts"):  # fmt: skip
                values = [v for v in (into.get(name), row.get(name)) if v is not None]
                into[name] = max(values) if values else None
    rows = [row for row in merged.values() if row.get("entry_index") is not None]
    return sorted(rows, key=lambda row: int(row["entry_index"]))


def with_fields(pipeline: Pipeline, fields: tuple[str, ...]) -> Pipeline:
    """The pipeline with `fields` kept by each of its `$project` stages (a paged read needs
    a document's `start`/`sealed`, `version`... beside what the pipeline projects)."""
    extra = dict.fromkeys(fields, 1)
    return [
        {"$project": {**stage["$project"], **extra}} if "$project" in stage else stage
        for stage in pipeline
    ]


def slice_projection(header_fields: tuple[str, ...], start: int, count: int) -> dict[str, Any]:
    """Header fields plus a window of the message array (explicit inclusion on purpose:
    mongomock returns only `_id` and the slice for a `$slice`-only projection, MongoDB
    returns every field)."""
    projection: dict[str, Any] = dict.fromkeys(header_fields, 1)
    projection["messages"] = {"$slice": [start, count]}
    return projection
