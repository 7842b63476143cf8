"""The conversations an export reads, through a tenant view (I/O).

Tasks come from `tasks.list` (oldest first, keyset pages) or, when the caller names
tasks, from `tasks.get` each; messages from `tasks.read_range` in bounded chunks, so
a conversation of any length is read a window at a time and a tenant of any size one
page of tasks at a time. Every read goes through the view: tenant and owner scope, a
keyring's unsealing and a shredded tenant's refusal are the view's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from mindstore.errors import ValidationError
from mindstore.ids import check_name
from mindstore.model.messages import AnyMessage
from mindstore.protocols import TaskRecord
from mindstore.store import TenantStore
from mindstore.validation import check_owner

__all__ = ["MESSAGES_CHUNK", "TASKS_PAGE", "conversations", "messages_of"]

TASKS_PAGE = 200
"""Tasks read per listing page."""
MESSAGES_CHUNK = 500
"""Messages read per range read of one conversation."""
MAX_NAMED_TASKS = 10_000
"""The most tasks one export may name (`task_ids`)."""


async def messages_of(view: TenantStore, record: TaskRecord) -> list[AnyMessage]:
    """Every message of the conversation, read `MESSAGES_CHUNK` at a time."""
    out: list[AnyMessage] = []
    while True:
        chunk = await view.tasks.read_range(record.id, len(out), len(out) + MESSAGES_CHUNK)
        out.extend(chunk)
        if len(chunk) < MESSAGES_CHUNK:
            return out


async def conversations(
    view: TenantStore,
    *,
    owner: str | None = None,
    task_ids: Sequence[str] | None = None,
) -> AsyncIterator[TaskRecord]:
    """The view's conversations (one owner's, or the named tasks), oldest first.

    Raises:
        ValidationError: A bad owner or task id (named), or too many task ids.
        NotFound: A named task this view does not hold.
    """
    if owner is not None:
        check_owner(owner, "owner")
    if task_ids is not None:
        named = list(task_ids)
        if len(named) > MAX_NAMED_TASKS:
            raise ValidationError(f"task_ids: at most {MAX_NAMED_TASKS} tasks per export")
        for task_id in named:
            check_name(task_id, "task id")
        for task_id in dict.fromkeys(named):
            record = await view.tasks.get(task_id)
            if owner is None or record.owner == owner:
                yield record
        return
    cursor: str | None = None
    while True:
        page = await view.tasks.list(
            owner=owner, limit=TASKS_PAGE, cursor=cursor, oldest_first=True
        )
        for record in page.items:
            yield record
        if page.next_cursor is None:
            return
        cursor = page.next_cursor
