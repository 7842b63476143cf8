"""The context window's read of a level: one pipeline through the task repository's port.

It lives in the compression layer (above the repository): it turns the rows of
`pipelines.context.context_window_pipeline` into a `LevelRead`, with the port's public
reads (`repositories.port.TaskPort`): its scope's `aggregate_task` (the view's filter
applied) and its decoder (markers resolved against the task's own payloads).
"""

from __future__ import annotations

from typing import Any

from mindstore.compression.checkpoint import CompressionCheckpoint
from mindstore.compression.paged_level_read import read_paged_range, read_paged_window
from mindstore.compression.window import KnownCounts, LevelRead
from mindstore.model.header import TaskHeader
from mindstore.model.messages import AnyMessage, TaskConfigMessage, TaskEntryMessage
from mindstore.model.parts import TaskConfigPart
from mindstore.model.storage_form import bson_size, unescape_keys
from mindstore.pipelines import context as context_pipelines
from mindstore.repositories.pages import STALE_READS, StalePage, kept_changing
from mindstore.repositories.port import TaskPort
from mindstore.validation import check_int


async def read_level_window(
    port: TaskPort, task_id: str, header: TaskHeader, *, head: int, tail: int
) -> LevelRead:
    """One window read of the current level (`header`'s): its first `head` view
    messages, its later system messages, its last `tail` visible messages and the
    counts of the rest, its latest checkpoint without the id lists, and its task
    config; one pipeline, so one snapshot and one round trip (plus one for offloaded
    payloads, if the messages read hold markers)."""

    scope = header.current_scope
    check_int(head, "head", minimum=1)
    check_int(tail, "tail", minimum=1)
    location = header.current_config_index()
    if header.pages:
        return await _read_paged_level(port, task_id, header, head=head, tail=tail)
    config_index = (
        location[0]
        if location is not None and location[1] == "config" and location[0] >= head
        else None
    )
    rows = await port.scope.aggregate_task(
        task_id,
        lambda query: context_pipelines.context_window_pipeline(
            query, scope, head=head, tail=tail, config_index=config_index
        ),
    )
    row = rows[0]
    if port.scope.cipher is not None and isinstance(row.get("cp"), dict):
        # the checkpoint's part, as the compression message holds it (its first part,
        # `add_compression_message`), opened: its summary is sealed (mindstore.crypto)
        mark = {"id": row.get("mark_id"), "content": [row["cp"]]}
        row["cp"] = (await port.scope.cipher.opened([mark], task_id))[0]["content"][0]
    names = ("head", "systems", "tail", "config")
    raw = [doc for name in names for doc in row.get(name, [])]
    head_msgs, systems, tail_msgs, config_msgs = _split(
        await port.decode(task_id, raw), [len(row.get(name, [])) for name in names]
    )
    read = LevelRead(
        scope=scope,
        head=head_msgs,
        systems=systems,
        tail=tail_msgs,
        level_count=int(row.get("level_count", 0)),
        view_count=int(row.get("view_count", 0)),
        visible_count=int(row.get("visible_count", 0)),
        model_count=int(row.get("model_count", 0)),
        checkpoint=_window_checkpoint(row),
        checkpoint_message_id=row.get("mark_id"),
        stubbed_ids={*row.get("stubbed_head", []), *row.get("stubbed_tail", [])},
        stubbed_count=int(row.get("stubbed_count", 0)),
        config=_level_config(scope, location, head_msgs, config_msgs),
    )
    read.read_bytes = sum(bson_size(doc) for doc in raw[: len(raw) - len(config_msgs)])
    return read


async def read_level_range(
    port: TaskPort, task_id: str, scope: str | None, start: int, count: int,
    *, paged: bool = False, paged_level: KnownCounts | None = None,
) -> tuple[str | None, int, list[AnyMessage], set[str]]:  # fmt: skip
    """Visible messages ``[start, start + count)`` of a level, for a window read that fell
    short: (checkpoint message id, visible count, messages, stubbed ids among them).
    `paged`: the window was read from a paged task (`LevelRead.paged`): one pipeline;
    `paged_level`: that read's page counts (`LevelRead.paged_level`), reused while the task
    is at their version (else counted again on the server); a new checkpoint shows in the
    id returned."""
    check_int(start, "start")
    check_int(count, "count", minimum=1)
    if paged:
        for _attempt in range(STALE_READS):
            try:
                return await read_paged_range(port, task_id, scope, start, count, paged_level)
            except StalePage:
                paged_level = None
                continue
        raise kept_changing(task_id)
    rows = await port.scope.aggregate_task(
        task_id, lambda query: context_pipelines.context_range_pipeline(query, scope, start, count)
    )
    row = rows[0]
    messages = await port.decode(task_id, row.get("range", []))
    return (
        row.get("mark_id"),
        int(row.get("visible_count", 0)),
        messages,
        set(row.get("stubbed_range", [])),
    )


async def _read_paged_level(
    port: TaskPort, task_id: str, header: TaskHeader, *, head: int, tail: int
) -> LevelRead:
    """The window read of a paged task, per segment (`compression.paged_level_read`); read
    again if a page changed under it (`StalePage`: a later change was folded in)."""
    for _attempt in range(STALE_READS):
        try:
            read, groups = await read_paged_window(port, task_id, header, head=head, tail=tail)
            break
        except StalePage:
            continue
    else:
        raise kept_changing(task_id)
    decoded = await port.decode(task_id, [doc for group in groups for doc in group])
    read.head, read.systems, read.tail = _split(decoded, [len(group) for group in groups])
    location = header.current_config_index()
    extra: list[AnyMessage] = []
    if location is not None and location[1] == "config" and location[0] >= head:
        extra = await port.read_range(task_id, location[0], location[0] + 1)
    read.config = _level_config(read.scope, location, read.head, extra)
    return read


def _split(messages: list[AnyMessage], sizes: list[int]) -> list[list[AnyMessage]]:
    """`messages` cut into consecutive runs of the given sizes."""
    runs, start = [], 0
    for size in sizes:
        runs.append(messages[start : start + size])
        start += size
    return runs


def _window_checkpoint(row: dict[str, Any]) -> CompressionCheckpoint | None:
    """The latest checkpoint of a window read (its id lists were left on the server)."""
    part = row.get("cp")
    if not isinstance(part, dict):
        return None
    part = unescape_keys(part)
    return CompressionCheckpoint.from_parts(part.get("metadata"), part.get("cache"))


def _level_config(
    scope: str | None,
    location: tuple[int, str] | None,
    head: list[AnyMessage],
    extra: list[AnyMessage],
) -> TaskConfigPart | None:
    """The current level's task config from what a window read holds: the entry (a
    sub-task's level starts with it), the root's config message, or the one read apart."""
    if location is None:
        return None
    for message in [*extra, *head]:
        entry = (
            message.entry()
            if isinstance(message, TaskEntryMessage) and message.id == scope
            else None
        )
        if entry is not None:
            return entry.initial_task_config
        if (
            scope is None
            and isinstance(message, TaskConfigMessage)
            and message.config() is not None
        ):
            return message.config()
    return None
