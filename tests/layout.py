"""What a task stores, read the way a test needs it: the whole history, sealed pages included.

A paged task (docs/data-model.md, "Paged messages") keeps its older messages in sealed
`task_pages` documents and only the open page in the task document's `messages`; changes
to sealed messages may wait in its `pending` list. A test that looks at the raw stored
layout reads it here instead of the task document's array, so it holds at any page size
(CI runs the suite a second time with ``MINDSTORE_PAGE_MESSAGES=3``):

* `read_layout` / `stored_messages`: the visible pages in order with the pending entries
  applied, then the open page: every message once, in the stored (lean) form;
* `flat_task`: the task document as an unpaged task would hold the same history (the whole
  array in `messages`, the paging fields left out), for checks written against that shape;
* `unpaged`: a header without its paging fields (the in-memory `Task` has none);
* `housekeeping`: the seals and folds a verb's write left in a command log, named, so a
  test counting a verb's commands counts those as what they are.

Reading checks the layout's own rules as it goes (pages numbered from 0 and contiguous,
the last ending at `sealed`, `seq` = `sealed` + the open page), so every test that reads
through here checks them too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mindstore.documents import TASK_PAGES, TASKS
from mindstore.model.header import TaskHeader
from mindstore.paged_history import apply_pending

JSON = dict[str, Any]

PAGING_KEYS: tuple[str, ...] = (
    "sealed", "pages", "sealed_bytes", "open_since", "patched", "pending", "pending_at",
)  # fmt: skip
"""Task document fields only paged storage writes (absent on a task never paged)."""


@dataclass
class Layout:
    """One task as stored: its document and its visible pages (page order, as stored)."""

    task: JSON
    pages: list[JSON] = field(default_factory=list)

    @property
    def sealed(self) -> int:
        return int(self.task.get("sealed", 0) or 0)

    @property
    def sealed_messages(self) -> list[JSON]:
        """The messages of the visible pages, pending entries applied (copies)."""
        out: list[JSON] = []
        for page in self.pages:
            applied, _touched = apply_pending(page.get("messages") or [], page["start"], self.task)
            out.extend(copy.deepcopy(applied))
        return out

    @property
    def messages(self) -> list[JSON]:
        """The whole history in stored form: sealed pages, then the open page."""
        return [*self.sealed_messages, *copy.deepcopy(self.task.get("messages") or [])]

    def flat(self) -> JSON:
        """The task document as an unpaged task holding the same history is stored."""
        document = {k: copy.deepcopy(v) for k, v in self.task.items() if k not in PAGING_KEYS}
        document["messages"] = self.messages
        return document


def check_layout(layout: Layout) -> None:
    """The layout's rules (docs/data-model.md, "Paged messages"); AssertionError if broken."""
    task, key = layout.task, layout.task["_id"]
    pages = int(task.get("pages", 0) or 0)
    assert [p["page"] for p in layout.pages] == list(range(pages)), (key, "page numbers")
    end = 0
    for page in layout.pages:
        assert page["start"] == end, (key, "pages not contiguous", page["page"])
        assert page["end"] - page["start"] == len(page.get("messages") or []), (key, page["page"])
        assert page["tenant"] == task["tenant"] and page["task"] == key, (key, page["page"])
        end = page["end"]
    assert layout.sealed == end, (key, "sealed", layout.sealed, end)
    opened = len(task.get("messages") or [])
    assert int(task.get("seq", 0) or 0) == end + opened, (key, "seq", task.get("seq"), end, opened)
    sealed_bytes = sum(int(page.get("size_bytes", 0)) for page in layout.pages)
    assert int(task.get("sealed_bytes", 0) or 0) == sealed_bytes, (key, "sealed_bytes")


async def read_layout(database: Any, key: str) -> Layout | None:
    """The task stored under `key` (``"<tenant>/<task id>"``) and its visible pages."""
    task = await database[TASKS].find_one({"_id": key})
    if task is None:
        return None
    return await _with_pages(database, task)


async def _with_pages(database: Any, task: JSON) -> Layout:
    count = int(task.get("pages", 0) or 0)
    pages: list[JSON] = []
    if count:
        query = {"task": task["_id"], "tenant": task["tenant"], "page": {"$lt": count}}
        pages = await database[TASK_PAGES].find(query).to_list(None)
        pages.sort(key=lambda page: page["page"])
    layout = Layout(task, pages)
    check_layout(layout)
    return layout


async def read_layouts(database: Any, query: Mapping[str, Any] | None = None) -> list[Layout]:
    """Every stored task matching `query` (a filter on the task documents) with its pages."""
    tasks = await database[TASKS].find(dict(query or {})).to_list(None)
    return [await _with_pages(database, task) for task in tasks]


async def stored_messages(database: Any, key: str) -> list[JSON]:
    """The whole stored history of the task under `key` (stored form, pending applied)."""
    layout = await read_layout(database, key)
    assert layout is not None, key
    return layout.messages


async def flat_task(database: Any, key: str) -> JSON | None:
    """The task under `key` as an unpaged task with the same history is stored (None if
    there is no such task)."""
    layout = await read_layout(database, key)
    return None if layout is None else layout.flat()


async def flat_tasks(database: Any, query: Mapping[str, Any] | None = None) -> list[JSON]:
    """`flat_task` of every stored task matching `query`."""
    return [layout.flat() for layout in await read_layouts(database, query)]


def unpaged(header: TaskHeader) -> TaskHeader:
    """The header without its paging fields (as the in-memory `Task` folds it)."""
    defaults = TaskHeader()
    names = ("sealed", "pages", "sealed_bytes", "open_since")
    return header.model_copy(update={name: getattr(defaults, name) for name in names})


# ------------------------------------------------------------------ housekeeping writes
def _kind(command: Any) -> str:
    """What one recorded command (captured with payloads) is, by its shape."""
    filt, projection = command.filter or {}, command.projection or {}
    if command.collection == TASKS:
        if command.name == "find" and "patched" in projection:
            return "seal read"
        if command.name == "update" and "sealed" in filt and "version" not in filt:
            return "seal commit"
        if command.name == "find" and "pending_at" in projection:
            return "fold read"
        if command.name == "update" and "pending_at" in filt:
            return "fold commit"
    if command.collection == TASK_PAGES:
        if command.name == "update" and "$or" in filt:  # an upsert never over a newer page
            return "seal page"
        if command.name == "find":
            return "page read"
        if command.name == "update" and "version" in filt:  # compare-and-set
            return "fold page"
    return "other"


def housekeeping(commands: Sequence[Any]) -> list[str]:
    """The seals and folds in `commands` (a log captured with ``payloads=True`` after a
    verb's own write), in order: each ``"seal"`` is a read of the open page, one page
    written or more, one commit; each ``"fold"`` a read of the pending list, the page
    reads and compare-and-set writes of the pages it changes, one commit. AssertionError
    if anything else is there, so a caller that counts a verb's commands and then this
    counts everything."""
    kinds = [_kind(command) for command in commands]
    out: list[str] = []
    position = 0
    while position < len(kinds):
        if kinds[position] == "seal read":
            end = position + 1
            while end < len(kinds) and kinds[end] == "seal page":
                end += 1
            assert end > position + 1 and end < len(kinds) and kinds[end] == "seal commit", kinds
            out.append("seal")
            position = end + 1
        elif kinds[position] == "fold read":
            end = position + 1
            while end < len(kinds) and kinds[end] in ("page read", "fold page"):
                end += 1
            assert end < len(kinds) and kinds[end] == "fold commit", kinds
            out.append("fold")
            position = end + 1
        else:
            raise AssertionError(f"not a seal or a fold: {kinds[position:]}")
    return out
