"""The analytics reports over paged tasks (pure builders; docs/analytics.md, "Paged tasks").

A paged task keeps its recent messages in the task document (the open page) and older
ones in `task_pages` documents. A report over a tenant with paged tasks runs as one
pipeline on the server, over the tasks collection: its task `$match` (the message-time
hint relaxed for paged tasks, whose messages in range may all be sealed), then the
paged-history reader's stages (`mindstore.paged_history.history_stages`: one document per
open page, visible page and set of pending patches, each carrying the task's `_id` and
`owner`), then the report's own stages unchanged. A task's units (its usage, a session,
a span, a tool call) are grouped by the report's first `$group` across all its segments,
so every row is what the report gives over the same history unpaged.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from mindstore.paged_history import Patch, history_stages, paged_or

Pipeline = list[dict[str, Any]]

TIME_HINT = "messages.started_ts"
"""The task `$match` field that narrows a report to tasks with a message in range."""


def _task_match(pipeline: Sequence[dict[str, Any]]) -> dict[str, Any]:
    first = pipeline[0] if pipeline else {}
    if set(first) != {"$match"}:
        raise ValueError("an analytics pipeline starts with its task $match")
    match: dict[str, Any] = first["$match"]
    return match


def history_query(pipeline: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The tasks a report may cover through their pages: its task filter without the
    message-time hint (a paged task may have messages in range in its pages only)."""
    return {k: v for k, v in _task_match(pipeline).items() if k != TIME_HINT}


def over_history(
    pipeline: Sequence[dict[str, Any]], tenant: str, patches: Sequence[Patch] = ()
) -> Pipeline:
    """The report's pipeline over every message of the tasks it covers, sealed pages
    included, with the pending `patches` (`PagedHistory.patches`) applied."""
    match = paged_or(_task_match(pipeline), TIME_HINT)
    return [{"$match": match}, *history_stages(tenant, patches), *copy.deepcopy(list(pipeline[1:]))]
