"""Reading paged histories for readers that run over many tasks (analytics, backup).

The task repository reads one task's pages through its own range reads; analytics and
backup read the pages of many tasks, and they do it here, so the page layout
(`layout`, `stages`) has one reader:

* `patches`: the sealed messages that the pending entries of a report's paged tasks
  change, patched as committed (`layout.apply_pending`), for `stages.history_stages`;
* `visible_pages`: a task's visible pages in page order, a few at a time, as backup
  writes them (`IncompleteHistory` when one is missing or newer than the task).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Protocol

from .layout import apply_pending, page_count, touched_clause
from .stages import Patch

__all__ = ["Collection", "IncompleteHistory", "PagedHistory"]

Document = dict[str, Any]

#: Tasks per query when reading the pages their pending entries change.
CHUNK_TASKS = 100
#: Pages read per query when a task's pages are read in order (a page is a bounded slice).
PAGE_BATCH = 8


class Cursor(Protocol):
    def to_list(self, length: int | None = None) -> Awaitable[list[Document]]: ...


class Collection(Protocol):
    """What the reader uses of a collection (pymongo's async API, embedded or server)."""

    def find(self, *args: Any, **kwargs: Any) -> Cursor: ...

    def find_one(self, *args: Any, **kwargs: Any) -> Awaitable[Document | None]: ...


class IncompleteHistory(Exception):
    """A page the task counts is missing, or reflects a later task version than the one
    read (the task changed meanwhile, or the database lacks the page)."""


class PagedHistory:
    """The paged histories of the tasks in `tasks`, their pages in `pages`."""

    def __init__(self, tasks: Collection, pages: Collection) -> None:
        self.tasks = tasks
        self.pages = pages

    async def any_paged(self, query: Mapping[str, Any]) -> bool:
        """Does some task matching `query` count a sealed page?"""
        found = await self.tasks.find_one({**query, "pages": {"$gt": 0}}, {"_id": 1})
        return found is not None

    async def patches(self, tenant: str, query: Mapping[str, Any]) -> list[Patch]:
        """For the paged tasks matching `query` that hold pending entries: their sealed
        messages those entries change, as committed. Rare: the writer folds the entries
        into the pages right after the verb that made them."""
        pending = {**query, "pages": {"$gt": 0}, "pending.0": {"$exists": True}}
        tasks = await self.tasks.find(pending, {"pages": 1, "pending": 1}).to_list(None)
        out: list[Patch] = []
        for start in range(0, len(tasks), CHUNK_TASKS):
            chunk = {task["_id"]: task for task in tasks[start : start + CHUNK_TASKS]}
            clauses = [touched_clause(task) for task in chunk.values()]
            pages = await self.pages.find({"tenant": tenant, "$or": clauses}).to_list(None)
            changed: dict[str, list[Document]] = {}
            for page in pages:
                task = chunk.get(page.get("task"))
                if task is None or not isinstance(page.get("page"), int):
                    continue
                if page["page"] >= page_count(task):
                    continue
                messages, touched = apply_pending(
                    page.get("messages") or [], page.get("start", 0), task
                )
                changed.setdefault(task["_id"], []).extend(messages[i] for i in touched)
            out += [Patch(key, tuple(found)) for key, found in changed.items() if found]
        return out

    async def visible_pages(
        self, task: Mapping[str, Any], batch: int = PAGE_BATCH
    ) -> AsyncIterator[list[Document]]:
        """`task`'s visible pages ``0 .. pages-1`` in order, `batch` per query; raises
        `IncompleteHistory` at a page that is missing or newer than `task`."""
        pages = page_count(task)
        version = task.get("version", 0)
        following = 0
        while following < pages:
            found = await self.pages.find(
                {"tenant": task["tenant"], "task": task["_id"],
                 "page": {"$gte": following, "$lt": pages}},
                sort=[("page", 1)], limit=batch,
            ).to_list(None)  # fmt: skip
            if not found:
                raise IncompleteHistory(f"page {following} of {pages}")
            for page in found:
                if page.get("page") != following or page.get("version", 0) > version:
                    raise IncompleteHistory(f"page {following} of {pages}")
                following += 1
            yield found
