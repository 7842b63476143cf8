"""A new task's long history written as sealed pages ahead of its task document.

`tasks.create` (and everything that creates from a history: `import_task`, forks, dialog
imports, the LangGraph saver) stores a history that would be sealed at once (due for a
seal, or too large for one document) in two kinds of writes: its sealed pages first,
each under its deterministic id (`page_key(task key, n)`) and carrying the task's `born`
(its `created_at`), then ONE insert of the task document whose paging mark (`sealed`,
`pages`, `sealed_bytes`) counts them. Every reader reads pages only through a task's mark
(``page < pages``), so before that insert no reader, report or backup sees any of the
history, and after it all of it: the insert is the one write that makes it visible.

A crash before the insert leaves pages no task counts (orphans): invisible, taken over
by the next create of the same messages, and written over by any create once they are
older than `ORPHAN_GRACE`; `dialogs.repair()` removes them then (`remove_orphans`).
A younger page under the id may be a create still running: a create of other messages
does not write over it (`Conflict`), so two creates of one id racing never mix their
pages. docs/write-paths.md, "Creating a long history", gives the order and the crash
table.

* `cut_history` (pure): where the history is cut. `model.paging.cut_pages` over the whole
  history from index 0, as one seal after a batch append would cut it: every full page,
  the rest (less than a page, at least the last message) left open. So the page
  boundaries are those appends and seals give the same history (a page's range depends
  only on the messages from its start); the created task may hold one more full page
  than a task grown message by message, whose open page keeps up to two. When the rest
  would not fit in a task document, everything but the last message is cut (a partial
  last page, as a forced seal cuts).
* `write_pages`, `confirm_pages`: the pages before the insert (each written only where no
  page stands or an orphan older than the grace does, and kept where a page of the same
  messages stands);
  after it, a check that the pages the task counts are its own (a sweep may have got in
  between, or the pages were another attempt's with the same messages), rewriting any
  that is not.
* `remove_orphans`: the tenant's pages that no task counts and never will.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo.errors import DuplicateKeyError

from mindstore.errors import Conflict, TaskTooLarge
from mindstore.ids import task_id_of, task_key
from mindstore.model import id_filter
from mindstore.model.header import TaskHeader
from mindstore.model.paging import (
    PageCut,
    PagePolicy,
    cut_pages,
    page_document,
    sealed_header,
    should_seal,
)
from mindstore.model.storage_form import bson_size
from mindstore.repositories.engine import document_estimate

logger = logging.getLogger(__name__)

JSON = dict[str, Any]

CHUNK = 500
"""Task keys per query of the orphan sweep (as erase and retention chunk them)."""
PAGE_FIELDS_BYTES = 4096
"""Room kept in a page document for its fields other than the messages."""
ORPHAN_GRACE = timedelta(hours=1)
"""How long the pages of a create count as under way. A create writes its pages within
half of it (`create_deadline`), so a page no task counts that is younger may belong to a
create still running: only a create of the same messages takes it over, and
`dialogs.repair()` leaves it. Half, not all: a racing create passed its no-task check
before the winner's insert, so it stops writing within a grace of the winner's `born`,
and the winner's pages are never old enough to be written over while it could."""


def create_deadline() -> float:
    """The `time.monotonic()` after which a create started now writes no more pages."""
    return time.monotonic() + ORPHAN_GRACE.total_seconds() / 2


@dataclass(frozen=True)
class HistoryCut:
    """A new task's history cut into sealed pages and the open page."""

    cuts: tuple[PageCut, ...]
    pages: tuple[list[JSON], ...]
    """Each page's stored messages, in page order."""
    open: list[JSON]
    """The messages left in the task document."""
    header: TaskHeader
    """The task's header with its paging mark (`sealed`, `pages`, `sealed_bytes`,
    `id_filter_words`); every other field is the history's, as folded before the cut."""
    id_filter: id_filter.Words
    """The filter of the sealed ids (exactly-once appends, `model/id_filter.py`)."""


def _fits(header: TaskHeader, head_bytes: int, limit: int) -> bool:
    """Would the task document (its open page, array keys, header budget and the
    `head_bytes` of its other fields) stay within `limit`?"""
    return document_estimate(header) + head_bytes <= limit


def _page_fits(cut: PageCut, limit: int) -> bool:
    """A page document holds its messages, their array keys and a few fields (two task
    keys of at most 2 x 128 characters, numbers, dates)."""
    return cut.size_bytes + (cut.end - cut.start) * 8 + PAGE_FIELDS_BYTES <= limit


def _cut(
    header: TaskHeader, stored: Sequence[JSON], sizes: Sequence[int], policy: PagePolicy, *,
    force: bool,
) -> HistoryCut | None:  # fmt: skip
    cuts = cut_pages(sizes, first_index=0, first_page=0, policy=policy, force=force)
    if not cuts:
        return None
    sealed = stored[: cuts[-1].end]
    blocks = id_filter.build(len(sealed), (m["id"] for m in sealed if isinstance(m.get("id"), str)))
    return HistoryCut(
        cuts=tuple(cuts),
        pages=tuple(list(stored[cut.start : cut.end]) for cut in cuts),
        open=list(stored[cuts[-1].end :]),
        header=sealed_header(header, cuts, len(blocks)),
        id_filter=blocks,
    )


def cut_history(
    task_id: str, header: TaskHeader, stored: Sequence[JSON], *, policy: PagePolicy | None,
    head_bytes: int, max_document_bytes: int,
) -> HistoryCut | None:  # fmt: skip
    """The pages a new task with this folded `header` and these `stored` messages is
    created with; None when it is created as one document (no page policy, or not due for
    a seal and within the limit). Raises `TaskTooLarge` (nothing is written) when no cut
    fits: a single message larger than a document."""
    fits = _fits(header, head_bytes, max_document_bytes)
    if policy is None or (fits and not should_seal(header, policy)):
        if not fits:
            raise TaskTooLarge(task_id, 0, header.size_bytes + head_bytes, max_document_bytes)
        return None
    sizes = [bson_size(message) for message in stored]
    cut = _cut(header, stored, sizes, policy, force=False)
    if cut is None and fits:
        return None  # due, but no full page to cut (one large message, then the last)
    if cut is None or not _fits(cut.header, head_bytes, max_document_bytes):
        cut = _cut(header, stored, sizes, policy, force=True)  # as a seal forced by the limit
        if cut is None or not _fits(cut.header, head_bytes, max_document_bytes):
            raise TaskTooLarge(task_id, 0, header.size_bytes + head_bytes, max_document_bytes)
    if not all(_page_fits(page, max_document_bytes) for page in cut.cuts):
        largest = max(page.size_bytes for page in cut.cuts)
        raise TaskTooLarge(task_id, 0, largest, max_document_bytes)
    return cut


def _page(tenant: str, key: str, born: datetime, cut: PageCut, messages: list[JSON]) -> JSON:
    # version 0: the task document is inserted at version 0, and a page reflects it
    return page_document(
        key=key, tenant=tenant, cut=cut, messages=messages, version=0, now=born, born=born
    )


async def write_pages(
    pages: Any, *, tenant: str, key: str, born: datetime, history: HistoryCut, deadline: float
) -> None:
    """Write every page of `history`, in order. The caller has checked that no task of
    that id exists, so what stands under a page's id is no task's page: a crashed or
    running create's, or a deleted task's. It is written over when it is older than
    `ORPHAN_GRACE`, kept when it holds the same messages (a retried create's, or a twin
    racing this one: a message id names one message), and otherwise the create stops with
    `Conflict` before its insert, leaving the other create's pages as they are.

    Raises:
        Conflict: another create of this id, of other messages, wrote a page less than
            `ORPHAN_GRACE` ago; or this create passed its `deadline`.
    """
    stale = born - ORPHAN_GRACE
    for cut, messages in zip(history.cuts, history.pages, strict=True):
        if time.monotonic() > deadline:
            raise Conflict(
                f"task {task_id_of(key)!r}: the create took longer than {ORPHAN_GRACE / 2} "
                "to write its pages; stopped before its insert (dialogs.repair() removes "
                "what it wrote)"
            )
        await _take_page(pages, tenant, _page(tenant, key, born, cut, messages), stale)


async def _take_page(pages: Any, tenant: str, document: JSON, stale: datetime) -> None:
    """Write `document` where no page or an orphan older than `stale` stands; leave a page
    of the same messages; refuse any other. (Not told apart by `born`: two creates in
    one millisecond have the same.)"""
    orphan = {"$or": [{"born": {"$lt": stale}}, {"born": {"$exists": False}}]}
    ids = [message.get("id") for message in document["messages"]]
    for _ in range(3):  # a page removed between the write and the read: write again
        try:
            await pages.replace_one(
                {"_id": document["_id"], "tenant": tenant, **orphan}, document, upsert=True
            )
            return
        except DuplicateKeyError:
            standing = await pages.find_one(
                {"_id": document["_id"], "tenant": tenant}, {"_id": 0, "messages.id": 1}
            )
        if standing is None:
            continue
        if [message.get("id") for message in standing.get("messages") or []] == ids:
            return  # the same messages: a retry's or a twin's page stands
        break
    raise Conflict(
        f"task {task_id_of(document['task'])!r}: another create of this id is writing "
        f"other messages (or stopped less than {ORPHAN_GRACE} ago); retry later, or "
        "remove what a stopped create left with dialogs.repair()"
    )


async def confirm_pages(
    pages: Any, tasks: Any, *, tenant: str, key: str, born: datetime, history: HistoryCut
) -> list[int]:
    """After the task document was inserted: rewrite any page it counts that is missing
    or not its own (another `born`), and return their numbers (usually none).

    Between the pages and the insert, a sweep of pages without a task (retention, a
    repair with no grace) may have removed one, or a create of the same id racing this
    one may have written its own over it. Nothing is rewritten once the task is no
    longer this one (deleted, or deleted and created again)."""
    count = len(history.cuts)
    rows = await pages.find(
        {"tenant": tenant, "task": key, "page": {"$lt": count}, "born": born},
        {"_id": 0, "page": 1},
    ).to_list(None)
    present = {row.get("page") for row in rows}
    missing = [number for number in range(count) if number not in present]
    if not missing:
        return []
    if not await tasks.count_documents({"_id": key, "tenant": tenant, "created_at": born}, limit=1):
        return []
    logger.warning("task %r: pages %s were changed before its insert; rewritten", key, missing)
    for number in missing:
        document = _page(tenant, key, born, history.cuts[number], history.pages[number])
        with contextlib.suppress(DuplicateKeyError):  # our own page is there by now
            await pages.replace_one(
                {"_id": document["_id"], "tenant": tenant, "born": {"$ne": born}},
                document,
                upsert=True,
            )
    return missing


async def remove_orphans(pages: Any, tasks: Any, tenant: str, *, before: datetime) -> list[str]:
    """Delete the tenant's pages that no task counts and never will, written before
    `before`; return their ids (sorted).

    Such a page is one whose task does not exist (a create that stopped before its
    insert, a delete that stopped before its pages), or one at or past its task's mark
    with another `born` than the task's `created_at` (left by a deleted namesake or a
    crashed create, under a task created since). A page past the mark with the task's own
    `born` is a seal under way or cut short, which the task's next seal overwrites: it is
    kept. Every delete is also guarded by `created_at < before`, so a page rewritten since
    it was read (by a create or a seal) is not deleted; `before` leaves time to a create
    whose pages are written and whose insert has not landed yet."""
    keys = sorted(k for k in await pages.distinct("task", {"tenant": tenant}) if isinstance(k, str))
    removed: list[str] = []
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start : start + CHUNK]
        forms = [*chunk, *(task_id_of(key) for key in chunk)]  # a legacy task's bare id too
        live = {
            task_key(tenant, task_id_of(document["_id"])): document
            for document in await tasks.find(
                {"tenant": tenant, "_id": {"$in": forms}}, {"_id": 1, "pages": 1, "created_at": 1}
            ).to_list(None)
        }
        gone = [key for key in chunk if key not in live]
        if gone:
            rows = await pages.find(
                {"tenant": tenant, "task": {"$in": gone}, "created_at": {"$lt": before}},
                {"_id": 1},
            ).to_list(None)
            removed += await _delete(pages, tenant, [row["_id"] for row in rows], before)
        if live:
            rows = await pages.find(
                {"tenant": tenant, "task": {"$in": sorted(live)}, "created_at": {"$lt": before}},
                {"_id": 1, "task": 1, "page": 1, "born": 1},
            ).to_list(None)
            by_task: dict[str, list[JSON]] = {}
            for row in rows:
                by_task.setdefault(row.get("task"), []).append(row)
            for key, task in live.items():
                mark, born = int(task.get("pages", 0) or 0), task.get("created_at")
                foreign = [
                    row["_id"]
                    for row in by_task.get(key, [])
                    if isinstance(row.get("page"), int)
                    and row["page"] >= mark
                    and row.get("born") != born
                ]
                removed += await _delete(pages, tenant, foreign, before, {"born": {"$ne": born}})
    return sorted(removed)


async def _delete(
    pages: Any, tenant: str, ids: list[Any], before: datetime, guard: JSON | None = None
) -> list[str]:
    """Delete the pages `ids` that are still as read (written before `before`, and what
    `guard` says), in chunks; the ids asked for that were deleted."""
    deleted: list[str] = []
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        query = {"tenant": tenant, "_id": {"$in": chunk}, "created_at": {"$lt": before},
                 **(guard or {})}  # fmt: skip
        result = await pages.delete_many(query)
        if result.deleted_count == len(chunk):
            deleted += [str(i) for i in chunk]
        elif result.deleted_count:  # some were rewritten since they were read: kept
            kept = await pages.find({"tenant": tenant, "_id": {"$in": chunk}}, {"_id": 1}).to_list(
                None
            )
            deleted += [str(i) for i in chunk if i not in {row["_id"] for row in kept}]
    return deleted
