"""Exactly-once appends, O(1) write size, bad input, tenancy and the size limit."""

from __future__ import annotations

import pytest

from mindstore import InvalidTransition, NotFound, TaskTooLarge, ValidationError
from mindstore.ids import task_key
from mindstore.model.messages import AssistantMessage, UserMessage, message_to_dict
from mindstore.model.parts import (
    ImagePart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.plans import stored_doc
from mindstore.model.storage_form import bson_size
from mindstore.model.task import Task
from mindstore.payloads import MARKER_PREFIX
from mindstore.repositories.tasks import TaskRepository

CONFIG = TaskConfigPart(
    model_name="m", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
)


async def raw(store, task_id):
    return await store.database["tasks"].find_one({"_id": task_key("acme", task_id)})


async def test_every_append_replayed_with_the_same_ids_changes_nothing(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id

    async def run_all():
        await acme.tasks.add_human_message(tid, "hi", message_id="u1")
        await acme.tasks.add_system_message(tid, "sys", message_id="s1")
        await acme.tasks.add_assistant_message(tid, message_id="a1")
        await acme.tasks.add_message(
            tid,
            AssistantMessage(
                id="a2", content=[ToolCallPart(tool_call_id="c1", tool_name="delegate")]
            ),
        )
        await acme.tasks.answer_tool_call(tid, "c1", {"r": 1}, message_id="t1")
        await acme.tasks.add_informational_message(tid, "status", "ok", message_id="i1")
        await acme.tasks.add_tool_result_message(tid, "c9", "x", {}, message_id="t2")
        await acme.tasks.add_compression_message(tid, 0, 1, "r", [], [], [], message_id="k1")
        await acme.tasks.add_message(
            tid,
            AssistantMessage(
                id="a3", content=[ToolCallPart(tool_call_id="c2", tool_name="delegate")]
            ),
        )
        await acme.tasks.add_task_entry(tid, [TextPart(text="sub")], CONFIG, entry_id="e1")
        await acme.tasks.add_task_exit(tid, [TextPart(text="done")], exit_id="x1")

    await run_all()
    before = await raw(store, tid)
    await run_all()  # a client retrying every request after a lost reply
    assert await raw(store, tid) == before


async def test_replayed_answer_returns_the_stored_result(acme):
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_message(
        tid,
        AssistantMessage(id="a", content=[ToolCallPart(tool_call_id="c", tool_name="delegate")]),
    )
    first = await acme.tasks.answer_tool_call(tid, "c", {"v": 1}, message_id="r")
    again = await acme.tasks.answer_tool_call(tid, "c", {"v": 1}, message_id="r")
    assert message_to_dict(again) == message_to_dict(first)
    with pytest.raises(NotFound):  # a *new* answer to an answered call is refused
        await acme.tasks.answer_tool_call(tid, "c", {"v": 2}, message_id="other")


@pytest.mark.parametrize("history", [10, 10_000])
async def test_append_sends_at_most_the_message_plus_512_bytes(acme, store, history):
    task = Task()
    task.add_task_config(CONFIG)
    for i in range(history - 1):
        task.add_human_message(f"message {i} " + "x" * 40)
    tid = (await acme.tasks.import_task(task)).id
    store.headers.forget(("acme", tid))  # measure the cold append: header read + update
    message = UserMessage(id="probe", content=[TextPart(text="what's next?")])
    with store.backend.recorder.capture() as log:
        await acme.tasks.add_message(tid, message)
    updates = log.by_name("update")
    assert len(updates) == 1
    stored = (await acme.tasks.tail(tid, 1))[0]
    message_bytes = bson_size(stored_doc(stored))
    assert updates[0].bytes_sent <= message_bytes + 512, (updates[0].bytes_sent, message_bytes)
    # the header read leaves the message array on the server
    reads = log.by_name("find")
    assert len(reads) == 1 and reads[0].bytes_received < 4096


async def test_bad_input_gives_typed_errors_and_changes_nothing(acme, store):
    tid = (await acme.tasks.create(config=CONFIG)).id
    await acme.tasks.add_assistant_message(tid, message_id="a1")
    before = await raw(store, tid)
    cases = [
        (ValidationError, acme.tasks.add_message(tid, {"role": "user", "content": "not a list"})),
        (ValidationError, acme.tasks.add_message(tid, {"role": "assistant", "started_ts": "soon"})),
        (ValidationError, acme.tasks.add_human_message({"$ne": None}, "x")),
        (ValidationError, acme.tasks.add_human_message("a.b$c d", "x")),
        (ValidationError, acme.tasks.get({"$gt": ""})),
        (ValidationError, acme.tasks.add_text_part(tid, {"$ne": 1}, "x")),
        (ValidationError, acme.tasks.add_text_part(tid, "a1", "")),
        (ValidationError, acme.tasks.add_human_message(tid, "x", message_id="dup-in-plan\x00")),
        (NotFound, acme.tasks.add_human_message("no-such-task", "x")),
        (NotFound, acme.tasks.answer_tool_call(tid, "unknown-call", {})),
        (NotFound, acme.tasks.add_text_part(tid, "no-such-message", "x")),
        (InvalidTransition, acme.tasks.add_task_exit(tid, [TextPart(text="x")])),
        (
            InvalidTransition,
            acme.tasks.add_reasoning_part(tid, (await acme.tasks.messages(tid))[0].id, "r"),
        ),
        (
            ValidationError,
            acme.tasks.add_message(
                tid,
                {
                    "role": "user",
                    "id": "big",
                    "content": [{"type": "text", "text": "x"}],
                    "metadata": {"n": 2**70},
                },
            ),
        ),
    ]
    for expected, call in cases:
        with pytest.raises(expected):
            await call
    assert await raw(store, tid) == before


async def test_already_stored_id_is_not_stored_twice(acme, store):
    tid = (await acme.tasks.create()).id
    await acme.tasks.add_message(tid, UserMessage(id="same", content=[TextPart(text="one")]))
    returned = await acme.tasks.add_message(
        tid, UserMessage(id="same", content=[TextPart(text="two")])
    )
    assert returned.text() == "one"  # the stored message, not a second copy
    assert [m.id for m in await acme.tasks.messages(tid)] == ["same"]


async def test_other_tenant_sees_not_found_and_cannot_write(store):
    acme, globex = store.scoped("acme"), store.scoped("globex")
    tid = (await acme.tasks.create(title="secret")).id
    await acme.tasks.add_human_message(tid, "private", message_id="p")
    before = await raw(store, tid)
    for call in (
        globex.tasks.get(tid),
        globex.tasks.messages(tid),
        globex.tasks.add_human_message(tid, "intrude"),
        globex.tasks.delete(tid),
        globex.tasks.set_state(tid, "completed"),
        globex.tasks.get_updates(tid, "p"),
        globex.tasks.current_task_messages(tid),
    ):
        with pytest.raises(NotFound):
            await call
    assert (await globex.tasks.list()).items == []
    assert await raw(store, tid) == before
    # an owner-scoped view sees only its owner's tasks
    bob = store.scoped("acme", owner="bob")
    with pytest.raises(NotFound):
        await bob.tasks.get(tid)


async def test_large_payloads_are_offloaded_and_read_back(store):
    acme = store.scoped("acme")
    acme.tasks.offload_threshold = 1024
    tid = (await acme.tasks.create()).id
    image = "QUJD" * 2000  # 8 KB of base64
    await acme.tasks.add_human_message(
        tid, "look", images=[ImagePart(image=image)], message_id="img"
    )
    document = await raw(store, tid)
    assert document["messages"][0]["content"][1]["image"].startswith(MARKER_PREFIX)
    assert document["size_bytes"] < 1024
    assert (await acme.tasks.messages(tid))[0].content[1].image == image
    assert await store.database["payloads"].count_documents({"tenant": "acme"}) == 1
    await acme.tasks.delete(tid)
    assert await store.database["payloads"].count_documents({"tenant": "acme"}) == 0


async def test_append_past_the_document_limit_raises_and_stores_nothing(store):
    acme = store.scoped("acme")
    repo = TaskRepository(
        store.database, "acme", max_document_bytes=200_000, offload_threshold=10**9
    )
    tid = (await repo.create()).id
    await repo.add_human_message(tid, "small", message_id="s")
    before = await raw(store, tid)
    with pytest.raises(TaskTooLarge) as error:
        await repo.add_human_message(tid, "y" * 300_000)
    assert tid in str(error.value) and error.value.limit_bytes == 200_000
    assert await raw(store, tid) == before
    assert [m.id for m in await acme.tasks.messages(tid)] == ["s"]
