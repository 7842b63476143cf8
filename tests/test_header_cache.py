"""The header cache: an append after this process's own write needs no read, and a cached
header that went stale (another process wrote, deleted, re-created, retitled the task)
never decides what is written."""

from __future__ import annotations

import asyncio

import pytest

from mindstore import InvalidTransition
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.model.plans import derive_header, stored_doc
from mindstore.model.storage_form import bson_size
from mindstore.repositories.header_cache import CachedHeader, HeaderCache
from mindstore.store import Store

CONFIG = TaskConfigPart(
    model_name="m", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
)


def other_process(store: Store) -> object:
    """A second store on the same backend: its own locks and header cache, like a worker
    in another process."""
    return Store(store.backend).scoped("acme")


async def assert_header_matches_messages(acme, task_id: str) -> None:
    """The stored header is what folding the stored messages gives (nothing went stale)."""
    header = await acme.tasks.header(task_id)
    messages = await acme.tasks.messages(task_id)
    derived = derive_header(task_id, messages)
    assert header.seq == len(messages) == derived.seq
    assert [f.entry_id for f in header.scope_stack] == [f.entry_id for f in derived.scope_stack]
    assert [r.id for r in header.open_tool_calls] == [r.id for r in derived.open_tool_calls]
    assert header.tail is not None and header.tail.id == messages[-1].id
    assert header.usage == derived.usage


async def test_a_warm_append_is_one_update_within_512_bytes_of_the_message(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "hello")
    message = UserMessage(id="probe", content=[TextPart(text="what's next?")])
    with store.backend.recorder.capture() as log:
        await acme.tasks.add_message(tid, message)
    assert [c.name for c in log] == ["update"]
    stored = (await acme.tasks.tail(tid, 1))[0]
    assert log.bytes_sent <= bson_size(stored_doc(stored, tid)) + 512


async def test_without_a_cache_every_append_reads_the_header_first(store):
    cold = Store(store.backend, header_cache_size=0).scoped("acme")
    tid = (await cold.tasks.create(config=CONFIG)).id
    with store.backend.recorder.capture() as log:
        await cold.tasks.add_human_message(tid, "hello")
        await cold.tasks.add_human_message(tid, "again")
    assert [c.name for c in log] == ["find", "update", "find", "update"]


async def test_another_writer_in_between_costs_one_read_and_loses_nothing(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "mine 1", message_id="m1")
    other = other_process(store)
    await other.tasks.add_human_message(tid, "theirs", message_id="o1")
    with store.backend.recorder.capture() as log:
        await acme.tasks.add_human_message(tid, "mine 2", message_id="m2")
    names = [c.name for c in log]  # the cached guess, the replay check, a read, the write
    assert (
        names[0] == names[-1] == "update"
        and names.count("update") == 2
        and names.count("find") == 1
    )
    ids = [m.id for m in await acme.tasks.messages(tid)]
    assert ids[-3:] == ["m1", "o1", "m2"]
    await assert_header_matches_messages(acme, tid)


async def test_a_stale_level_never_plans_the_write(acme, store):
    """Cached: inside a sub-task. Another process exits it. An exit planned from the cache
    would be wrong; the guard refuses it and the fresh header says there is nothing to exit."""
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_message(tid, UserMessage(content=[TextPart(text="go")]))
    reply = await acme.tasks.add_assistant_message(tid)
    await acme.tasks.add_tool_call_part(
        tid, reply.id, ToolCallPart(tool_call_id="c1", tool_name="delegate")
    )
    await acme.tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG)
    await other_process(store).tasks.add_task_exit(tid, [TextPart(text="done by them")])
    with pytest.raises(InvalidTransition):
        await acme.tasks.add_task_exit(tid, [TextPart(text="done by us")])
    await assert_header_matches_messages(acme, tid)
    assert await acme.tasks.current_task_level(tid) == 0


async def test_a_cached_root_level_does_not_refuse_a_valid_exit(acme, store):
    """The reverse: the cache says root, another process entered a sub-task; the exit is
    valid and must not fail on the stale header."""
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "go")
    other = other_process(store)
    reply = await other.tasks.add_assistant_message(tid)
    await other.tasks.add_tool_call_part(
        tid, reply.id, ToolCallPart(tool_call_id="c1", tool_name="delegate")
    )
    await other.tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG)
    _exit_message, answer = await acme.tasks.add_task_exit(tid, [TextPart(text="done")])
    assert answer is not None and answer.content[0].tool_call_id == "c1"
    await assert_header_matches_messages(acme, tid)


def finished_user(text: str) -> UserMessage:
    """A message that arrives finished, so the next append patches nothing (and carries no
    per-message id guard): only `version` and `updated_at` stand between a stale cache and
    the write."""
    return UserMessage(content=[TextPart(text=text)], started_ts=1, finished_ts=2)


async def test_a_re_created_task_at_the_same_version_is_not_mistaken_for_the_cached_one(
    acme, store
):
    """ABA: the task is deleted and re-created under the same id by another process, and
    written as many times as before, so `version` matches the cache again."""
    tid = (await acme.tasks.create(config=CONFIG, task_id="same-id")).id
    await acme.tasks.add_message(tid, finished_user("old 1"))
    await acme.tasks.add_message(tid, finished_user("old 2"))
    other = other_process(store)
    await other.tasks.delete(tid)
    await asyncio.sleep(0.002)  # the re-created task's writes land in later milliseconds
    await other.tasks.create(task_id="same-id")
    await other.tasks.add_task_config(tid, CONFIG)
    await other.tasks.add_message(tid, finished_user("new 1"))
    assert (await other.tasks.get(tid)).version == 2  # what acme's cache holds too
    await acme.tasks.add_message(tid, finished_user("after"))
    texts = [m.text() for m in await acme.tasks.messages(tid)]
    assert texts == ["", "new 1", "after"]
    await assert_header_matches_messages(acme, tid)


async def test_a_retitled_task_invalidates_the_cache(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_human_message(tid, "one")
    await other_process(store).tasks.set_title(tid, "renamed elsewhere")
    await acme.tasks.add_human_message(tid, "two")
    record = await acme.tasks.get(tid)
    assert record.title == "renamed elsewhere" and record.seq == 3
    await assert_header_matches_messages(acme, tid)


async def test_concurrent_writers_with_their_own_caches_store_every_message(store):
    stores = [other_process(store) for _ in range(6)]
    tid = (await stores[0].tasks.create(config=CONFIG)).id

    async def writer(n: int) -> None:
        for i in range(10):
            await stores[n].tasks.add_human_message(tid, f"{n}.{i}", message_id=f"{n}.{i}")

    await asyncio.gather(*(writer(n) for n in range(6)))
    messages = await stores[0].tasks.messages(tid)
    assert sorted(m.id for m in messages[1:]) == sorted(
        f"{n}.{i}" for n in range(6) for i in range(10)
    )
    for n in range(6):  # each writer's own messages keep their order
        mine = [m.id for m in messages if m.id.startswith(f"{n}.")]
        assert mine == [f"{n}.{i}" for i in range(10)]
    await assert_header_matches_messages(stores[0], tid)


def test_the_cache_is_a_bounded_lru():
    cache = HeaderCache(capacity=2)
    entry = CachedHeader(version=1, updated_at=None, header=None)  # type: ignore[arg-type]
    cache.put(("t", "a"), entry)
    cache.put(("t", "b"), entry)
    assert cache.get(("t", "a")) is entry  # a is now the most recent
    cache.put(("t", "c"), entry)
    assert cache.get(("t", "b")) is None and len(cache) == 2
    cache.forget(("t", "a"))
    assert cache.get(("t", "a")) is None
    off = HeaderCache(capacity=0)
    off.put(("t", "a"), entry)
    assert off.get(("t", "a")) is None
    with pytest.raises(ValueError):
        HeaderCache(capacity=-1)
