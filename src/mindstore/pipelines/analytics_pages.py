"""The analytics reports over sealed pages (pure builders; docs/analytics.md, "Paged tasks").

A paged task keeps its recent messages in the task document (the open page) and older
ones in `task_pages` documents. The embedded backend has no `$unionWith`, so a report
runs its message stages over each collection and the two results are folded:

* A report whose first `$group` is keyed by message dimensions only (usage, latency,
  activity) is additive: its pipeline runs unchanged over the tasks (their open pages),
  and again over the visible pages of the paged tasks, each page presented as a task
  (`as_task`: `_id` = the task's key, `owner` = the task's owner, `messages`), and the
  rows of both are folded as rows of one run are.
* A report whose first `$group` is keyed by task (top owners, sessions, sub-tasks, tools)
  is not: a task's unit (its usage, its session, a span, a tool call) may have messages in
  both collections. For those, the server runs the whole pipeline over the unpaged tasks
  only (`unpaged`), and for the paged tasks only the stages up to that first `$group`
  (`split_units`) over the task documents and the pages; `mindstore.analytics.paging`
  merges the unit rows by their accumulators and runs the rest of the pipeline in process.

Page selection names the visible pages only (`page < pages` of each task, read from the
task document), so a half-done seal's page is never counted.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from mindstore.paged_history import visible_clause

Pipeline = list[dict[str, Any]]

CHUNK_TASKS = 100
"""Paged tasks per page query (one `$or` clause per task and page range)."""
TAIL_STAGES = frozenset({"$sort", "$limit"})


def _task_match(pipeline: Sequence[dict[str, Any]]) -> dict[str, Any]:
    first = pipeline[0] if pipeline else {}
    if set(first) != {"$match"}:
        raise ValueError("an analytics pipeline starts with its task $match")
    match: dict[str, Any] = first["$match"]
    return match


def _with_match(pipeline: Sequence[dict[str, Any]], match: dict[str, Any]) -> Pipeline:
    return [{"$match": match}, *copy.deepcopy(list(pipeline[1:]))]


def paged_tasks_query(pipeline: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The paged tasks a report covers: its task filter without the message-time hint (a
    paged task may have messages in range in its pages only), and ``pages > 0``."""
    query = {k: v for k, v in _task_match(pipeline).items() if k != "messages.started_ts"}
    query["pages"] = {"$gt": 0}
    return query


def unpaged(pipeline: Sequence[dict[str, Any]]) -> Pipeline:
    """The pipeline over the tasks that were never paged (no `pages` mark, or 0)."""
    match = dict(_task_match(pipeline))
    match["pages"] = {"$not": {"$gt": 0}}
    return _with_match(pipeline, match)


def tasks_chunk(pipeline: Sequence[dict[str, Any]], keys: Sequence[str]) -> Pipeline:
    """The pipeline over the task documents (open pages) of the given paged tasks."""
    match = dict(_task_match(pipeline))
    match["_id"] = {"$in": list(keys)}
    return _with_match(pipeline, match)


def as_task(owner: str | None) -> dict[str, Any]:
    """A page as the report's stages expect a task: `_id` the task's key, its owner."""
    return {"$project": {"_id": "$task", "owner": {"$literal": owner}, "messages": 1}}


def pages_pipeline(
    pipeline: Sequence[dict[str, Any]],
    tenant: str,
    ranges: Mapping[str, Sequence[tuple[int, int]]],
    owner: str | None,
) -> Pipeline:
    """The report's stages over pages ``[low, high)`` of each task key in `ranges` (all of
    one owner), each page read as its task."""
    clauses = [visible_clause(key, low, high) for key, spans in ranges.items()
               for low, high in spans]  # fmt: skip
    if not clauses:
        raise ValueError("no pages to read")
    match: dict[str, Any] = {"tenant": tenant, "$or": clauses}
    timed = _task_match(pipeline).get("messages.started_ts")
    if timed is not None:
        match["messages.started_ts"] = copy.deepcopy(timed)
    return [{"$match": match}, as_task(owner), *copy.deepcopy(list(pipeline[1:]))]


def local_pages_stages(pipeline: Sequence[dict[str, Any]], owner: str | None) -> Pipeline:
    """The stages `pages_pipeline` runs after its `$match`, for pages already read (pages
    with pending changes applied in process)."""
    return [as_task(owner), *copy.deepcopy(list(pipeline[1:]))]


def split_units(pipeline: Sequence[dict[str, Any]]) -> tuple[Pipeline, Pipeline, Pipeline]:
    """(stages up to and including the first `$group`, the stages after it but the
    trailing `$sort`/`$limit`, those trailing stages)."""
    stages = list(pipeline)
    first = next(i for i, stage in enumerate(stages) if "$group" in stage)
    end = len(stages)
    while end > first + 1 and set(stages[end - 1]) <= TAIL_STAGES:
        end -= 1
    return stages[: first + 1], stages[first + 1 : end], stages[end:]


def last_group(stages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The accumulators of the last `$group` among `stages`."""
    for stage in reversed(stages):
        if "$group" in stage:
            group: dict[str, Any] = stage["$group"]
            return group
    raise ValueError("no $group stage")
