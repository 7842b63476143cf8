"""The context window's read of a level that spans sealed pages.

`level_read.read_level_window` reads a level in one pipeline over the task document. A
paged task's level lies in several documents, so this reader works per segment (each
visible page, then the open page) with the level's latest checkpoint given to each:

1. the checkpoint: the last compression message of the level (`context_source`'s read:
   only compression messages travel, in their pages and the open page);
2. one pass over every segment for its counts and system messages
   (`pipelines.context_pages.segment_counts`; a page without a message of the level
   sends no row), the open page's tail slice in the same read, and its head slice when
   the level starts in the open page;
3. slices of only the pages that hold the window's head (the level's first view
   messages) and tail (its newest visible messages): the pages wanted whole in one
   query, a page wanted in part in its own, so the round trips do not grow with the
   pages a window spans. A slice of the open page taken after the counts is pinned to
   its start (`sealed`): a seal in between starts the read over.

The counts add up to what the one-document pipeline computes, and the messages are the
same, so the assembled window is identical (tests/test_paging.py compares them); only
the pages the window touches send messages.
"""

from __future__ import annotations

from typing import Any

from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.compression.window import LevelRead
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage
from mindstore.model.paging import apply_pending
from mindstore.model.storage_form import bson_size, unescape_keys
from mindstore.pipelines import context as context_pipelines
from mindstore.pipelines.boundaries import with_fields
from mindstore.pipelines.context_pages import segment_counts, segment_cuts, segment_slice
from mindstore.repositories.pages import PAGING_FIELDS, Paging, StalePage
from mindstore.repositories.port import TaskPort

JSON = dict[str, Any]


class _Level:
    """What the first two passes learnt: the checkpoint and each segment's counts."""

    def __init__(self, mark: JSON | None, paging: Paging, pages: list[JSON], open_row: JSON):
        self.mark = mark
        part = next(iter((mark or {}).get("content") or []), None)
        part = unescape_keys(part) if isinstance(part, dict) else {}
        self.checkpoint = CompressionCheckpoint.from_parts(part.get("metadata"), part.get("cache"))
        checkpoint = self.checkpoint
        self.stubbed = list(checkpoint.stubbed_ids) if checkpoint is not None else []
        self.dropped = list(checkpoint.dropped_ids) if checkpoint is not None else []
        self.anchor = checkpoint.summary_after_id if checkpoint is not None else None
        self.paging = paging
        self.segments: list[JSON] = [*pages, open_row]  # the open page last, page None

    def args(self) -> tuple[Any, ...]:
        return self.dropped, self.stubbed, self.anchor

    def total(self, name: str) -> int:
        return sum(int(row.get(name, 0)) for row in self.segments)


async def _level(
    port: TaskPort, task_id: str, scope: str | None, head: int, tail: int,
    *, open_head: bool = True,
) -> _Level:  # fmt: skip
    """The checkpoint and every segment's counts; the open page's row also brings its last
    `tail` visible messages and, with `open_head`, its first `head` view messages (only
    worth sending when the level's head may lie in the open page: else they would travel
    for nothing, `read_paged_window` reads them apart if the pages fall short)."""
    marks = await port.filtered(
        task_id,
        lambda query: context_pipelines.latest_checkpoint_pipeline(
            query, scope, "messages", kept_ids=False
        ),
        newest=True,
    )
    mark = marks[-1] if marks else None
    if mark is not None and port.scope.cipher is not None:  # its summary opened (mindstore.crypto)
        mark = (await port.scope.cipher.opened([mark], task_id))[0]
    probe = _Level(mark, Paging(0, 0, 0), [], {})
    counts = segment_counts(scope, *probe.args())
    slices: JSON = {"tail": {"$slice": ["$visible", -tail]}}
    if open_head:
        slices["head"] = {"$slice": ["$view", head]}
    opened = [*counts[:-1], {"$project": {**counts[-1]["$project"], **slices}}]
    # a page without a message of the level counts nothing: it sends no row
    keep = {"level_count": {"$gt": 0}}
    paging, pages, open_row = await port.segments(task_id, counts, opened, keep=keep)
    open_row["page"] = None
    return _Level(mark, paging, pages, open_row)


async def _open_slice(
    port: TaskPort, task_id: str, level: _Level, scope: str | None, field: str,
    start: int, count: int,
) -> list[JSON]:  # fmt: skip
    """A `field` slice of the open page, read after the counts: only while no seal moved
    the open page's start (appends only add after it, the checkpoint's lists are the ones
    counted with); else `StalePage`, and the caller reads again."""
    stages = segment_slice(scope, *level.args(), field=field, start=start, count=count)
    rows = await port.scope.aggregate_task(
        task_id, lambda query: [{"$match": query}, *with_fields(stages, ("sealed",))]
    )
    if int(rows[0].get("sealed", 0) or 0) != level.paging.sealed:
        raise StalePage(None)
    return list(rows[0].get("slice", []))


async def _slices(
    port: TaskPort, task_id: str, level: _Level, scope: str | None,
    wanted: dict[str, list[tuple[JSON, int, int]]],
) -> dict[str, dict[int, list[JSON]]]:  # fmt: skip
    """Slices of sealed pages, by field (`view`, `visible`) then page number: for each field
    its (segment row, start, count) wanted. One read for all of them (`segment_cuts`), so
    the round trips grow neither with the pages a window spans nor with its parts."""
    cuts = {field: [(int(row["page"]), start, count) for row, start, count in rows]
            for field, rows in wanted.items() if rows}  # fmt: skip
    out: dict[str, dict[int, list[JSON]]] = {field: {} for field in wanted}
    if not cuts:
        return out
    counts = {int(row["page"]): row for rows in wanted.values() for row, _s, _c in rows}
    stages = segment_cuts(scope, level.dropped, level.stubbed, level.anchor, cuts, counts)
    pages = sorted({page for field_cuts in cuts.values() for page, _s, _c in field_cuts})
    found = await port.page_rows(task_id, level.paging, pages, stages)
    for field, field_cuts in cuts.items():
        for page, _start, _count in field_cuts:
            messages = list(found.get(page, {}).get(field) or [])
            apply_pending(messages, level.paging.pending)
            out[field][page] = messages
    return out


async def read_paged_window(
    port: TaskPort, task_id: str, header: TaskHeader, *, head: int, tail: int
) -> tuple[LevelRead, tuple[list[JSON], list[JSON], list[JSON]]]:
    """The window read of a paged level: its counts and checkpoint (a `LevelRead` whose
    messages are still to be decoded) and the stored head, systems and tail."""
    scope = header.current_scope
    # the open page's head travels with the counts only when the level starts in it
    starts_open = bool(header.scope_stack) and header.scope_stack[-1].index >= header.sealed
    level = await _level(port, task_id, scope, head, tail, open_head=starts_open)
    # the head: the first `head` view messages, segment by segment
    head_wanted: list[tuple[JSON, int, int]] = []
    need = head
    for row in level.segments[:-1]:
        if need <= 0:
            break
        if int(row.get("view_count", 0)):
            head_wanted.append((row, 0, min(need, int(row["view_count"]))))
            need -= int(row["view_count"])
    head_open = need
    # the tail: the newest `tail` visible messages, from the open page backwards
    tail_raw = list(level.segments[-1].get("tail", []))
    need = tail - len(tail_raw)
    tail_wanted: list[tuple[JSON, int, int]] = []
    for row in reversed(level.segments[:-1]):
        if need <= 0:
            break
        count = int(row.get("visible_count", 0))
        if count:
            take = min(need, count)
            tail_wanted.append((row, count - take, take))
            need -= take
    found = await _slices(
        port, task_id, level, scope, {"view": head_wanted, "visible": tail_wanted}
    )
    firsts, older = found["view"], found["visible"]
    head_raw = [m for page in sorted(firsts) for m in firsts[page]]
    if head_open > 0 and int(level.segments[-1].get("view_count", 0)):
        opened = level.segments[-1]
        head_raw += (
            opened["head"][:head_open]
            if "head" in opened
            else await _open_slice(port, task_id, level, scope, "view", 0, head_open)
        )
    tail_raw = [*(m for page in sorted(older) for m in older[page]), *tail_raw]
    head_ids = {m.get("id") for m in head_raw}
    systems_raw = [m for row in level.segments for m in row.get("systems", [])]
    systems_raw = [m for m in systems_raw if m.get("id") not in head_ids]
    stubbed = set(level.stubbed)
    read = LevelRead(
        scope=scope,
        head=[],
        systems=[],
        tail=[],
        level_count=level.total("level_count"),
        view_count=level.total("view_count"),
        visible_count=level.total("visible_count"),
        model_count=level.total("model_count"),
        checkpoint=level.checkpoint,
        checkpoint_message_id=(level.mark or {}).get("id"),
        stubbed_ids={str(m.get("id")) for m in [*head_raw, *tail_raw] if m.get("id") in stubbed},
        stubbed_count=len(stubbed),
        read_bytes=sum(bson_size(m) for m in [*head_raw, *tail_raw]),
        paged=True,
        paged_level=level,
    )
    return read, (head_raw, systems_raw, tail_raw)


async def read_paged_range(
    port: TaskPort, task_id: str, scope: str | None, start: int, count: int,
    known: object | None = None,
) -> tuple[str | None, int, list[AnyMessage], set[str]]:  # fmt: skip
    """Visible messages ``[start, start + count)`` of a paged level (a widening read).
    `known`: the window read's checkpoint and counts (`LevelRead.paged_level`), reused while
    the task's version is theirs (one small read instead of four: a write in between, a
    compression above all, raises `StalePage` and the caller reads without them); else they
    are read first."""
    if isinstance(known, _Level):
        now = await port.scope.find_task(task_id, dict.fromkeys(PAGING_FIELDS, 1))
        if Paging.of(now).version != known.paging.version:
            raise StalePage(None)
        level = known
    else:
        level = await _level(port, task_id, scope, 1, 1, open_head=False)
    wanted: list[tuple[JSON, int, int]] = []
    open_part: list[tuple[int, int]] = []
    position, stop = 0, start + count
    for row in level.segments:
        size = int(row.get("visible_count", 0))
        first, last = max(start, position), min(stop, position + size)
        if first < last:
            if row.get("page") is None:
                open_part = [(first - position, last - first)]
            else:
                wanted.append((row, first - position, last - first))
        position += size
    found = (await _slices(port, task_id, level, scope, {"visible": wanted}))["visible"]
    raw = [m for page in sorted(found) for m in found[page]]
    if open_part:
        offset, length = open_part[0]
        raw += await _open_slice(port, task_id, level, scope, "visible", offset, length)
    messages = await port.decode(task_id, raw)
    stubbed = {m.id for m in messages if m.id in set(level.stubbed)}
    return (level.mark or {}).get("id"), level.total("visible_count"), messages, stubbed
