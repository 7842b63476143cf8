"""The agent-graph state (`formats.agent_state.AgentState`) stored with a step's messages:
one guarded update (both or neither), replays write nothing, a run resumes after a crash."""

from __future__ import annotations

import os

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interleaving import hooked
from mindstore.backup import backup, erase, restore, verify
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.errors import NotFound, ValidationError
from mindstore.formats.agent_state import AgentState, ExecutionStatus
from mindstore.ids import task_key
from mindstore.model.agents import AgentState as AgentMap
from mindstore.model.messages import AssistantMessage, UserMessage
from mindstore.model.paging import PagePolicy
from mindstore.model.parts import TextPart


class Crash(Exception):
    """A process dying just before its write reaches the database."""


async def _crash() -> None:
    raise Crash


def user(i: int) -> UserMessage:
    return UserMessage(id=f"u{i}", content=[TextPart(text=f"question {i}")])


def reply(i: int) -> AssistantMessage:
    return AssistantMessage(id=f"a{i}", content=[TextPart(text=f"answer {i}")])


def stepped(step: int, node: str = "think") -> AgentState:
    state = AgentState(context_summary=f"after step {step}")
    for _ in range(step):
        state.advance_step()
    state.set_current_node(node)
    return state


async def raw(acme, task_id: str) -> bytes:
    document = await acme.tasks.port.scope.tasks.find_one({"_id": task_key("acme", task_id)})
    return bson.encode(document)


async def test_state_and_messages_are_written_together(acme):
    task = await acme.tasks.create()
    assert await acme.tasks.agent_state(task.id) is None
    before = await raw(acme, task.id)
    assert b"agent_state" not in before  # absent when unset
    state = stepped(1)
    state.set_interrupt("approve", "needs a person", "interrupted_before", {"a.b": {"$x": 1}})
    await acme.tasks.save_agent_state(task.id, state, messages=[user(1), reply(1)])
    loaded = await acme.tasks.agent_state(task.id)
    assert loaded == state
    assert loaded.execution_meta.status == ExecutionStatus.interrupted_before
    assert loaded.execution_meta.interrupt_data == {"a.b": {"$x": 1}}  # keys escaped and back
    assert [m.id for m in await acme.tasks.messages(task.id)] == ["u1", "a1"]
    header = await acme.tasks.header(task.id)
    assert header.seq == 2


async def test_a_crash_before_the_write_leaves_neither(acme):
    task = await acme.tasks.create()
    await acme.tasks.save_agent_state(task.id, stepped(1), messages=[user(1)])
    before = await raw(acme, task.id)
    with hooked(acme.tasks.port.scope, "tasks", {"update_one"}, _crash), pytest.raises(Crash):
        await acme.tasks.save_agent_state(task.id, stepped(2), messages=[reply(2)])
    assert await raw(acme, task.id) == before
    assert await acme.tasks.agent_state(task.id) == stepped(1)
    assert [m.id for m in await acme.tasks.messages(task.id)] == ["u1"]


async def test_a_run_resumes_after_a_crash_where_it_stopped(acme, stores):
    task = await acme.tasks.create()
    await acme.tasks.save_agent_state(task.id, stepped(1), messages=[user(1)])
    with hooked(acme.tasks.port.scope, "tasks", {"update_one"}, _crash), pytest.raises(Crash):
        await acme.tasks.save_agent_state(task.id, stepped(2), messages=[reply(2)])
    # a new process (its own header cache and locks) reads where the run stopped
    other = stores.sibling().scoped("acme")
    resumed = await other.tasks.agent_state(task.id)
    assert resumed is not None and resumed.execution_meta.step == 1
    resumed.advance_step()
    await other.tasks.save_agent_state(task.id, resumed, messages=[reply(2)])
    assert (await acme.tasks.agent_state(task.id)).execution_meta.step == 2
    assert [m.id for m in await acme.tasks.messages(task.id)] == ["u1", "a2"]


async def test_a_replay_writes_nothing(acme, stores):
    task = await acme.tasks.create()
    await acme.tasks.save_agent_state(task.id, stepped(1), messages=[user(1), reply(1)])
    stored = await raw(acme, task.id)
    # the same step again (a retried call, another process): same ids, even another state
    for tasks in (acme.tasks, stores.sibling().scoped("acme").tasks):
        await tasks.save_agent_state(task.id, stepped(9), messages=[user(1), reply(1)])
        assert await raw(acme, task.id) == stored
    assert (await acme.tasks.agent_state(task.id)).execution_meta.step == 1


async def test_state_alone_without_messages(acme):
    task = await acme.tasks.create(messages=[user(0)])
    await acme.tasks.save_agent_state(task.id, stepped(3, "end"))
    loaded = await acme.tasks.agent_state(task.id)
    assert loaded.execution_meta.current_node == "end"
    assert (await acme.tasks.header(task.id)).seq == 1


@pytest.mark.parametrize(
    "hostile",
    [None, {"context_summary": "x"}, "state", 7, AgentState.model_construct(context_summary=5)],
    ids=["none", "dict", "str", "int", "invalid-model"],
)
@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, serialising the invalid model
async def test_hostile_state_is_refused_naming_state(acme, hostile):
    task = await acme.tasks.create()
    await acme.tasks.save_agent_state(task.id, stepped(1), messages=[user(1)])
    before = await raw(acme, task.id)
    with pytest.raises(ValidationError, match="state"):
        await acme.tasks.save_agent_state(task.id, hostile, messages=[reply(2)])
    assert await raw(acme, task.id) == before


async def test_the_agent_map_is_not_an_agent_state(acme):
    task = await acme.tasks.create()
    before = await raw(acme, task.id)
    agent_map = AgentMap.model_construct()
    with pytest.raises(ValidationError, match=r"state must be a mindstore\.formats\.agent_state"):
        await acme.tasks.save_agent_state(task.id, agent_map)
    assert await raw(acme, task.id) == before


async def test_an_oversized_or_unstorable_state_is_refused(acme):
    task = await acme.tasks.create()
    before = await raw(acme, task.id)
    big = AgentState(context_summary="x" * (1 << 20))
    with pytest.raises(ValidationError, match=r"state is \d+ bytes"):
        await acme.tasks.save_agent_state(task.id, big, messages=[user(1)])
    odd = stepped(1)
    odd.execution_meta.internal_data["obj"] = object()
    with pytest.raises(ValidationError, match="state cannot be stored"):
        await acme.tasks.save_agent_state(task.id, odd, messages=[user(1)])
    assert await raw(acme, task.id) == before


async def test_many_steps_on_a_paged_task_keep_the_state_in_the_task_document(stores):
    acme = (await stores.fresh(page_policy=PagePolicy(page_messages=3))).scoped("acme")
    task = await acme.tasks.create()
    for step in range(1, 13):
        await acme.tasks.save_agent_state(
            task.id, stepped(step), messages=[user(step), reply(step)]
        )
        assert (await acme.tasks.agent_state(task.id)).execution_meta.step == step
    messages = await acme.tasks.messages(task.id)
    assert [m.id for m in messages][-2:] == ["u12", "a12"] and len(messages) == 24
    pages = await acme.tasks.port.scope.pages.find({}).to_list()
    assert all(b"agent_state" not in bson.encode(page) for page in pages)
    assert len(pages) >= 3 and (await acme.tasks.header(task.id)).sealed >= 9
    # a task with sealed pages still holds it beside the header
    assert b"agent_state" in await raw(acme, task.id)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    summary=st.one_of(st.none(), st.text(max_size=50)),
    step=st.integers(0, 10_000),
    data=st.dictionaries(
        st.text(max_size=8),  # any key: "$x", "a.b", "\x00" are escaped for storage
        st.one_of(st.integers(-(2**60), 2**60), st.text(max_size=8)),
        max_size=4,
    ),
)
async def test_any_state_round_trips(acme, summary, step, data):
    task = await acme.tasks.create()
    state = AgentState(context_summary=summary)
    state.execution_meta.step = step
    state.execution_meta.internal_data.update(data)
    await acme.tasks.save_agent_state(task.id, state)
    assert await acme.tasks.agent_state(task.id) == state


async def test_backup_verify_and_restore_keep_the_state(store, stores, tmp_path):
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    state = stepped(2, "tools")
    state.set_interrupt("tools", "approve", "interrupted_after", {"k.$": [1, 2]})
    await acme.tasks.save_agent_state(task.id, state, messages=[user(1), reply(1)])
    await backup(store, tmp_path / "b")
    await verify(tmp_path / "b")
    target = await stores.fresh()
    await restore(target, tmp_path / "b")
    restored = target.scoped("acme")
    assert await restored.tasks.agent_state(task.id) == state
    assert [m.id for m in await restored.tasks.messages(task.id)] == ["u1", "a1"]


async def test_other_tenants_do_not_see_it(store):
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    await acme.tasks.save_agent_state(task.id, stepped(1))
    with pytest.raises(NotFound):
        await store.scoped("beta").tasks.agent_state(task.id)
    with pytest.raises(NotFound):
        await store.scoped("beta").tasks.save_agent_state(task.id, stepped(2))
    assert (await acme.tasks.agent_state(task.id)).execution_meta.step == 1


async def test_an_encrypted_tenant_seals_the_messages_and_reads_the_state(store_factory):
    """The messages saved with the state are sealed; the state itself is stored in the
    clear (docs/encryption.md, Limits) and reads back."""
    sealed = (await store_factory(keyring=Keyring(LocalMasterKey(os.urandom(32))))).scoped("acme")
    task = await sealed.tasks.create()
    secret = UserMessage(id="u1", content=[TextPart(text="SECRET question")])
    await sealed.tasks.save_agent_state(task.id, stepped(1), messages=[secret])
    assert b"SECRET" not in await raw(sealed, task.id)
    assert (await sealed.tasks.agent_state(task.id)) == stepped(1)
    assert (await sealed.tasks.messages(task.id))[0].content[0].text == "SECRET question"


async def test_erasing_a_task_erases_its_state_and_keeps_the_others(store):
    acme = store.scoped("acme")
    gone, kept = await acme.tasks.create(), await acme.tasks.create()
    for task in (gone, kept):
        await acme.tasks.save_agent_state(task.id, stepped(1), messages=[user(1)])
    await erase(store, "acme", task_id=gone.id)
    with pytest.raises(NotFound):
        await acme.tasks.agent_state(gone.id)
    assert await acme.tasks.agent_state(kept.id) == stepped(1)
