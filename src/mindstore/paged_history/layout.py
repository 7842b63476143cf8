"""The page layout as readers outside the task repository see it (pure, no I/O).

A task's older messages live in sealed page documents (`task_pages`), its recent ones in
the task document's `messages` (the open page); docs/data-model.md, "Paged messages".
The rules every reader shares:

* page `n` of the task stored under `key` has the `_id` ``page_key(key, n)`` and names
  its task (`task`), its number (`page`) and its range of the history (`start`, `end`);

* pages ``0 .. pages-1`` are visible; a page document at or past the task's `pages` mark
  is a half-done seal, ignored by every reader (`is_visible`, `visible_clause`);
* the task's `pending` entries are committed changes to sealed messages that may not be
  folded into their page yet: a reader applies them, in list order, on top of the page's
  stored messages (`apply_pending`; idempotent, a folded entry sets the same value again);
* the history is the visible pages in page order, then the open page.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import bson

from mindstore.ids import PAGE_KEY_SEPARATOR, page_key
from mindstore.model.paging import apply_entry

__all__ = [
    "PAGE_KEY_SEPARATOR",
    "apply_pending",
    "folded_page",
    "folded_task",
    "is_paged",
    "is_visible",
    "page_count",
    "page_key",
    "page_ranges",
    "pending_pages",
    "touched_clause",
    "visible_clause",
    "visible_ids",
]


def _count(value: Any) -> int:
    """A paging counter as stored: absent (never paged) or anything odd reads as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def page_count(task: Mapping[str, Any]) -> int:
    """How many pages the task document counts (its visible pages are ``0 .. count-1``)."""
    return _count(task.get("pages"))


def is_paged(task: Mapping[str, Any]) -> bool:
    """Does the task document count any sealed page?"""
    return page_count(task) > 0


def visible_ids(task: Mapping[str, Any]) -> list[str]:
    """The `_id`s of the task's visible pages, in page order."""
    return [page_key(task["_id"], n) for n in range(page_count(task))]


def is_visible(page: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
    """A page counts when its number is below the task's `pages` mark."""
    number = page.get("page")
    return isinstance(number, int) and 0 <= number < _count(task.get("pages"))


def visible_clause(key: str, low: int, high: int) -> dict[str, Any]:
    """A query clause for pages ``[low, high)`` of the task stored under `key`."""
    return {"task": key, "page": {"$gte": low, "$lt": high}}


def page_ranges(pages: int, skipped: Iterable[int] = ()) -> list[tuple[int, int]]:
    """``[0, pages)`` without the `skipped` page numbers, as contiguous ``[low, high)``."""
    out: list[tuple[int, int]] = []
    low = 0
    for number in sorted(set(skipped)):
        if 0 <= number < pages:
            if number > low:
                out.append((low, number))
            low = number + 1
    if low < pages:
        out.append((low, pages))
    return out


def _entries(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    pending = task.get("pending")
    if not isinstance(pending, list):
        return []
    return [e for e in pending if isinstance(e, Mapping) and isinstance(e.get("i"), int)]


def touched_clause(task: Mapping[str, Any]) -> dict[str, Any]:
    """A clause (beside the tenant's) for the visible pages of `task` that hold a message
    its pending entries name: the `(tenant, task, messages.id)` index finds them."""
    ids = sorted({e["id"] for e in _entries(task) if isinstance(e.get("id"), str)})
    return {
        "task": task["_id"],
        "page": {"$lt": page_count(task)},
        "messages.id": {"$in": ids},
    }


def pending_pages(task: Mapping[str, Any], pages: Sequence[Mapping[str, Any]]) -> set[int]:
    """Numbers of the given pages (headers with `page`, `start`, `end`) that a pending
    entry of `task` changes."""
    indexes = [e["i"] for e in _entries(task)]
    return {
        page["page"]
        for page in pages
        if any(page.get("start", 0) <= i < page.get("end", 0) for i in indexes)
    }


def apply_pending(
    messages: Sequence[dict[str, Any]], start: int, task: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[int]]:
    """The messages of a page starting at index `start`, with the task's pending entries
    for them applied in list order; and the positions (in the page) that changed.

    Changed messages are copies; the others are the given objects. An entry whose message
    id does not match the message at its index is skipped (it cannot belong to it).
    """
    out = list(messages)
    touched: dict[int, None] = {}
    for entry in _entries(task):
        position = entry["i"] - start
        if not 0 <= position < len(out):
            continue
        message = out[position]
        if not isinstance(message, dict) or message.get("id") != entry.get("id"):
            continue
        path = entry.get("p")
        if not isinstance(path, str) or not path:
            continue
        if position not in touched:
            message = out[position] = copy.deepcopy(message)
            touched[position] = None
        apply_entry(message, dict(entry))  # as the task repository's readers apply it
    return out, list(touched)


def _size(message: Any) -> int:
    return len(bson.encode(message)) if isinstance(message, dict) else 0


def folded_page(page: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    """The page record with `task`'s pending entries folded in, as the writer's fold
    leaves it: the changed messages, `size_bytes` by their new size, `version` at least
    the task's `pending_at` (the version that committed them). Unchanged: the page."""
    old = page.get("messages") or []
    new, touched = apply_pending(old, page.get("start", 0), task)
    if not touched:
        return dict(page)
    delta = sum(_size(new[i]) - _size(old[i]) for i in touched)
    return dict(
        page,
        messages=new,
        size_bytes=page.get("size_bytes", 0) + delta,
        version=max(page.get("version", 0), task.get("pending_at", 0)),
    )


def folded_task(task: Mapping[str, Any], sealed_bytes: int) -> dict[str, Any]:
    """The task record once its pending entries are folded into pages holding
    `sealed_bytes`: an empty `pending` list."""
    return dict(task, pending=[], sealed_bytes=sealed_bytes)
