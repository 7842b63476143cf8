"""Redaction (content gone, shape kept) and the live feed (every message once, in order)."""

from __future__ import annotations

import asyncio

import bson
import pytest

import mindstore
from conftest import StoreFactory
from mindstore.errors import MindstoreError, NotFound, ValidationError
from mindstore.model.messages import AssistantMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolMetadata
from mindstore.model.storage_form import bson_size

CONFIG = TaskConfigPart(model_name="m", tool_metadata=[ToolMetadata(name="search")])
SECRET = "my card is 4111 1111 1111 1111"


@pytest.fixture
def store(store: mindstore.Store) -> mindstore.Store:
    """The suite's store (`MINDSTORE_TEST_URI` or embedded) with a small offload threshold."""
    return StoreFactory(store).sibling(offload_threshold=64)


async def raw(store, task_id):
    return bson.encode(await store.database["tasks"].find_one({"_id": "acme/" + task_id}))


async def conversation(acme):
    task = await acme.tasks.create(config=CONFIG)
    await acme.tasks.add_human_message(task.id, SECRET + " " + "x" * 100, message_id="u1")
    await acme.tasks.add_message(
        task.id,
        AssistantMessage(
            id="a1",
            model_id="m",
            content=[
                TextPart(text="calling search with " + SECRET),
                ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": SECRET}),
            ],
        ),
    )
    await acme.tasks.finish_assistant_message(
        task.id, "a1", tokens_in=120, tokens_out=30, cost=0.01
    )
    await acme.tasks.answer_tool_call(task.id, "c1", {"hits": [SECRET]}, message_id="r1")
    return task.id


async def test_redaction_keeps_the_shape_and_analytics_and_drops_the_content(store):
    acme = store.scoped("acme")
    tid = await conversation(acme)
    tools_before = await acme.analytics.tools()
    usage_before = await acme.analytics.usage()
    assert await store.database["payloads"].count_documents({}) == 1  # the long user text
    for message_id in ("u1", "a1", "r1"):
        redacted = await acme.tasks.redact(tid, message_id, reason="customer request")
        assert redacted.to_dict()["redaction"]["reason"] == "customer request"
    document = await store.database["tasks"].find_one({"_id": "acme/" + tid})
    assert SECRET.encode() not in bson.encode(document)
    assert await store.database["payloads"].count_documents({}) == 0
    messages = {m.id: m for m in await acme.tasks.messages(tid)}
    call = messages["a1"].content[1]
    assert (call.type, call.tool_call_id, call.tool_name) == ("toolCall", "c1", "search")
    assert messages["r1"].content[0].tool_call_id == "c1"
    assert (messages["a1"].tokens_in, messages["a1"].cost) == (120, 0.01)
    assert await acme.analytics.tools() == tools_before
    assert await acme.analytics.usage() == usage_before
    header = await acme.tasks.header(tid)
    assert header.size_bytes == sum(bson_size(d) for d in document["messages"])
    assert header.open_tool_calls == []
    # a replay (or a second operator) writes nothing
    before = await raw(store, tid)
    await acme.tasks.redact(tid, "u1", reason="again")
    assert await raw(store, tid) == before


async def test_one_part_can_be_redacted_and_backups_after_it_hold_no_content(store, tmp_path):
    from mindstore.backup import backup

    acme = store.scoped("acme")
    tid = await conversation(acme)
    await acme.tasks.redact(tid, "a1", part_index=0)
    kept = (await acme.tasks.get_message(tid, "a1")).content
    assert kept[0].text == "" and kept[1].args == {"q": SECRET}  # only the text part went
    await acme.tasks.redact(tid, "a1")
    await acme.tasks.redact(tid, "u1")
    await acme.tasks.redact(tid, "r1")
    await backup(store, tmp_path / "after", tenant="acme")
    for path in (tmp_path / "after").iterdir():
        import gzip

        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert SECRET.encode() not in data


async def test_bad_redactions_write_nothing(store):
    acme = store.scoped("acme")
    tid = await conversation(acme)
    before = await raw(store, tid)
    for call in (
        lambda: acme.tasks.redact(tid, {"$ne": 1}),
        lambda: acme.tasks.redact(tid, "u1", reason=123),
        lambda: acme.tasks.redact(tid, "u1", part_index=7),
        lambda: acme.tasks.redact(tid, "u1", part_index=-1),
        lambda: acme.tasks.redact(tid, "no-such-message"),
        lambda: store.scoped("acme", owner="mallory").tasks.redact(tid, "u1"),
        lambda: store.scoped("beta").tasks.redact(tid, "u1"),
    ):
        with pytest.raises(MindstoreError):
            await call()
    assert await raw(store, tid) == before
    config_message = (await acme.tasks.messages(tid))[0]
    with pytest.raises(ValidationError):  # bookkeeping holds no conversation content
        await acme.tasks.redact(tid, config_message.id)


async def test_concurrent_redactions_of_one_message_apply_once(store):
    acme = store.scoped("acme")
    tid = await conversation(acme)
    version = (await acme.tasks.get(tid)).version
    # eight processes (own locks and header caches): only the stored version guard decides
    views = [mindstore.Store(store.backend, offload_threshold=64).scoped("acme") for _ in range(8)]
    results = await asyncio.gather(*(views[n].tasks.redact(tid, "u1", reason=f"r{n}")
                                     for n in range(8)))  # fmt: skip
    reasons = {r.to_dict()["redaction"]["reason"] for r in results}
    assert len(reasons) == 1  # every caller sees the one redaction that happened
    assert (await acme.tasks.get(tid)).version == version + 1


async def test_a_watcher_sees_every_message_once_in_order_while_a_writer_writes(store):
    acme = store.scoped("acme")
    task = await acme.tasks.create(config=CONFIG)
    total = 40
    seen: list[str] = []

    async def watch() -> None:
        async for event in acme.tasks.watch(task.id):
            if event.kind == "new":
                seen.append(event.message.id)
            if len(seen) == total + 1:  # the config message and the written ones
                return

    async def write() -> None:
        for n in range(total):
            await acme.tasks.add_human_message(task.id, f"m{n}", message_id=f"m{n}")
            if n % 5 == 0:
                await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(watch(), write()), timeout=30)
    assert seen[1:] == [f"m{n}" for n in range(total)]
    assert len(set(seen)) == len(seen)


async def test_a_watcher_that_drops_and_resumes_from_its_last_id_loses_nothing(store):
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    for n in range(5):
        await acme.tasks.add_human_message(task.id, f"m{n}", message_id=f"m{n}")
    first: list[str] = []
    async for event in acme.tasks.watch(task.id):
        first.append(event.message.id)
        if event.message.id == "m2":
            break  # the watcher drops here
    for n in range(5, 8):
        await acme.tasks.add_human_message(task.id, f"m{n}", message_id=f"m{n}")
    resumed: list[str] = []
    async for event in acme.tasks.watch(task.id, since_id=first[-1]):
        if event.kind == "new":
            resumed.append(event.message.id)
        if event.message.id == "m7":
            break
    assert first + resumed == [f"m{n}" for n in range(8)]


async def test_part_updates_arrive_as_updates(store):
    acme = store.scoped("acme")
    task = await acme.tasks.create(config=CONFIG)
    reply = await acme.tasks.add_assistant_message(task.id, message_id="a1")
    events = []

    async def watch() -> None:
        async for event in acme.tasks.watch(
            task.id, since_id=(await acme.tasks.messages(task.id))[0].id
        ):
            events.append((event.kind, event.message.id, len(event.message.content)))
            if event.kind == "updated" and len(event.message.content) == 2:
                return

    watcher = asyncio.ensure_future(watch())
    # the parts must come after the watcher has read the message once: a part verb is one
    # write now, so two of them could land before a watcher that has not read yet runs
    for _ in range(10_000):
        if events:
            break
        await asyncio.sleep(0.001)
    await acme.tasks.add_text_part(task.id, reply.id, "Hel")
    await acme.tasks.add_text_part(task.id, reply.id, "lo")
    await asyncio.wait_for(watcher, timeout=10)
    assert events[0][:2] == ("new", "a1")
    assert events[-1] == ("updated", "a1", 2)


async def test_watching_a_task_outside_the_view_is_not_found(store):
    task = await store.scoped("acme").tasks.create()
    with pytest.raises(NotFound):
        async for _ in store.scoped("beta").tasks.watch(task.id):
            break
