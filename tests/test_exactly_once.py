"""Exactly-once appends over sealed pages, decided by ids alone (model/id_filter.py).

A caller-named message that is already stored, in the open page or in a sealed page, is a
replay: the call returns the stored message and the store does not change, whatever the
timestamps say (equal, zero, out of order, in the future, the clock now). A fresh message
is one guarded update with no read before it. Pages here are tiny (1 to 3 messages), so
almost every replay reaches back into sealed pages.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.errors import ValidationError
from mindstore.model import id_filter
from mindstore.model.messages import AnyMessage, UserMessage, message_to_dict
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TaskConfigPart, TextPart, ToolMetadata
from mindstore.repositories.tasks import RetryPolicy
from mindstore.services.tasks import TaskService
from mindstore.store import Store

CONFIG = TaskConfigPart(model_name="m", tool_metadata=[ToolMetadata(name="search")])
TEST_URI = os.environ.get("MINDSTORE_TEST_URI") or None
PATIENT = RetryPolicy(attempts=400, base_delay=0.0002, max_delay=0.01)

TIMESTAMPS = st.one_of(
    st.none(),  # the clock, now
    st.just(0),
    st.just(1_700_000_000),  # every message in the same second
    st.just(4_102_444_800),  # 2100: in the future
    st.integers(min_value=0, max_value=4_102_444_800),
    st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False),
)


def policy(page_messages: int) -> PagePolicy:
    return PagePolicy(page_messages=page_messages, page_bytes=1024 * 1024)


async def open_store(page_messages: int) -> Store:
    """For the hypothesis tests, which run their own loop (no async fixture there)."""
    database = f"mindstore_test_{uuid.uuid4().hex[:12]}"
    return await mindstore.connect(
        TEST_URI or "embedded", database=database, page_policy=policy(page_messages)
    )


async def close_store(store: Store) -> None:
    if TEST_URI:
        await store.backend.client.drop_database(store.database.name)
    await store.close()


async def layout(store: Store) -> list[Any]:
    """Every stored document of the task and its pages, as stored."""
    tasks = await store.database["tasks"].find({}).to_list(length=None)
    pages = await store.database["task_pages"].find({}).sort("_id", 1).to_list(length=None)
    return [tasks, pages]


Verb = Callable[[TaskService, str, str, Any], Awaitable[AnyMessage]]


def _ts(ts: Any) -> dict[str, Any]:
    return {} if ts is None else {"started_ts": ts}


VERBS: dict[str, Verb] = {
    "add_message": lambda t, tid, mid, ts: t.add_message(
        tid, UserMessage(id=mid, content=[TextPart(text=mid)], **_ts(ts))
    ),
    "add_human_message": lambda t, tid, mid, ts: t.add_human_message(tid, mid, message_id=mid),
    "add_system_message": lambda t, tid, mid, ts: t.add_system_message(tid, mid, message_id=mid),
    "add_assistant_message": lambda t, tid, mid, ts: t.add_assistant_message(tid, message_id=mid),
    "add_informational_message": lambda t, tid, mid, ts: t.add_informational_message(
        tid, "status", mid, message_id=mid
    ),
    "add_tool_result_message": lambda t, tid, mid, ts: t.add_tool_result_message(
        tid, f"call-{mid}", "search", {"r": mid}, message_id=mid
    ),
}

# (verb, timestamp) of a new message, or ("replay", index of an earlier call, timestamp)
STEP = st.one_of(
    st.tuples(st.sampled_from(sorted(VERBS)), TIMESTAMPS),
    st.tuples(st.just("replay"), st.integers(min_value=0), TIMESTAMPS),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page_messages=st.integers(min_value=1, max_value=3), steps=st.lists(STEP, max_size=30))
def test_replays_of_every_verb_change_nothing_whatever_the_timestamps(
    page_messages: int, steps: list[tuple[Any, ...]]
) -> None:
    async def scenario() -> None:
        store = await open_store(page_messages)
        tasks = store.scoped("acme").tasks
        tid = (await tasks.create(config=CONFIG)).id
        calls: list[tuple[str, str]] = []  # (verb, message id) of each new message
        first: dict[str, dict[str, Any]] = {}
        for step in steps:
            if step[0] == "replay":
                if not calls:
                    continue
                verb, mid = calls[step[1] % len(calls)]
                before = await layout(store)
                again = await VERBS[verb](tasks, tid, mid, step[2])
                assert await layout(store) == before  # nothing was written
                stored = await tasks.get_message(tid, mid)  # as later writes left it
                assert message_to_dict(again) == message_to_dict(stored)
                assert again.started_ts == first[mid]["started_ts"]  # not the replay's
            else:
                verb, mid = step[0], f"m{len(calls)}"
                stored = await VERBS[verb](tasks, tid, mid, step[1])
                first[mid] = message_to_dict(stored)
                calls.append((verb, mid))
        messages = await tasks.messages(tid)
        assert [m.id for m in messages[1:]] == [mid for _, mid in calls]
        await close_store(store)

    asyncio.run(scenario())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page_messages=st.integers(min_value=1, max_value=3), stamps=st.lists(TIMESTAMPS, min_size=1))
def test_racing_writers_and_replays_store_each_message_once(
    page_messages: int, stamps: list[Any]
) -> None:
    """Six stores on one database (no shared lock): every message is sent by two writers,
    each with its own adversarial timestamp, while seals run."""

    async def scenario() -> None:
        store = await open_store(page_messages)
        writers = [Store(store.backend, retry=PATIENT, page_policy=store.page_policy)
                   for _ in range(6)]  # fmt: skip
        views = [writer.scoped("acme").tasks for writer in writers]
        tid = (await views[0].create(config=CONFIG)).id

        async def writer(n: int) -> None:
            for i in range(8):
                mid = f"m{n // 2}-{i}"
                ts = stamps[(n + i) % len(stamps)]
                await views[n % len(views)].add_message(
                    tid, UserMessage(id=mid, content=[TextPart(text=mid)], **_ts(ts))
                )

        await asyncio.gather(*(writer(n) for n in range(12)))
        ids = [m.id for m in (await views[0].messages(tid))[1:]]
        assert sorted(ids) == sorted(f"m{k}-{i}" for k in range(6) for i in range(8))
        await close_store(store)

    asyncio.run(scenario())


async def test_a_fresh_append_to_a_paged_task_is_one_update_whatever_its_timestamp(
    store_factory: Any,
) -> None:
    store = await store_factory(page_policy=policy(2))
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(40):
        await tasks.add_message(tid, UserMessage(id=f"old{i}", started_ts=1_700_000_000,
                                                 content=[TextPart(text="x")]))  # fmt: skip
    for n, ts in enumerate((1_700_000_000, 0, 4_102_444_800, None, 1_699_999_999.5)):
        message = UserMessage(id=f"new{n}", content=[TextPart(text="y")], **_ts(ts))
        with store.backend.recorder.capture() as log:
            await tasks.add_message(tid, message)
        assert [(c.name, c.collection) for c in log][:1] == [("update", "tasks")]
        assert not [c for c in log if c.collection == "task_pages" and c.name != "update"
                    and c.name != "replace"]  # fmt: skip


async def test_a_replay_of_a_sealed_message_is_refused_by_the_filter_on_the_server(
    store_factory: Any,
) -> None:
    """The update a replay sends matches nothing because of the sealed-id filter (not a
    read before it): without the clause, the same update would append a duplicate."""
    store = await store_factory(page_policy=policy(1))
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(10):
        await tasks.add_human_message(tid, f"text {i}", message_id=f"m{i}")
    raw = await store.database["tasks"].find_one({})
    assert raw["sealed"] >= 5 and raw["id_filter_words"] == len(raw["id_filter"])
    blocks = list(raw["id_filter"])
    assert all(id_filter.may_hold(blocks, f"m{i}") for i in range(raw["sealed"] - 1))
    before = await layout(store)
    with store.backend.recorder.capture(payloads=True) as log:
        again = await tasks.add_human_message(tid, "text 0", message_id="m0")
    assert again.id == "m0" and await layout(store) == before
    updates = log.by_name("update")
    assert updates and "id_filter." in str(updates[0].filter)  # the clause refused it


async def test_an_answer_id_already_sealed_is_refused_with_a_typed_error(
    store_factory: Any,
) -> None:
    store = await store_factory(page_policy=policy(1))
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    await tasks.add_human_message(tid, "hello", message_id="taken")
    for i in range(6):
        await tasks.add_human_message(tid, f"text {i}", message_id=f"m{i}")
    before = await layout(store)
    batch = [UserMessage(id="fresh", content=[TextPart(text="a")]),
             UserMessage(id="taken", content=[TextPart(text="b")])]  # fmt: skip
    with pytest.raises(ValidationError, match="taken"):
        await tasks.add_messages(tid, batch)
    assert await layout(store) == before


async def test_a_task_sealed_before_the_filter_existed_is_still_exactly_once(
    store_factory: Any,
) -> None:
    """Pages written by a version without the filter: replays are looked up in the pages
    until the next seal builds the filter from every sealed id."""
    store = await store_factory(page_policy=policy(1))
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    for i in range(8):
        await tasks.add_human_message(tid, f"text {i}", message_id=f"m{i}")
    await store.database["tasks"].update_one(
        {}, {"$unset": {"id_filter": "", "id_filter_words": ""}}
    )
    store.headers.forget(("acme", tid))
    before = await layout(store)
    assert (await tasks.add_human_message(tid, "text 0", message_id="m0")).id == "m0"
    assert await layout(store) == before
    for i in range(8, 12):
        await tasks.add_human_message(tid, f"text {i}", message_id=f"m{i}")
    raw = await store.database["tasks"].find_one({})
    blocks = list(raw["id_filter"])
    assert all(id_filter.may_hold(blocks, f"m{i}") for i in range(raw["sealed"] - 1))
