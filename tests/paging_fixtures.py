"""Paged tasks for the tests of the readers outside the task repository (analytics,
backup, erase), built by the repository's own seals, so they have the shape seals write.

Workloads are inserted whole (`mindstore.workload.load`: documents in the form a task
stored before paging has); `seal_all` then gives each task the write that pages such a
task (docs/data-model.md, "Earlier documents": its next message write seals it, as many
pages as it needs) through a store with a small `PagePolicy`, and undoes that write with
`retract_last`, so the history is the workload's and only its layout changed. The states
a crash leaves are made the same way, by a real write that fails at a chosen step:
`half_done_seal` (pages written past the task's mark, the mark never moved) and
`unfolded` (a change to a sealed message committed, its fold into the page failed).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pymongo.errors import AutoReconnect

from interleaving import WRITES, Hooked, hooked
from mindstore import PagePolicy, Store
from mindstore.documents import TASK_PAGES, TASKS
from mindstore.ids import task_id_of


async def crash() -> None:
    raise AutoReconnect("connection lost")  # what a crash looks like to the code that survives it


def _bare(key: str) -> tuple[str, str]:
    tenant, _, _rest = key.partition("/")
    return tenant, task_id_of(key)


async def seal_all(
    store: Store, policy: PagePolicy, tenant: str | None = None, *, keys: Sequence[str] = ()
) -> int:
    """Page every stored task (of `tenant`, or all; or the tasks stored under `keys`) that
    a write would page under `policy`, by that write (an append, then retracted); returns
    how many tasks are paged after."""
    writer = Store(store.backend, page_policy=policy)
    query: dict[str, Any] = {} if tenant is None else {"tenant": tenant}
    if keys:
        query["_id"] = {"$in": list(keys)}
    found = await store.database[TASKS].find(query, {"_id": 1}).to_list(None)
    for key in sorted(task["_id"] for task in found):
        owner, task_id = _bare(key)
        tasks = writer.scoped(owner).tasks
        probe = await tasks.add_human_message(task_id, "the write that seals", message_id="sealer")
        removed = await tasks.retract_last(task_id, probe.id)
        assert removed is not None and removed.id == "sealer"
    return int(await store.database[TASKS].count_documents({**query, "pages": {"$gt": 0}}))


async def half_done_seal(store: Store, policy: PagePolicy, key: str) -> list[dict[str, Any]]:
    """Leave pages past the task's `pages` mark, as a seal stopped after writing them: a
    writer appends until its seal writes pages, and the seal's task update is lost (the
    writes appended are retracted after). Returns the pages left past the mark."""
    owner, task_id = _bare(key)
    writer = Store(store.backend, page_policy=policy).scoped(owner).tasks
    wrote: dict[str, bool] = {"pages": False}

    async def page_written() -> None:
        wrote["pages"] = True

    async def lost_if_sealing() -> None:
        if wrote["pages"]:
            await crash()

    appended = []
    with (
        hooked(writer.port.scope, "pages", WRITES, page_written, times=None),
        hooked(writer.port.scope, "tasks", ("update_one",), lost_if_sealing, times=None),
    ):
        while not wrote["pages"]:
            assert len(appended) < 4 * policy.page_messages, "no seal came due"
            message = await writer.add_human_message(task_id, "until a seal is due")
            appended.append(message.id)
    for message_id in reversed(appended):
        assert await writer.retract_last(task_id, message_id) is not None
    task = await store.database[TASKS].find_one({"_id": key})
    assert task is not None
    past = {"task": key, "page": {"$gte": task.get("pages", 0)}}
    left: list[dict[str, Any]] = await store.database[TASK_PAGES].find(past).to_list(None)
    assert left, "the seal wrote no page"
    return sorted(left, key=lambda page: page["page"])


async def every_read(tasks: Any, task_id: str) -> dict[str, Any]:
    """What each of the task repository's reads returns for a task (messages as dicts,
    else ids), to compare two states of its storage that hold the same history."""

    def ids(messages: Any) -> list[str]:
        return [message.id for message in messages]

    messages = await tasks.messages(task_id)
    count, head, tail = await tasks.ends(task_id, 5, 5)
    return {
        "messages": [message.to_dict() for message in messages],
        "ranges": [ids(await tasks.messages(task_id, start, 4)) for start in range(0, count, 3)],
        "tail": ids(await tasks.tail(task_id, 7)),
        "ends": (count, ids(head), ids(tail)),
        "get": [(await tasks.get_message(task_id, m.id)).to_dict() for m in messages],
        "updates": ids(await tasks.get_updates(task_id, messages[len(messages) // 2].id)),
        "levels": [
            ids(await tasks.level_messages(task_id, scope))
            for scope in dict.fromkeys([None, *(m.scope for m in messages)])
        ],
        "current": ids(await tasks.current_task_messages(task_id)),
        "spans": await tasks.sub_task_spans(task_id),
        "load": ids((await tasks.load(task_id)).messages),
        "context": ids(list(await tasks.context(task_id, auto_compress=False))),
    }


@contextmanager
def unfolded(tasks: Any) -> Iterator[Hooked]:
    """Verbs of the block on `tasks` commit, but every page write after them fails (a
    crash): a change to a sealed message stays in the task's `pending` list."""
    with hooked(tasks.port.scope, "pages", WRITES, crash, times=None) as pages:
        yield pages
