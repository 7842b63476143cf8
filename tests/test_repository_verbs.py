"""Every seed-000 verb through the task repository, and its error paths."""

from __future__ import annotations

import pytest

from layout import flat_task
from mindstore import Conflict, InvalidTransition, NotFound, TaskState, ValidationError
from mindstore.ids import task_key
from mindstore.model.messages import AssistantMessage, UserMessage, message_to_dict
from mindstore.model.parts import (
    ImagePart,
    InformationalPart,
    TaskConfigPart,
    TextPart,
    ToolCallPart,
    ToolMetadata,
)
from mindstore.model.plans import derive_header, stored_doc
from mindstore.model.storage_form import bson_size

ROOT = TaskConfigPart(
    model_name="openai/gpt-4o",
    tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True, parameters={"$schema": "x"})],
)
SUB = TaskConfigPart(
    model_name="anthropic/claude-sonnet",
    tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)],
)


async def stored_document(store, task_id):
    """The task as an unpaged task stores it: every message, sealed pages included."""
    return await flat_task(store.database, task_key("acme", task_id))


async def assert_header_matches_messages(acme, task_id):
    task = await acme.tasks.load(task_id)
    derived = derive_header(task_id, [m.model_copy(deep=True) for m in task.messages])
    stored = await acme.tasks.header(task_id)
    assert stored.seq == derived.seq == len(task.messages)
    assert stored.scope_stack == derived.scope_stack
    assert sorted(r.id for r in stored.open_tool_calls) == sorted(
        r.id for r in derived.open_tool_calls
    )
    assert stored.usage == derived.usage
    assert stored.size_bytes == sum(bson_size(stored_doc(m, task_id)) for m in task.messages)


async def test_create_get_and_conversation_with_nested_sub_task(acme, store):
    record = await acme.tasks.create(
        owner="alice", title="Plan a trip", content="trip", config=ROOT
    )
    tid = record.id
    assert record.seq == 1 and record.owner == "alice" and record.state == "running"
    user = await acme.tasks.add_human_message(tid, "Plan my trip", message_id="u1")
    assert isinstance(user, UserMessage)
    reply = await acme.tasks.add_assistant_message(tid, message_id="a1")
    assert reply.model_id == "openai/gpt-4o"
    await acme.tasks.add_text_part(tid, "a1", "Delegating.")
    await acme.tasks.add_tool_call_part(
        tid, "a1", ToolCallPart(tool_call_id="call-1", tool_name="delegate", args={"$ref": "#/x"})
    )
    entry = await acme.tasks.add_task_entry(
        tid,
        [
            TextPart(text="find flights"),
            InformationalPart(details="budget 500", is_visible_ai=True),
        ],
        SUB,
        entry_id="e1",
    )
    assert await acme.tasks.current_task_level(tid) == 1
    assert await acme.tasks.find_current_task_boundaries(tid) == (3, None)
    assert entry.id == "e1"
    assert (await acme.tasks.current_task_config(tid)).model_name == SUB.model_name
    inner = await acme.tasks.add_assistant_message(tid, message_id="a2")
    assert inner.model_id == SUB.model_name
    _exit_message, answer = await acme.tasks.add_task_exit(tid, [TextPart(text="Flight LH123")])
    assert answer is not None
    result = answer.content[0]
    assert result.tool_call_id == "call-1"
    assert result.result == {
        "task_result": "Flight LH123",
        "status": "completed",
        "message": "Flight LH123",
    }
    messages = await acme.tasks.messages(tid)
    call = messages[2].content[1]
    assert (call.is_loading, call.is_approval_pending) == (False, False)
    assert call.args == {"$ref": "#/x"}
    assert [m.role for m in messages] == [
        "taskconfig", "user", "assistant", "taskentry", "taskconfig", "user",
        "informational", "assistant", "taskexit", "tool",
    ]  # fmt: skip
    assert await acme.tasks.current_task_level(tid) == 0
    root_ids = [m.id for m in await acme.tasks.current_task_messages(tid)]
    assert root_ids == [messages[i].id for i in (0, 1, 2, 9)]
    assert await acme.tasks.task_boundaries(tid, "e1") == (3, 8)
    spans = await acme.tasks.sub_task_spans(tid)
    assert [(s.entry_id, s.entry_index, s.exit_index, s.depth, s.message_count) for s in spans] == [
        ("e1", 3, 8, 1, 6)
    ]
    document = await stored_document(store, tid)
    assert document["tenant"] == "acme"
    assert document["messages"][2]["content"][1]["args"] != {"$ref": "#/x"}  # escaped on disk
    await assert_header_matches_messages(acme, tid)


async def test_sibling_sub_task_after_exit_is_the_current_level(acme):
    """DESIGN.md seed bug #1, through the store's pipelines."""
    tid = (await acme.tasks.create(config=ROOT)).id
    await acme.tasks.add_task_entry(tid, [TextPart(text="A")], SUB, entry_id="A")
    await acme.tasks.add_human_message(tid, "inside A", message_id="inA")
    await acme.tasks.add_task_exit(tid, [TextPart(text="A done")])
    entry_b = await acme.tasks.add_task_entry(tid, [TextPart(text="B")], SUB, entry_id="B")
    await acme.tasks.add_human_message(tid, "inside B", message_id="inB")
    current = await acme.tasks.current_task_messages(tid)
    ids = [m.id for m in current]
    assert ids[0] == "B" and "inB" in ids and "inA" not in ids and "A" not in ids
    messages = await acme.tasks.messages(tid)
    b_index = next(i for i, m in enumerate(messages) if m.id == entry_b.id)
    assert await acme.tasks.find_current_task_boundaries(tid) == (b_index, None)


async def test_updates_tail_and_get_message(acme):
    tid = (await acme.tasks.create(config=ROOT)).id
    for i in range(6):
        await acme.tasks.add_human_message(tid, f"m{i}", message_id=f"m{i}")
    assert [m.id for m in await acme.tasks.get_updates(tid, "m3")] == ["m4", "m5"]
    assert await acme.tasks.get_updates(tid, "m5") == []
    assert len(await acme.tasks.get_updates(tid, "unknown")) == 7
    assert len(await acme.tasks.get_updates(tid, None)) == 7
    assert [m.id for m in await acme.tasks.tail(tid, 2)] == ["m4", "m5"]
    assert [m.id for m in await acme.tasks.messages(tid, start=2, limit=2)] == ["m1", "m2"]
    assert (await acme.tasks.get_message(tid, "m2")).text() == "m2"
    assert await acme.tasks.get_message(tid, "nope") is None


async def test_finished_ts_of_previous_message_is_set_in_the_same_write(acme):
    tid = (await acme.tasks.create(config=ROOT)).id
    await acme.tasks.add_human_message(tid, "q", message_id="q", timestamp=1_000)
    await acme.tasks.add_assistant_message(tid, message_id="a", timestamp=1_005)
    messages = await acme.tasks.messages(tid)
    assert messages[1].finished_ts == 1_005
    assert messages[2].finished_ts is None


async def test_usage_rolls_up_into_the_task(acme):
    tid = (await acme.tasks.create(config=ROOT)).id
    await acme.tasks.add_assistant_message(tid, message_id="a1")
    await acme.tasks.finish_assistant_message(tid, "a1", tokens_in=100, tokens_out=20, cost=0.5)
    await acme.tasks.add_message(
        tid, AssistantMessage(id="a2", tokens_in=7, tokens_out=3, cache_reads=2, cost=0.25)
    )
    usage = (await acme.tasks.get(tid)).usage
    assert (usage.tokens_in, usage.tokens_out, usage.cache_reads, usage.cost) == (107, 23, 2, 0.75)
    # Finishing again with new totals replaces, not adds, this message's share.
    await acme.tasks.finish_assistant_message(tid, "a1", tokens_in=50)
    assert (await acme.tasks.get(tid)).usage.tokens_in == 57
    await assert_header_matches_messages(acme, tid)


async def test_state_transitions(acme):
    tid = (await acme.tasks.create()).id
    assert (await acme.tasks.set_state(tid, TaskState.paused)).state == "paused"
    assert (await acme.tasks.set_state(tid, "running")).state == "running"
    await acme.tasks.set_state(tid, TaskState.aborted)
    before = await acme.tasks.get(tid)
    with pytest.raises(InvalidTransition):
        await acme.tasks.set_state(tid, TaskState.running)
    with pytest.raises(ValidationError):
        await acme.tasks.set_state(tid, "sleeping")
    assert (await acme.tasks.get(tid)).version == before.version


async def test_list_pages_by_owner_and_state(acme):
    ids = []
    for i in range(7):
        ids.append((await acme.tasks.create(owner="alice" if i % 2 == 0 else "bob")).id)
    await acme.tasks.set_state(ids[0], "completed")
    seen, cursor = [], None
    while True:
        page = await acme.tasks.list(owner="alice", limit=2, cursor=cursor)
        seen.extend(item.id for item in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted(ids[0::2]) and len(seen) == len(set(seen))
    completed = await acme.tasks.list(state="completed")
    assert [item.id for item in completed.items] == [ids[0]]
    with pytest.raises(ValidationError):
        await acme.tasks.list(cursor="garbage!")
    with pytest.raises(ValidationError):
        await acme.tasks.list(limit=0)


async def test_delete(acme):
    tid = (await acme.tasks.create()).id
    assert await acme.tasks.delete(tid)
    with pytest.raises(NotFound):
        await acme.tasks.get(tid)
    with pytest.raises(NotFound):
        await acme.tasks.delete(tid)


async def test_create_with_existing_id_conflicts(acme):
    await acme.tasks.create(task_id="fixed-id")
    with pytest.raises(Conflict):
        await acme.tasks.create(task_id="fixed-id")


async def test_images_and_human_message_without_content(acme):
    tid = (await acme.tasks.create(config=ROOT)).id
    assert await acme.tasks.add_human_message(tid) is None
    assert (await acme.tasks.get(tid)).seq == 1
    message = await acme.tasks.add_human_message(
        tid, ["a", "b"], images=[ImagePart(image="aGVsbG8=", mime_type="image/png")]
    )
    stored = (await acme.tasks.messages(tid))[-1]
    assert message_to_dict(stored) == message_to_dict(message)


async def test_task_metadata_with_dollar_keys_round_trips(acme):
    metadata = {"schema": {"$ref": "#/defs/a", "$id": "x"}, "a.b": 1}
    tid = (await acme.tasks.create(metadata=metadata)).id
    assert (await acme.tasks.get(tid)).metadata == metadata
