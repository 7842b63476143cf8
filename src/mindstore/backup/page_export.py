"""Backup of a paged task's sealed pages, consistent with its task record.

A paged task is several documents: its task document (header and open page) and its page
documents. Backup writes the visible pages (``page < pages``; a half-done seal's page is
left out) and the task record as of ONE task version:

1. the task's visible pages are read in page order, a few at a time, through the
   paged-history reader (`mindstore.paged_history.PagedHistory.visible_pages`), into a
   spool (an anonymous temporary file: memory holds one batch whatever the history's size);
2. the task's `version` is read again. Unchanged means nothing was committed to the task
   meanwhile, so no page can reflect a later change (a page only changes to fold in a
   change already committed in the task document): the spooled pages and the task record
   read before go to the backup together. Changed, the task is read again and the pages
   with it (a few attempts; a task that never holds still makes the backup fail, rather
   than save a torn history).

The task's `pending` changes (committed, maybe not yet folded into their page) are
applied to the pages as they are written, and the record is written with an empty
`pending` list (and `sealed_bytes` the pages' size then): a backup holds each message
once, in its committed state.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mindstore.errors import BackupError
from mindstore.paged_history import (
    IncompleteHistory,
    PagedHistory,
    folded_page,
    folded_task,
    page_count,
)

from .container import RecordWriter
from .spool import CheckedSpool

__all__ = ["PageExporter"]

#: Pages read per query (a page is a bounded slice of a history).
PAGE_BATCH = 8
#: Reads of a task that keeps changing before the backup gives up.
ATTEMPTS = 5
_SPOOLED = "task_pages"


class PageExporter:
    """Writes the visible pages of paged tasks, and says which task record goes with them."""

    def __init__(self, tasks: Any, pages: Any) -> None:
        self.tasks = tasks
        self.history = PagedHistory(tasks, pages)

    async def export(
        self, task: dict[str, Any], writer: RecordWriter
    ) -> tuple[dict[str, Any], int] | None:
        """Write `task`'s visible pages; return (the task record to write, the number of
        sealed messages written), or None if the task was deleted meanwhile."""
        current: dict[str, Any] | None = task
        for _ in range(ATTEMPTS):
            assert current is not None
            spool = CheckedSpool()
            with contextlib.closing(spool):
                complete = await self._spool(current, spool)
                now = await self.tasks.find_one(
                    {"_id": current["_id"], "tenant": current["tenant"]}, {"version": 1}
                )
                if now is None:
                    return None
                if now.get("version") == current.get("version"):
                    if not complete:
                        raise BackupError(
                            f"task {current['_id']!r} counts {current.get('pages')} sealed pages "
                            f"but the database lacks some of them"
                        )
                    return self._write(current, spool, writer)
            current = await self.tasks.find_one(
                {"_id": current["_id"], "tenant": current["tenant"]}
            )
            if current is None:
                return None
            if not page_count(current):
                return current, 0
        raise BackupError(
            f"task {task['_id']!r} changed during each of {ATTEMPTS} attempts to back it up; "
            f"run the backup again"
        )

    async def _spool(self, task: dict[str, Any], spool: CheckedSpool) -> bool:
        """Spool pages ``0 .. pages-1`` in order (`PagedHistory.visible_pages`); False if
        one is missing or newer than the task (it changed meanwhile, or the database lacks
        it)."""
        try:
            async for batch in self.history.visible_pages(task, PAGE_BATCH):
                spool.add(_SPOOLED, batch)
        except IncompleteHistory:
            return False
        return True

    @staticmethod
    def _write(
        task: dict[str, Any], spool: CheckedSpool, writer: RecordWriter
    ) -> tuple[dict[str, Any], int]:
        pending = bool(task.get("pending"))
        messages = size = 0
        for batch in spool.batches(_SPOOLED):
            for page in batch:
                if pending:
                    page = folded_page(page, task)
                messages += len(page.get("messages") or [])
                size += page.get("size_bytes", 0)
                writer.add(page)
        return (folded_task(task, size) if pending else task), messages
