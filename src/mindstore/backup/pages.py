"""Sealed pages in a backup: their shape and their continuity (pure, no I/O).

A paged task's older messages are page records (``task_pages.jsonl.gz``, format 2; see
docs/backup.md). The pages file is read before the tasks file, so verify knows a task's
pages when it reaches the task, and folds its header over pages and open page alike.
What holds for every page of a task (the page continuity of docs/data-model.md):

* the record has the shape mindstore writes: ``_id`` is ``page_key(task, page)``, `task` is
  a per-tenant task key of the record's own tenant, `page`/`start`/`end`/`size_bytes`
  are counts with ``end - start`` messages, `size_bytes` their stored size;
* a task's pages come in page order, numbered 0, 1, 2... with no page missing or twice
  (`missing`, `duplicate`, `out_of_order`), each starting where the one before ends, the
  first at 0 (`gap`, `overlap`);
* at the task: it counts exactly the pages the backup holds (`pages`: fewer is a
  `missing` page, more an `extra` one), the last ends at its `sealed` mark (`gap` or
  `overlap`), `sealed_bytes` is their size (`size`), and its `pending` list is empty
  (backup folds pending changes into the pages: `pending`);
* no page belongs to a task that is not in the backup, or to one that is not paged
  (`orphan`).

A broken rule raises `PageContinuityError` (a `BackupCorrupt`, exit code 10) whose
`problem` names which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bson

from mindstore.crypto.fields import blanked
from mindstore.ids import KEY_SEPARATOR
from mindstore.model.stored_read import read_stored
from mindstore.paged_history import page_key

from .errors import BackupCorrupt
from .shape import (
    SealedFold,
    ShapeError,
    fold_messages,
    markers,
    size_allowance,
    start_fold,
    stored_task_id,
)
from .shape import _count as count
from .shape import _messages as messages_of
from .shape import _size_matches as size_matches
from .shape import _tenant as tenant_of
from .shape import _top_level as top_level

__all__ = [
    "PAGE_PROBLEMS",
    "PageContinuityError",
    "PageFacts",
    "PagedTask",
    "check_page",
    "close_task",
    "fold_page",
]

PAGE_PROBLEMS = (
    "missing",
    "duplicate",
    "out_of_order",
    "gap",
    "overlap",
    "extra",
    "size",
    "pending",
    "orphan",
)


class PageContinuityError(BackupCorrupt):
    """A paged task's pages do not form its history: `problem` is one of
    `PAGE_PROBLEMS`, `task` the task's key."""

    def __init__(self, problem: str, task: str, message: str) -> None:
        assert problem in PAGE_PROBLEMS
        super().__init__(f"task {task!r}: {problem} page: {message}")
        self.problem = problem
        self.task = task


@dataclass(frozen=True)
class PageFacts:
    """What verify keeps of a page record (never its messages)."""

    id: str
    tenant: str
    task: str  # the task's per-tenant key
    task_id: str
    page: int
    start: int
    end: int
    size_bytes: int
    payload_ids: frozenset[str]


@dataclass
class PagedTask:
    """A task's pages seen so far, and the header fold over them."""

    tenant: str
    fold: SealedFold
    where: str  # the first page's line, for messages about the task
    pages: int = 0
    end: int = 0
    payload_ids: set[str] = field(default_factory=set)


def check_page(record: Any) -> tuple[PageFacts, list[dict[str, Any]], Any]:
    """The shape of a page record: its facts, its messages and their stored read."""
    top_level(record)
    tenant = tenant_of(record)
    task = record.get("task")
    if not (isinstance(task, str) and task.startswith(tenant + KEY_SEPARATOR)):
        raise ShapeError(f"page task must be a task key of tenant {tenant!r}, got {task!r:.60}")
    task_id = stored_task_id(task, tenant, "page task")
    number = count(record.get("page"), "page")
    start = count(record.get("start"), "page start")
    end = count(record.get("end"), "page end")
    size = count(record.get("size_bytes"), "page size_bytes")
    count(record.get("version", 0), "page version")
    if record.get("_id") != page_key(task, number):
        raise ShapeError(
            f"page _id must be {page_key(task, number)!r}, got {record.get('_id')!r:.60}"
        )
    raw = messages_of(record)
    if end - start != len(raw):
        raise ShapeError(f"page [{start}, {end}) holds {len(raw)} messages")
    read = read_stored(blanked(raw), strings=False)  # ciphertexts blanked (mindstore.crypto)
    facts = PageFacts(
        page_key(task, number), tenant, task, task_id, number, start, end, size, markers(read)
    )
    return facts, raw, read


def fold_page(known: PagedTask | None, facts: PageFacts, raw: list[dict[str, Any]], read: Any,
              where: str) -> PagedTask:  # fmt: skip
    """Add a checked page to its task's pages (continuity so far, header fold)."""
    if known is None:
        known = PagedTask(facts.tenant, start_fold(facts.task_id), where)
    task = facts.task
    if facts.page != known.pages:
        problem = (
            "duplicate" if facts.page < known.pages else "missing"
        )  # a page number seen before, or one skipped
        raise PageContinuityError(
            problem, task, f"{where}: page {facts.page} where page {known.pages} comes next"
        )
    if facts.start != known.end:
        problem = "gap" if facts.start > known.end else "overlap"
        raise PageContinuityError(
            problem, task,
            f"{where}: page {facts.page} starts at message {facts.start}, the pages before "
            f"end at {known.end}",
        )  # fmt: skip
    planned = known.fold.planner.header.size_bytes
    try:
        parsed = fold_messages(known.fold, facts.task_id, raw, read, "page message")
    except ShapeError as exc:
        raise BackupCorrupt(f"{where}: {exc}") from None
    planned = known.fold.planner.header.size_bytes - planned  # the lean form's size
    if sum(len(bson.encode(m)) for m in raw) != planned:  # messages of the earlier form
        known.fold.allowance += size_allowance(facts.task_id, raw, parsed)
    if not size_matches(facts.size_bytes, facts.task_id, raw, parsed):
        raise PageContinuityError(
            "size", task,
            f"{where}: size_bytes {facts.size_bytes} does not match the page's messages "
            f"({sum(len(bson.encode(m)) for m in raw)} bytes)",
        )  # fmt: skip
    known.pages += 1
    known.end = facts.end
    known.fold.size_bytes += facts.size_bytes
    known.payload_ids |= facts.payload_ids
    return known


def close_task(known: PagedTask | None, record: dict[str, Any], identity: str, where: str) -> None:
    """The task record against the pages the backup holds for it (before its header is
    folded on: the open page continues the pages' fold)."""
    pages = record.get("pages", 0)
    sealed = record.get("sealed", 0)
    try:
        pages = count(pages, "pages")
        sealed = count(sealed, "sealed")
        sealed_bytes = count(record.get("sealed_bytes", 0), "sealed_bytes")
    except ShapeError as exc:
        raise BackupCorrupt(f"{where}: {exc}") from None
    if record.get("pending"):
        raise PageContinuityError(
            "pending", identity, f"{where}: a backup holds no pending page changes"
        )
    held = known.pages if known is not None else 0
    if pages != held:
        problem = "missing" if pages > held else "extra"
        raise PageContinuityError(
            problem, identity, f"{where}: the task counts {pages} pages, the backup holds {held}"
        )
    end = known.end if known is not None else 0
    if sealed != end:
        problem = "gap" if sealed > end else "overlap"
        raise PageContinuityError(
            problem, identity, f"{where}: the task is sealed at {sealed}, its pages end at {end}"
        )
    size = known.fold.size_bytes if known is not None else 0
    allowance = known.fold.allowance if known is not None else 0
    if not size <= sealed_bytes <= size + allowance:  # exact but for earlier-form patches
        raise PageContinuityError(
            "size", identity,
            f"{where}: sealed_bytes is {sealed_bytes}, its pages hold {size} bytes",
        )  # fmt: skip
