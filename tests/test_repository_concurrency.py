"""Real concurrent coroutines against one stored task.

Writers are spread over several `Store` objects on the same backend: each store has its
own per-task locks, like separate worker processes, so the version-guarded retry path is
exercised and not just the in-process queue.
"""

from __future__ import annotations

import asyncio
import random

from layout import read_layout
from mindstore.errors import InvalidTransition, NotFound
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.model.plans import derive_header, stored_doc
from mindstore.model.storage_form import bson_size
from mindstore.repositories.tasks import RetryPolicy
from mindstore.store import Store

CONFIG = TaskConfigPart(
    model_name="m", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
)
PATIENT = RetryPolicy(attempts=400, base_delay=0.0002, max_delay=0.01)


def workers(store: Store, count: int) -> list:
    """`count` independent stores (own lock registries) sharing one backend."""
    return [Store(store.backend, retry=PATIENT).scoped("acme") for _ in range(count)]


async def test_fifty_writers_append_forty_messages_each(store):
    tenants = workers(store, 10)
    tid = (await tenants[0].tasks.create()).id

    async def writer(n: int) -> None:
        repo = tenants[n % len(tenants)].tasks
        for i in range(40):
            await repo.add_human_message(tid, f"w{n}-{i}", message_id=f"w{n}-{i}")

    await asyncio.gather(*(writer(n) for n in range(50)))

    messages = await tenants[0].tasks.messages(tid)
    ids = [m.id for m in messages]
    assert len(ids) == 2000 and len(set(ids)) == 2000
    for n in range(50):
        mine = [i for i in ids if i.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(40)]  # each writer's order kept
    record = await tenants[0].tasks.get(tid)
    assert record.seq == 2000
    # exactly one successful write per append, plus one per seal (the pages it made name
    # the version they were sealed from)
    pages = await store.database["task_pages"].find({"tenant": "acme"}).to_list(None)
    assert pages, "2,000 messages span several pages"
    assert record.version == 2000 + len({page["version"] for page in pages})
    assert record.size_bytes == sum(bson_size(stored_doc(m, tid)) for m in messages)
    # every message but the last was finished by the one appended after it
    assert all(m.finished_ts is not None for m in messages[:-1])


async def test_racing_entries_exits_and_tool_answers_keep_the_header_consistent(store):
    tenants = workers(store, 5)
    tid = (await tenants[0].tasks.create(config=CONFIG)).id
    rng = random.Random(7)

    async def writer(n: int) -> None:
        repo = tenants[n % len(tenants)].tasks
        for step in range(6):
            action = rng.choice(["call", "answer", "enter", "exit", "text"])
            try:
                if action == "call":
                    message = await repo.add_assistant_message(tid)
                    await repo.add_tool_call_part(
                        tid, message.id,
                        ToolCallPart(tool_call_id=f"c{n}-{step}", tool_name="delegate"),
                    )  # fmt: skip
                elif action == "answer":
                    header = await repo.header(tid)
                    if header.open_tool_calls:
                        await repo.answer_tool_call(tid, header.open_tool_calls[0].id, {"ok": n})
                elif action == "enter":
                    await repo.add_task_entry(tid, [TextPart(text=f"sub {n}")], CONFIG)
                elif action == "exit":
                    await repo.add_task_exit(tid, [TextPart(text=f"done {n}")])
                else:
                    await repo.add_human_message(tid, f"hello {n}")
            except Exception as exc:  # racing verbs may find their precondition gone
                assert isinstance(exc, (NotFound, InvalidTransition)), exc

    await asyncio.gather(*(writer(n) for n in range(20)))

    task = await tenants[0].tasks.load(tid)
    stored = await tenants[0].tasks.header(tid)
    derived = derive_header(tid, [m.model_copy(deep=True) for m in task.messages])
    assert stored.seq == derived.seq == len(task.messages)
    assert stored.scope_stack == derived.scope_stack
    assert sorted(r.id for r in stored.open_tool_calls) == sorted(
        r.id for r in derived.open_tool_calls
    )
    assert stored.size_bytes == sum(bson_size(stored_doc(m, tid)) for m in task.messages)
    ids = [m.id for m in task.messages]
    assert len(ids) == len(set(ids))
    # every answered call has exactly one result and its flags flipped
    results = [
        part.tool_call_id
        for m in task.messages if m.role == "tool"
        for part in m.content
    ]  # fmt: skip
    open_ids = {r.id for r in stored.open_tool_calls}
    for m in task.messages:
        if m.role == "assistant":
            for part in m.tool_calls():
                answered = part.tool_call_id in results
                assert answered != (part.tool_call_id in open_ids)
                if answered:
                    assert part.is_loading is False and part.is_approval_pending is False


async def test_lost_races_without_local_locks_still_store_everything(store):
    """Every writer on its own store: all contention goes through the version guard."""
    tenants = workers(store, 12)
    tid = (await tenants[0].tasks.create()).id

    async def writer(n: int) -> None:
        for i in range(8):
            await tenants[n].tasks.add_human_message(tid, "x", message_id=f"{n}.{i}")

    await asyncio.gather(*(writer(n) for n in range(12)))
    record = await tenants[0].tasks.get(tid)
    # exactly one successful write per append, plus one per seal (its pages name the
    # version they were sealed from)
    layout = await read_layout(store.database, f"acme/{tid}")
    seals = len({page["version"] for page in layout.pages})
    assert record.seq == 96 and record.version == 96 + seals
    expected = sorted(f"{n}.{i}" for n in range(12) for i in range(8))
    assert sorted(m["id"] for m in layout.messages) == expected
