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
* `forge_messages`: raw writes into stored messages wherever they are (tests of what a
  hostile or buggy writer leaves behind);
* `unpaged` / `assert_header`: a header without its paging fields (the in-memory `Task`
  has none), and the check that the store's header is the `Task`'s plus paging fields
  that agree with the stored pages;
* `split_housekeeping`: a verb's command log cut into its own commands and the seals and
  folds its write left after them, named, so a test counting a verb's commands counts
  those as what they are.

Reading checks the layout's own rules as it goes (pages numbered from 0 and contiguous,
the last ending at `sealed`, `seq` = `sealed` + the open page, `sealed_bytes` = the pages'
bytes, above them only within the allowance of messages of the earlier stored form, as
backup verify accepts), so every test that reads through here checks them too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mindstore.backends.recorder import CommandLog
from mindstore.backup.shape import size_allowance
from mindstore.documents import TASK_PAGES, TASKS
from mindstore.model.header import PAGING_FIELDS, TaskHeader
from mindstore.model.plans import parse_stored
from mindstore.model.stored_read import read_stored
from mindstore.paged_history import apply_pending

JSON = dict[str, Any]

PAGING_KEYS: tuple[str, ...] = (
    "sealed", "pages", "sealed_bytes", "id_filter_words", "id_filter", "patched", "pending",
    "pending_at",
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
    pages_bytes = sum(int(page.get("size_bytes", 0)) for page in layout.pages)
    sealed_bytes = int(task.get("sealed_bytes", 0) or 0)
    if sealed_bytes != pages_bytes:  # only above, and only for messages of the earlier form
        task_id = key.split("/", 1)[-1]
        allowance = 0
        for page in layout.pages:
            raw = page.get("messages") or []
            parsed = parse_stored(read_stored(raw, strings=False), task_id=task_id)
            allowance += size_allowance(task_id, raw, parsed)
        assert pages_bytes < sealed_bytes <= pages_bytes + allowance, (key, "sealed_bytes")


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


async def forge_messages(
    database: Any, key: str, changes: Mapping[str, Mapping[str, Any]], **task_sets: Any
) -> None:
    """Forge stored messages as a buggy or hostile writer would, wherever each is stored:
    `changes` maps a message id to the paths inside it to set (``{"content.0.text": x}``),
    written with raw `$set`s into the open page or the sealed page that holds it (no
    pending entry, no version bump); `task_sets` are set on the task document too."""
    layout = await read_layout(database, key)
    assert layout is not None, key
    task_update: JSON = dict(task_sets)
    page_updates: dict[str, JSON] = {}
    for position, message in enumerate(layout.task.get("messages") or []):
        for path, value in changes.get(message.get("id"), {}).items():
            task_update[f"messages.{position}.{path}"] = value
    for page in layout.pages:
        for position, message in enumerate(page.get("messages") or []):
            for path, value in changes.get(message.get("id"), {}).items():
                page_updates.setdefault(page["_id"], {})[f"messages.{position}.{path}"] = value
    found = {m.get("id") for m in layout.messages}
    assert set(changes) <= found, (key, sorted(set(changes) - found))
    if task_update:
        await database[TASKS].update_one({"_id": key}, {"$set": task_update})
    for page_id, sets in page_updates.items():
        await database[TASK_PAGES].update_one({"_id": page_id}, {"$set": sets})


def unpaged(header: TaskHeader) -> TaskHeader:
    """The header without its paging fields (as the in-memory `Task` folds it)."""
    defaults = TaskHeader()
    return header.model_copy(update={name: getattr(defaults, name) for name in PAGING_FIELDS})


async def assert_paging(database: Any, key: str, header: TaskHeader) -> None:
    """The paging fields of the store's `header` of the task under `key` are those of its
    stored layout (pages counted, where they end, their bytes)."""
    layout = await read_layout(database, key)
    assert layout is not None, key
    paging = (header.sealed, header.pages, header.sealed_bytes)
    stored = int(layout.task.get("sealed_bytes", 0) or 0)  # checked against the pages
    assert paging == (layout.sealed, len(layout.pages), stored), (key, paging)


async def assert_header(database: Any, key: str, header: TaskHeader, expected: TaskHeader) -> None:
    """The store's `header` of the task under `key` is `expected` (an in-memory `Task`'s,
    which has no paging fields), and its paging fields are those of the stored layout."""
    assert unpaged(header) == expected
    await assert_paging(database, key, header)


# ------------------------------------------------------------------ housekeeping writes
def _kind(command: Any) -> str:
    """What one recorded command (captured with payloads) is, by its shape."""
    filt, projection = command.filter or {}, command.projection or {}
    if command.collection == TASKS:
        if command.name == "find" and "patched" in projection:
            return "seal read"
        if command.name == "update" and "sealed" in filt and "version" not in filt:
            return "seal commit"
        if command.name == "find" and "pending_at" in projection and "seq" not in projection:
            return "fold read"  # a verb's own read (all it plans from) has `seq`
        if command.name == "update" and "pending_at" in filt:
            return "fold commit"
    if command.collection == TASK_PAGES:
        if command.name == "update" and "$or" in filt:  # an upsert never over a newer page
            return "seal page"
        if command.name == "find" and projection == {"_id": 0, "messages.id": 1}:
            return "seal ids read"  # the sealed-id filter rebuilt (model/id_filter.py)
        if command.name == "find":
            return "page read"
        if command.name == "update" and "version" in filt:  # compare-and-set
            return "fold page"
    return "other"


def housekeeping(commands: Sequence[Any]) -> list[str]:
    """The seals and folds in `commands` (a log captured with ``payloads=True`` after a
    verb's own write), in order: each ``"seal"`` is a read of the open page, one page
    written or more, when its sealed-id filter is rebuilt one read of the pages' ids, one
    commit; each ``"fold"`` a read of the pending list, the page
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
            if end < len(kinds) and kinds[end] == "seal ids read":
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


def split_housekeeping(commands: Sequence[Any]) -> tuple[CommandLog, list[str]]:
    """(the commands of a verb's own step, the seals and folds its write left after them),
    from a log of one verb captured with ``payloads=True`` (`housekeeping`)."""
    kinds = [_kind(command) for command in commands]
    start = next((i for i, k in enumerate(kinds) if k in ("seal read", "fold read")), len(kinds))
    return CommandLog(commands[:start]), housekeeping(commands[start:])
