"""Retracting the last message (`tasks.retract_last`, `mindstore.model.retract`).

The header after a retract must be the header of the shorter history: size (the stored
documents' exact BSON size), usage, open tool calls (a retracted result re-opens its call;
a retracted call is dropped), scope, tail. Concurrent retracts each remove exactly one
message, also across stores that share no lock (separate processes).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout import stored_messages
from mindstore.errors import InvalidTransition, NotFound, ValidationError
from mindstore.model.header import TaskHeader, ToolCallRef
from mindstore.model.messages import AssistantMessage, ToolMessage, Usage, UserMessage
from mindstore.model.parts import TaskConfigPart, TextPart, ToolCallPart, ToolResultPart
from mindstore.model.plans import derive_header
from mindstore.model.retract import answered_calls, plan_retract, reopened_calls
from mindstore.model.storage_form import bson_size
from mindstore.repositories.tasks import RetryPolicy
from mindstore.store import Store

PATIENT = RetryPolicy(attempts=400, base_delay=0.0002, max_delay=0.01)


def user(i: int) -> UserMessage:
    return UserMessage(id=f"u{i}", content=[TextPart(text=f"question {i}")], started_ts=1000 + i)


def call(i: int, *ids: str) -> AssistantMessage:
    return AssistantMessage(
        id=f"a{i}", started_ts=1000 + i, status="completed",
        content=[ToolCallPart(tool_call_id=c, tool_name="search", args={"q": c}) for c in ids],
        usage=Usage(input_tokens=10 * i + 1, output_tokens=i + 1),
    )  # fmt: skip


def result(i: int, *ids: str) -> ToolMessage:
    return ToolMessage(id=f"t{i}", started_ts=1000 + i,
                       content=[ToolResultPart(tool_call_id=c, tool_name="search", result=f"r-{c}")
                                for c in ids])  # fmt: skip


async def stored_docs(store: Store, tenant: str, task_id: str) -> list[dict]:
    """Every stored message of the task, sealed pages included."""
    return await stored_messages(store.database, f"{tenant}/{task_id}")


# -- the pure plan ----------------------------------------------------------------------


def test_plan_reopens_the_answered_call_and_drops_the_calls_of_a_retracted_call():
    history = [user(0), call(1, "c1", "c2"), result(2, "c1")]
    header = derive_header("t", history)
    assert [ref.id for ref in header.open_tool_calls] == ["c2"]
    rows = [{"index": 1, "message": history[1]}, {"index": 2, "message": history[2]}]
    reopen = reopened_calls(answered_calls(history[2]), rows, 2)
    plan = plan_retract(header, history[2], 100, history[1], reopen)
    assert [ref.id for ref in plan.header.open_tool_calls] == ["c1", "c2"]
    assert plan.header.seq == 2 and plan.header.tail.id == "a1" and plan.reopened == ["c1"]
    assert plan.header.size_bytes == header.size_bytes - 100

    shorter = derive_header("t", history[:2])
    plan = plan_retract(shorter, history[1], 50, history[0])
    assert plan.header.open_tool_calls == []
    assert plan.header.usage == derive_header("t", history[:1]).usage


def test_a_call_answered_by_another_result_stays_closed():
    history = [call(0, "c1"), result(1, "c1"), result(2, "c1")]
    rows = [{"index": i, "message": m} for i, m in enumerate(history)]
    assert reopened_calls(["c1"], rows, 2) == []
    assert [r.id for r in reopened_calls(["c1"], [*rows[:2], rows[2]], 1)] == []


def test_exits_configs_and_an_empty_task_are_refused():
    from mindstore.model.messages import TaskConfigMessage, TaskExitMessage

    config = TaskConfigMessage(id="cfg", content=[TaskConfigPart(model_name="m")])
    header = derive_header("t", [config])
    with pytest.raises(InvalidTransition, match="task config"):
        plan_retract(header, config, 10, None)
    exit_message = TaskExitMessage(id="x", content=[])
    with pytest.raises(InvalidTransition, match="task exit"):
        plan_retract(derive_header("t", [config, exit_message]), exit_message, 10, config)
    with pytest.raises(InvalidTransition, match="no message"):
        plan_retract(TaskHeader(), user(0), 10, None)
    with pytest.raises(InvalidTransition, match="not the last"):
        plan_retract(derive_header("t", [user(0), user(1)]), user(0), 10, None)


def test_reopened_refs_keep_where_the_call_lives():
    history = [user(0), call(1, "x", "y"), result(2, "y")]
    rows = [{"index": 1, "message": history[1]}, {"index": 2, "message": history[2]}]
    assert reopened_calls(["y"], rows, 2) == [
        ToolCallRef(id="y", name="search", index=1, part=1, message_id="a1")
    ]


# -- the store ----------------------------------------------------------------------------


async def test_retract_undoes_each_kind_of_append_and_keeps_the_size_exact(store, acme):
    tid = (await acme.tasks.create()).id
    history = [user(0), call(1, "c1", "c2"), result(2, "c1"), result(3, "c2"), user(4)]
    for message in history:
        await acme.tasks.add_messages(tid, [message.model_copy(deep=True)])
    for expected in reversed(history):
        header = await acme.tasks.header(tid)
        docs = await stored_docs(store, "acme", tid)
        assert header.size_bytes == sum(bson_size(doc) for doc in docs)
        removed = await acme.tasks.retract_last(tid)
        assert removed.id == expected.id and type(removed) is type(expected)
        after = await acme.tasks.header(tid)
        remaining = history[: history.index(expected)]
        reference = derive_header(tid, remaining)
        assert after.seq == len(remaining)
        assert after.size_bytes == sum(bson_size(doc) for doc in docs[:-1])
        assert after.usage == reference.usage
        assert sorted(r.id for r in after.open_tool_calls) == sorted(
            r.id for r in reference.open_tool_calls
        )
        assert (after.tail.id if after.tail else None) == (remaining[-1].id if remaining else None)
    assert await acme.tasks.retract_last(tid) is None
    record = await acme.tasks.get(tid)
    assert record.seq == 0 and record.size_bytes == 0 and record.usage.tokens_in == 0


async def test_a_reopened_call_can_be_answered_again(acme):
    tid = (await acme.tasks.create()).id
    await acme.tasks.add_messages(tid, [call(0, "c1")])
    await acme.tasks.answer_tool_call(tid, "c1", "first", message_id="r1")
    await acme.tasks.retract_last(tid)
    assert [r.id for r in (await acme.tasks.header(tid)).open_tool_calls] == ["c1"]
    answer = await acme.tasks.answer_tool_call(tid, "c1", "second", message_id="r2")
    assert answer.content[0].result == "second"
    assert (await acme.tasks.header(tid)).open_tool_calls == []


async def test_appends_after_a_retract_continue_at_the_freed_index(acme):
    tid = (await acme.tasks.create()).id
    for i in range(3):
        await acme.tasks.add_messages(tid, [user(i)])
    await acme.tasks.retract_last(tid)
    await acme.tasks.add_messages(tid, [user(7)])
    assert [m.id for m in await acme.tasks.messages(tid)] == ["u0", "u1", "u7"]
    assert (await acme.tasks.get(tid)).seq == 3


async def test_expected_id_makes_a_retract_idempotent(store, acme):
    tid = (await acme.tasks.create()).id
    for i in range(3):
        await acme.tasks.add_messages(tid, [user(i)])
    before = await stored_docs(store, "acme", tid)
    with pytest.raises(InvalidTransition, match="'u1' is not the last"):
        await acme.tasks.retract_last(tid, expected_id="u1")
    assert await stored_docs(store, "acme", tid) == before
    assert (await acme.tasks.retract_last(tid, expected_id="u2")).id == "u2"
    assert await acme.tasks.retract_last(tid, expected_id="u2") is None  # the replay
    assert [m.id for m in await acme.tasks.messages(tid)] == ["u0", "u1"]


@pytest.mark.parametrize("bad", [{"$ne": 1}, "", 5, "$x"])
async def test_bad_arguments_are_refused_before_any_write(store, acme, bad):
    tid = (await acme.tasks.create()).id
    await acme.tasks.add_messages(tid, [user(0)])
    before = await stored_docs(store, "acme", tid)
    with pytest.raises(ValidationError, match="expected_id"):
        await acme.tasks.retract_last(tid, expected_id=bad)
    with pytest.raises(ValidationError, match="task id"):
        await acme.tasks.retract_last(bad)
    assert await stored_docs(store, "acme", tid) == before


async def test_other_tenants_and_owners_see_not_found(store):
    mine = store.scoped("acme", owner="ann")
    tid = (await mine.tasks.create()).id
    await mine.tasks.add_messages(tid, [user(0)])
    with pytest.raises(NotFound):
        await store.scoped("globex").tasks.retract_last(tid)
    with pytest.raises(NotFound):
        await store.scoped("acme", owner="bob").tasks.retract_last(tid)
    assert len(await mine.tasks.messages(tid)) == 1


async def test_an_exit_is_refused_and_nothing_changes(store, acme):
    from mindstore.model.parts import ToolMetadata

    config = TaskConfigPart(
        model_name="m", tool_metadata=[ToolMetadata(name="delegate", is_task_entry=True)]
    )
    tid = (await acme.tasks.create(config=config)).id
    await acme.tasks.add_task_entry(tid, [TextPart(text="sub")], config, entry_id="e1")
    await acme.tasks.add_task_exit(tid, [TextPart(text="done")], exit_id="x1")
    before = await stored_docs(store, "acme", tid)
    record = await acme.tasks.get(tid)
    with pytest.raises(InvalidTransition, match="task exit"):
        await acme.tasks.retract_last(tid)
    assert await stored_docs(store, "acme", tid) == before
    assert (await acme.tasks.get(tid)).version == record.version


async def test_retracting_a_lone_entry_closes_its_sub_task(acme):
    from mindstore.model.messages import TaskEntryMessage
    from mindstore.model.parts import TaskEntryPart

    tid = (await acme.tasks.create()).id
    entry = TaskEntryMessage(
        id="e1", content=[TaskEntryPart(initial_task_config=TaskConfigPart(model_name="m"))]
    )
    await acme.tasks.add_messages(tid, [user(0), entry])
    assert await acme.tasks.current_task_level(tid) == 1
    await acme.tasks.retract_last(tid)
    assert await acme.tasks.current_task_level(tid) == 0


async def test_an_offloaded_value_goes_with_its_message(store):
    small = Store(store.backend, offload_threshold=64).scoped("acme")
    tid = (await small.tasks.create()).id
    big = ToolMessage(
        id="t0", content=[ToolResultPart(tool_call_id="c", tool_name="s", result="x" * 500)]
    )
    await small.tasks.add_messages(tid, [call(0, "c"), big])
    assert await store.database["payloads"].count_documents({"tenant": "acme", "task_id": tid}) == 1
    removed = await small.tasks.retract_last(tid)
    assert removed.content[0].result == "x" * 500  # given back resolved
    assert await store.database["payloads"].count_documents({"tenant": "acme", "task_id": tid}) == 0


async def test_concurrent_retracts_remove_exactly_one_message_each(store):
    stores = [Store(store.backend, retry=PATIENT).scoped("acme") for _ in range(4)]
    tid = (await stores[0].tasks.create()).id
    history = [user(0), call(1, "c1"), result(2, "c1")] + [user(i) for i in range(3, 40)]
    await stores[0].tasks.add_messages(tid, history)
    record = await stores[0].tasks.get(tid)
    pages = (await stores[0].tasks.header(tid)).pages

    removed = await asyncio.gather(*(stores[n % 4].tasks.retract_last(tid) for n in range(30)))
    ids = [m.id for m in removed]
    assert len(set(ids)) == 30 and set(ids) == {m.id for m in history[-30:]}
    after = await stores[0].tasks.get(tid)
    # one write per retract, plus one per sealed page brought back into the emptied open
    # page (none when the history is not paged)
    unsealed = pages - (await stores[0].tasks.header(tid)).pages
    assert after.seq == 10 and after.version == record.version + 30 + unsealed
    docs = await stored_docs(store, "acme", tid)
    assert [d["id"] for d in docs] == [m.id for m in history[:10]]
    assert after.size_bytes == sum(bson_size(doc) for doc in docs)


async def test_more_concurrent_retracts_than_messages_empty_the_task_once(store):
    stores = [Store(store.backend, retry=PATIENT).scoped("acme") for _ in range(3)]
    tid = (await stores[0].tasks.create()).id
    await stores[0].tasks.add_messages(tid, [user(i) for i in range(5)])
    removed = await asyncio.gather(*(stores[n % 3].tasks.retract_last(tid) for n in range(9)))
    assert sorted(m.id for m in removed if m is not None) == [f"u{i}" for i in range(5)]
    assert removed.count(None) == 4
    assert (await stores[0].tasks.get(tid)).seq == 0


STEPS = st.lists(st.sampled_from(["user", "call1", "call2", "answer"]), min_size=1, max_size=10)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, data=st.data())
async def test_retract_matches_the_shorter_history(store, steps, data):
    acme = store.scoped("prop")
    tid = (await acme.tasks.create()).id
    history, open_calls = [], []
    for i, step in enumerate(steps):
        if step == "answer" and open_calls:
            message = result(i, open_calls.pop(0))
        elif step.startswith("call"):
            ids = [f"c{i}-{k}" for k in range(int(step[-1]))]
            open_calls.extend(ids)
            message = call(i, *ids)
        else:
            message = user(i)
        history.append(message)
        await acme.tasks.add_messages(tid, [message.model_copy(deep=True)])
    count = data.draw(st.integers(min_value=1, max_value=len(history)))
    for _ in range(count):
        await acme.tasks.retract_last(tid)
    kept = history[: len(history) - count]
    after = await acme.tasks.header(tid)
    reference = derive_header(tid, kept)
    docs = await stored_docs(store, "prop", tid)
    assert [d["id"] for d in docs] == [m.id for m in kept]
    assert after.seq == reference.seq
    assert after.size_bytes == sum(bson_size(doc) for doc in docs)
    assert after.usage == reference.usage
    assert [(r.id, r.index, r.part) for r in after.open_tool_calls] == [
        (r.id, r.index, r.part) for r in reference.open_tool_calls
    ]
    await acme.tasks.delete(tid)
