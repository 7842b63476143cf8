"""Appending through mindstore on the embedded backend's fast update path.

The same appends with `fast_updates` on and off (`backends/embedded/fast_update.py`):
exactly-once under concurrent writers and replays, the document limit refused at the same
append, and the recorder's figures unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mindstore
from layout import stored_messages
from mindstore.backends import CommandRecorder
from mindstore.backends.embedded import guard_index
from mindstore.errors import TaskTooLarge
from mindstore.ids import task_key
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TaskConfigPart, ToolMetadata
from mindstore.repositories.tasks import RetryPolicy, TaskRepository
from mindstore.store import Store

CONFIG = TaskConfigPart(model_name="m", tool_metadata=[ToolMetadata(name="search")])
PATIENT = RetryPolicy(attempts=400, base_delay=0.0002, max_delay=0.01)


@pytest.mark.parametrize("policy", [None, PagePolicy(page_messages=3)], ids=["unpaged", "paged"])
async def test_concurrent_writers_and_replays_append_each_message_exactly_once(
    monkeypatch, policy
) -> None:
    monkeypatch.setattr(guard_index, "MIN_LENGTH", 0)  # the guard index answers every guard
    store = await mindstore.connect("embedded", page_policy=policy)
    writers = [Store(store.backend, retry=PATIENT, page_policy=policy).scoped("acme")
               for _ in range(6)]  # fmt: skip
    tid = (await writers[0].tasks.create(config=CONFIG)).id

    async def writer(n: int) -> None:
        for i in range(15):
            # two writers (on different stores) send every message: one append, one replay
            message_id = f"m{n // 2}-{i}"
            await writers[n % len(writers)].tasks.add_human_message(
                tid, message_id, message_id=message_id
            )

    await asyncio.gather(*(writer(n) for n in range(12)))
    messages = await writers[0].tasks.messages(tid)
    ids = [m.id for m in messages[1:]]
    assert sorted(ids) == sorted(f"m{k}-{i}" for k in range(6) for i in range(15))
    record = await writers[0].tasks.get(tid)
    stored = await stored_messages(store.database, task_key("acme", tid))  # pages and open page
    assert [m["id"] for m in stored] == [m.id for m in messages]
    if policy is None:  # one successful write per appended message (seals add their own)
        assert record.seq == 91 and record.version == 90
    else:
        assert record.seq == 91 and (await writers[0].tasks.header(tid)).pages > 10
    await store.close()


async def fill_until_too_large(fast: bool) -> tuple[int, int, list[Any]]:
    """Append 20 KB messages under a 400 KB limit (192 KiB of it kept for the header)
    until one is refused."""
    store = await mindstore.connect("embedded")
    store.backend.client.fast_updates = fast
    repo = TaskRepository(  # unpaged: the task document holds every message
        store.database, "acme", max_document_bytes=400_000, offload_threshold=10**9,
        page_policy=None,
    )  # fmt: skip
    tid = (await repo.create()).id
    appended = 0
    with pytest.raises(TaskTooLarge) as error:
        for i in range(100):
            await repo.add_human_message(tid, "y" * 20_000, message_id=f"m{i}")
            appended += 1
    raw = await store.database["tasks"].find_one({"_id": task_key("acme", tid)})
    before = [m["id"] for m in raw["messages"]]
    await store.close()
    return appended, error.value.limit_bytes, before


async def test_the_document_limit_is_refused_at_the_same_append_on_both_paths() -> None:
    fast, slow = await fill_until_too_large(True), await fill_until_too_large(False)
    assert fast == slow
    appended, limit, stored_ids = fast
    assert limit == 400_000 and 5 < appended < 15
    assert stored_ids == [f"m{i}" for i in range(appended)]  # the refused append wrote nothing


async def test_the_16_mib_limit_is_still_refused_on_a_nearly_full_unpaged_task() -> None:
    store = await mindstore.connect("embedded")
    repo = TaskRepository(store.database, "acme", offload_threshold=10**9, page_policy=None)
    tid = (await repo.create()).id
    for i in range(15):
        await repo.add_human_message(tid, "z" * (1024 * 1024), message_id=f"big{i}")
    raw = await store.database["tasks"].find_one({"_id": task_key("acme", tid)})
    with pytest.raises(TaskTooLarge):
        await repo.add_human_message(tid, "z" * (1024 * 1024 + 512 * 1024), message_id="over")
    after = await store.database["tasks"].find_one({"_id": task_key("acme", tid)})
    assert after == raw and len(after["messages"]) == 15
    await store.close()


async def test_the_recorder_counts_the_same_bytes_on_both_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    figures = []
    for fast in (True, False):
        # the generated ids (the config message's) fixed: a sealed page's id filter holds
        # their bits, and a filter word's BSON size (int32 or int64) depends on them
        ids = (f"gen{n}" for n in range(10**6))
        monkeypatch.setattr("mindstore.model.base.ID_SOURCE", ids.__next__)
        recorder = CommandRecorder()
        store = await mindstore.connect("embedded", recorder=recorder)
        store.backend.client.fast_updates = fast
        tasks = store.scoped("acme").tasks
        tid = (await tasks.create(config=CONFIG, task_id="t")).id
        with recorder.capture() as log:
            for i in range(5):
                await tasks.add_human_message(tid, f"hello {i}", message_id=f"u{i}")
            await tasks.add_human_message(tid, "hello 0", message_id="u0")  # a replay
        figures.append(
            [(c.name, c.bytes_sent, c.bytes_received, c.round_trips, c.n_returned) for c in log]
        )
        await store.close()
    assert figures[0] == figures[1] and len(figures[0]) >= 6
