"""The context window's read of a level that spans sealed pages: one pipeline.

`level_read.read_level_window` reads an unpaged level in one pipeline over the task
document. A paged task's level lies in its pages and its open page; the same read is one
pipeline over the task document that looks its pages up on the server
(`pipelines.context_pages.paged_window_pipeline`): the level's latest checkpoint, every
page's counts, the open page's, and the slices of only the pages holding the window's
head (the level's first view messages) and tail (its newest visible messages), so the
checkpoint's id lists never travel and the round trips grow neither with the pages a
window spans nor with the checkpoint.

The counts add up to what the one-document pipeline computes, and the messages are the
same, so the assembled window is identical (tests/test_context_window.py compares them).
A real server does not read the looked-up pages at one snapshot with the task document:
the row carries the versions seen and the read starts over (`StalePage`) when a page is
newer than the task document read, or the task document changed during the read.
"""

from __future__ import annotations

from typing import Any

from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.compression.window import KnownCounts, LevelRead
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage
from mindstore.model.paging import apply_pending
from mindstore.model.storage_form import bson_size, unescape_keys
from mindstore.pipelines.context_pages import paged_window_pipeline
from mindstore.repositories.pages import Paging, StalePage
from mindstore.repositories.port import TaskPort

JSON = dict[str, Any]


async def _row(
    port: TaskPort, task_id: str, scope: str | None, *, head: int, tail: int | None = None,
    start: int = 0, count: int = 0, known: KnownCounts | None = None,
) -> tuple[JSON, Paging]:  # fmt: skip
    """The pipeline's row and the paging it was read at; `StalePage` when a page or the
    task document changed under it."""
    rows = await port.scope.aggregate_task(
        task_id,
        lambda query: paged_window_pipeline(
            query,
            scope,
            tenant=port.scope.tenant,
            owner=port.scope.owner,
            head=head,
            tail=tail,
            start=start,
            count=count,
            known=None if known is None else known.pages,
        ),
    )
    row = rows[0]
    paging = Paging.of(row)
    newest_page = int(row.get("page_version", 0) or 0)
    if int(row.get("open_version", -1)) != paging.version or newest_page > paging.version:
        raise StalePage(None)
    if known is not None and paging.version != known.version:
        raise StalePage(None)  # written since: the counts may have moved
    if port.scope.cipher is not None and isinstance(row.get("cp"), dict):
        # the checkpoint's part, as the compression message holds it, opened: its summary
        # is sealed (mindstore.crypto)
        mark = {"id": row.get("mark_id"), "content": [row["cp"]]}
        row["cp"] = (await port.scope.cipher.opened([mark], task_id))[0]["content"][0]
    return row, paging


def _pieces(row: JSON, paging: Paging, name: str) -> tuple[list[JSON], set[str]]:
    """The messages of one share (`head` or `run`), pages in order then the open page's,
    pending changes applied to the sealed ones; and the stubbed ids among them."""
    pieces = sorted(
        (p for p in row.get("pieces") or [] if int(p.get("page", -1)) >= 0),
        key=lambda p: int(p["page"]),
    )
    sealed = [m for piece in pieces for m in piece.get(name) or []]
    apply_pending(sealed, paging.pending)
    stubbed = {str(i) for piece in pieces for i in piece.get(f"stubbed_{name}") or []}
    stubbed |= {str(i) for i in row.get(f"o_stubbed_{name}") or []}
    return [*sealed, *(row.get(f"o_{name}") or [])], stubbed


def _checkpoint(row: JSON) -> CompressionCheckpoint | None:
    """The latest checkpoint of the read (its id lists were left on the server)."""
    part = row.get("cp")
    if not isinstance(part, dict):
        return None
    part = unescape_keys(part)
    return CompressionCheckpoint.from_parts(part.get("metadata"), part.get("cache"))


async def read_paged_window(
    port: TaskPort, task_id: str, header: TaskHeader, *, head: int, tail: int
) -> tuple[LevelRead, tuple[list[JSON], list[JSON], list[JSON]]]:
    """The window read of a paged level: its counts and checkpoint (a `LevelRead` whose
    messages are still to be decoded) and the stored head, systems and tail."""
    scope = header.current_scope
    row, paging = await _row(port, task_id, scope, head=head, tail=tail)
    head_raw, stubbed_head = _pieces(row, paging, "head")
    tail_raw, stubbed_tail = _pieces(row, paging, "run")
    head_ids = {m.get("id") for m in head_raw}
    pages = sorted(row.get("systems") or [], key=lambda r: int(r.get("page", 0)))
    systems_raw = [m for r in pages for m in r.get("systems") or []]
    apply_pending(systems_raw, paging.pending)
    systems_raw += row.get("o_systems") or []
    systems_raw = [m for m in systems_raw if m.get("id") not in head_ids]
    read = LevelRead(
        scope=scope,
        head=[],
        systems=[],
        tail=[],
        level_count=int(row.get("level_count", 0)),
        view_count=int(row.get("view_count", 0)),
        visible_count=int(row.get("visible_count", 0)),
        model_count=int(row.get("model_count", 0)),
        checkpoint=_checkpoint(row),
        checkpoint_message_id=row.get("mark_id"),
        stubbed_ids=stubbed_head | stubbed_tail,
        stubbed_count=int(row.get("stubbed_count", 0)),
        read_bytes=sum(bson_size(m) for m in [*head_raw, *tail_raw]),
        paged=True,
        paged_level=KnownCounts(paging.version, tuple(row.get("known") or ())),
    )
    return read, (head_raw, systems_raw, tail_raw)


async def read_paged_range(
    port: TaskPort, task_id: str, scope: str | None, start: int, count: int,
    known: KnownCounts | None = None,
) -> tuple[str | None, int, list[AnyMessage], set[str]]:  # fmt: skip
    """Visible messages ``[start, start + count)`` of a paged level (a widening read),
    with the checkpoint's message id and the visible count read with them: the same
    pipeline, no head, so one round trip (a new checkpoint shows in the id returned).
    `known`: the window read's `KnownCounts` (`LevelRead.paged_level`): the pages are not
    counted again, only the ones holding the range are read; `StalePage` if the task was
    written since (the caller reads again without them)."""
    row, paging = await _row(port, task_id, scope, head=0, start=start, count=count, known=known)
    raw, stubbed = _pieces(row, paging, "run")
    messages = await port.decode(task_id, raw)
    return row.get("mark_id"), int(row.get("visible_count", 0)), messages, stubbed
