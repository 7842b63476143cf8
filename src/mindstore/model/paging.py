"""Paged message storage, the pure part: when to seal, where pages are cut, pending changes.

A task document holds its header and the *open page*: the messages ``[sealed, seq)``.
Older messages live in sealed page documents (``task_pages``), each holding a contiguous
range ``[start, end)`` in the same stored form. This module decides, without I/O:

* whether a task should be sealed after a write (`should_seal`): the open page has grown
  to twice the page size, in messages or in bytes, so seals are rare (one per page of
  appends) and the open page stays near one page whatever the history length;
* where the pages are cut (`cut_pages`): the newest messages that fit in one page stay
  open (at least one: the tail a write plans from is always in the task document), the
  rest is cut into pages from the front, each at most `page_messages` messages and
  `page_bytes` bytes (a message larger than that is a page of its own). The cut depends
  only on the stored messages, so a seal retried at the same version cuts the same pages;
* which ids the pages hold, for exactly-once appends: `model/id_filter.py`;
* the *pending* changes: a verb that changes a sealed message (answering an old tool call,
  a part verb, redaction) records the change in the task document's `pending` list in its
  one guarded update; readers apply that list on top of the page (`apply_pending`), and
  the writer folds it into the page afterwards. docs/write-paths.md gives the protocol and
  why a reader never sees a torn state.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.errors import ValidationError
from mindstore.ids import page_key
from mindstore.model.header import TaskHeader

JSON = dict[str, Any]

DEFAULT_PAGE_MESSAGES = 256
DEFAULT_PAGE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class PagePolicy:
    """How large a sealed page is; the open page is sealed at twice that."""

    page_messages: int = DEFAULT_PAGE_MESSAGES
    page_bytes: int = DEFAULT_PAGE_BYTES

    def __post_init__(self) -> None:
        for name in ("page_messages", "page_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name}: expected a positive integer, got {value!r}")


DEFAULT_POLICY = PagePolicy()


def should_seal(header: TaskHeader, policy: PagePolicy | None) -> bool:
    """True when the open page has grown to twice a page (in messages or bytes) and holds
    more than the one message a seal always leaves open."""
    if policy is None or header.open_count < 2:
        return False
    return (
        header.open_count >= 2 * policy.page_messages or header.open_bytes >= 2 * policy.page_bytes
    )


@dataclass(frozen=True)
class PageCut:
    """One page to seal: messages ``[start, end)`` of the history, `size_bytes` stored."""

    page: int
    start: int
    end: int
    size_bytes: int


def cut_pages(
    sizes: Sequence[int], *, first_index: int, first_page: int, policy: PagePolicy | None,
    force: bool = False,
) -> list[PageCut]:  # fmt: skip
    """Pages to cut from an open page whose messages have these stored `sizes` (the first
    at history index `first_index`; the next page number is `first_page`).

    Pages are cut greedily from the front, each closed by a limit (`page_messages`
    messages, or `page_bytes` reached: the next message would not fit; a message larger
    than a page is a page of its own), and only *full* pages are cut: a page's range then
    depends only on the messages from its start, so two writers sealing the same task at
    once cut the same pages (docs/write-paths.md). The last message always stays open.
    With `force` (the task document would outgrow its limit) everything but the last
    message is cut, the last page partial. Deterministic in `sizes`.
    """
    if policy is None:
        return []
    limit = len(sizes) - 1  # the last message stays open
    cuts: list[PageCut] = []
    position = 0
    while position < limit:
        end, total = position + 1, sizes[position]
        while (
            end < limit
            and end - position < policy.page_messages
            and total + sizes[end] <= policy.page_bytes
        ):
            total += sizes[end]
            end += 1
        full = end - position == policy.page_messages or (
            end < len(sizes) and total + sizes[end] > policy.page_bytes
        )
        if not (full or force):
            break
        cuts.append(
            PageCut(first_page + len(cuts), first_index + position, first_index + end, total)
        )
        position = end
    return cuts


# ---------------------------------------------------------------------- pending changes
def pending_entry(message_id: str, index: int, path: str, value: Any, *, absent: bool) -> JSON:
    """One change to a sealed message: `path` inside it set to `value`, or removed."""
    entry: JSON = {"id": message_id, "i": index, "p": path}
    if not absent:
        entry["v"] = value
    return entry


def _step(container: Any, key: str) -> Any:
    if isinstance(container, list):
        return container[int(key)] if key.isdigit() and int(key) < len(container) else None
    return container.get(key) if isinstance(container, dict) else None


def apply_entry(message: JSON, entry: JSON) -> None:
    """Apply one pending entry to a stored message document, in place, as MongoDB's `$set`
    (missing sub-documents created) or `$unset` (a missing path is a no-op) would."""
    *parents, last = str(entry["p"]).split(".")
    container: Any = message
    for name in parents:
        child = _step(container, name)
        if child is None:
            if "v" not in entry:
                return
            child = {}
            if isinstance(container, dict):
                container[name] = child
            else:
                return  # a path through a missing array item: not a shape mindstore writes
        container = child
    if isinstance(container, list):
        if not last.isdigit():
            return
        position = int(last)
        if "v" in entry:  # as `$set`: past the end, the array grows (null-padded)
            container.extend([None] * (position + 1 - len(container)))
            container[position] = copy.deepcopy(entry["v"])
        elif position < len(container):  # as `$unset` of an array item: it becomes null
            container[position] = None
        return
    if not isinstance(container, dict):
        return
    if "v" in entry:
        container[last] = copy.deepcopy(entry["v"])
    else:
        container.pop(last, None)


def apply_pending(messages: Iterable[JSON], pending: Sequence[JSON]) -> None:
    """Apply the pending entries (in order) to the stored messages they name, in place.

    Entries name messages by id; a message not among `messages` is simply not changed
    (the reader did not ask for it). Applying an entry already folded into the page sets
    the same value again."""
    if not pending:
        return
    by_id: dict[str, list[JSON]] = {}
    for entry in pending:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            by_id.setdefault(entry["id"], []).append(entry)
    for message in messages:
        for entry in by_id.get(message.get("id"), ()):  # type: ignore[arg-type]
            apply_entry(message, entry)


def page_document(
    *, key: str, tenant: str, cut: PageCut, messages: list[JSON], version: int, now: Any,
    born: Any,
) -> JSON:  # fmt: skip
    """The stored form of one sealed page (`documents.TaskPageDoc`); `born` is the task's
    `created_at`, which tells its pages from those a deleted task of the same id left."""
    return {
        "_id": page_key(key, cut.page),
        "tenant": tenant,
        "task": key,
        "page": cut.page,
        "start": cut.start,
        "end": cut.end,
        "size_bytes": cut.size_bytes,
        "version": version,
        "born": born,
        "messages": messages,
        "created_at": now,
    }


def sealed_header(header: TaskHeader, cuts: Sequence[PageCut], id_filter_words: int) -> TaskHeader:
    """The header after sealing `cuts` (the only fields a seal changes), with the size of
    the sealed-id filter the seal wrote (`model/id_filter.py`)."""
    sealed = header.model_copy(deep=True)
    sealed.id_filter_words = id_filter_words
    sealed.sealed = cuts[-1].end
    sealed.pages = cuts[-1].page + 1
    sealed.sealed_bytes = header.sealed_bytes + sum(cut.size_bytes for cut in cuts)
    return sealed
