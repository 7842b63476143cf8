"""Agents' dialogs by alias: open / switch / fork / list on the store, scoped by tenant and
owner, every change one guarded write (no lost update between concurrent coroutines), and
the pure state transitions against a plain-dict model."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore.portable as portable
from mindstore.backends.recorder import observe_all
from mindstore.compression import ContextConfig, DefaultContextManager, estimate_tokens
from mindstore.compression.managers import TRUNCATION_PREFIX
from mindstore.documents import AGENTS
from mindstore.errors import Conflict, InvalidTransition, NotFound, ValidationError
from mindstore.model.agents import AgentState, agent_key
from mindstore.model.messages import message_to_dict


async def owned_dialog_ids(acme, owner: str) -> set[str]:
    page = await acme.tasks.list(owner=owner, limit=1000)
    return {record.id for record in page.items}


async def test_the_documents_agent_flow_end_to_end(acme, store):
    agent = await acme.agents.get("coder", system_prompt="You are a {language} coder.")
    assert agent.dialogs == {} and agent.active_alias is None and agent.current_dialog is None
    planning = await agent.open("planning", prompt_args={"language": "Python"})
    assert agent.active_alias == "planning" and agent.current_dialog == planning.id
    assert planning.owner == "coder"
    head = await acme.dialogs.head(planning.id)
    assert (
        head.role == "system" and head.text() == "You are a Python coder." and head.name == "coder"
    )
    for turn in ("What's the plan?", "Step one", "Step two", "Step three"):
        await agent.receive(turn)
    execution = await agent.open("execution", prompt_args={"language": "Rust"})
    assert agent.active_alias == "execution"
    await agent.switch("planning")
    assert agent.current_dialog == planning.id
    alt = await agent.fork("planning", "planning_alt", last_n=2, switch=True)
    assert agent.active_alias == "planning_alt" and agent.current_dialog == alt.id
    kept = await acme.tasks.messages(alt.id)
    source = await acme.tasks.messages(planning.id)
    assert [m.id for m in kept] == [
        source[0].id,
        *[m.id for m in source[-2:]],
    ]  # first_k=1, last_n=2
    node = await acme.dialogs.node(alt.id)
    assert (node.parent_id, node.last_n, node.first_k, node.owner) == (planning.id, 2, 1, "coder")
    assert agent.dialogs == {
        "planning": planning.id,
        "execution": execution.id,
        "planning_alt": alt.id,
    }
    assert agent.state.entries[-1].forked_from == "planning"
    # persisted: a fresh handle, and one small document with one version per change
    again = await acme.agents.get("coder")
    assert again.dialogs == agent.dialogs and again.active_alias == "planning_alt"
    stored = await store.database[AGENTS].find_one(
        {"_id": agent_key("acme", "coder"), "tenant": "acme"}
    )
    assert stored["owner"] == "coder" and stored["version"] == 4  # open, open, switch, fork
    assert await acme.agents.list() == ["coder"]
    # receive goes to the active dialog (now the fork)
    message = await agent.receive("explore")
    assert (await acme.dialogs.tail(alt.id)).id == message.id
    assert (await acme.dialogs.tail(planning.id)).text() == "Step three"


async def test_agents_are_scoped_by_tenant_and_owner(store):
    acme, other = store.scoped("acme"), store.scoped("other")
    agent = await acme.agents.get("coder", system_prompt="hi")
    await agent.open("main")
    assert (await other.agents.get("coder")).dialogs == {}  # same name, another tenant
    assert await other.agents.list() == []
    mine = store.scoped("acme", owner="coder")
    assert (await mine.agents.get("coder")).dialogs == agent.dialogs
    with pytest.raises(NotFound):
        await store.scoped("acme", owner="bob").agents.get("coder")
    assert await store.scoped("acme", owner="bob").agents.list() == []
    # an owner-scoped agent opens dialogs its own view can read
    scoped = await mine.agents.get("coder", system_prompt="scoped")
    record = await scoped.open("second")
    assert (await mine.dialogs.head(record.id)).text() == "scoped"
    assert await mine.agents.list() == ["coder"]


async def test_bad_changes_are_typed_errors_and_change_nothing(acme):
    agent = await acme.agents.get("coder", system_prompt="You are {who}.")
    await agent.open("main", prompt_args={"who": "careful"})
    before_state = (await acme.agents.get("coder")).state
    before_dialogs = await owned_dialog_ids(acme, "coder")

    with pytest.raises(Conflict, match="alias 'main'"):
        await agent.open("main", prompt_args={"who": "x"})
    with pytest.raises(NotFound, match="alias 'nope'"):
        await agent.switch("nope")
    with pytest.raises(NotFound, match="alias 'nope'"):
        await agent.fork("nope", "copy")
    with pytest.raises(Conflict, match="alias 'main'"):
        await agent.fork("main", "main")
    with pytest.raises(ValidationError, match="alias"):
        await agent.open("has space")
    with pytest.raises(ValidationError, match="alias"):
        await agent.switch("$where")
    with pytest.raises(ValidationError, match="prompt_args"):
        await agent.open("other", prompt_args={"unused": 1})  # `who` missing from the args
    with pytest.raises(ValidationError, match="last_n"):
        await agent.fork("main", "copy", last_n="2")  # type: ignore[arg-type]
    bare = await acme.agents.get("bare")
    with pytest.raises(ValidationError, match="prompt_args"):
        await bare.open("x", prompt_args={"a": 1})
    with pytest.raises(InvalidTransition, match="open one first"):
        await bare.receive("hello")
    for bad in ("", "$ne", "a\x00b", 7):
        with pytest.raises(ValidationError, match="agent name"):
            await acme.agents.get(bad)  # type: ignore[arg-type]

    assert (await acme.agents.get("coder")).state == before_state
    after = await owned_dialog_ids(acme, "coder")
    # a failed fork may have stored its child before the claim failed; it is deleted again
    assert after == before_dialogs
    assert await acme.agents.list() == ["coder"]  # nothing stored for "bare"


async def test_replace_repoints_an_alias_and_keeps_the_old_dialog(acme):
    agent = await acme.agents.get("coder")
    first = await agent.open("main")
    second = await agent.open("main", replace=True, switch=False)
    assert agent.dialogs == {"main": second.id} and first.id != second.id
    assert (await acme.tasks.get(first.id)).owner == "coder"  # still stored
    assert (await acme.dialogs.head(second.id)) is None  # no system prompt: an empty dialog


async def test_concurrent_switches_and_opens_lose_no_update(acme):
    repository = acme.agents
    setup = await repository.get("coder")
    await setup.open("base1")
    await setup.open("base2")  # active: base2
    opener = await repository.get("coder", system_prompt="p")
    switcher = await repository.get("coder")

    async def open_many() -> None:
        for i in range(6):
            await opener.open(f"a{i}", switch=False)

    async def switch_many() -> None:
        for i in range(12):
            await switcher.switch("base1" if i % 2 == 0 else "base2")

    await asyncio.gather(open_many(), switch_many())
    final = await repository.get("coder")
    assert list(final.dialogs) == ["base1", "base2", *[f"a{i}" for i in range(6)]]
    assert final.active_alias == "base2"
    assert final.state.version == 2 + 6 + 12  # every change landed exactly once
    assert repository.lost_races > 0  # the coroutines did interleave: guards were exercised
    for alias, dialog_id in final.dialogs.items():
        assert (await acme.tasks.get(dialog_id)).owner == "coder", alias


async def test_two_coroutines_opening_the_same_alias_leave_one_dialog(acme):
    first, second = await acme.agents.get("coder"), await acme.agents.get("coder")
    results = await asyncio.gather(first.open("main"), second.open("main"), return_exceptions=True)
    won = [r for r in results if not isinstance(r, Exception)]
    lost = [r for r in results if isinstance(r, Exception)]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], Conflict)
    assert (await acme.agents.get("coder")).dialogs == {"main": won[0].id}
    assert await owned_dialog_ids(acme, "coder") == {won[0].id}  # the loser's dialog is gone


async def test_agent_context_applies_its_context_manager_without_touching_the_dialog(acme):
    config = ContextConfig.from_dict({
        "global": {"context_manager": {"type": "default"}},
        "agent_configs": [{"name": "cheap", "model_name": "gpt-4o-mini",
                           "context_manager": {"max_tokens": 5_600}}],
    })  # fmt: skip
    manager = config.context_manager_for("cheap")
    assert isinstance(manager, DefaultContextManager) and manager.budget == 600
    agent = await acme.agents.get("cheap", system_prompt="Be brief.", context_manager=manager)
    dialog = await agent.open("main")
    for i in range(12):
        await agent.receive(f"message {i} " + "v" * 300)
    stored = [message_to_dict(m) for m in await acme.tasks.messages(dialog.id)]
    sent = await agent.context()
    assert sent[0].text() == "Be brief." and sent[-1].text().startswith("message 11 ")
    assert (
        sum(estimate_tokens(m) for m in sent)
        <= 600
        < sum(estimate_tokens(m) for m in await acme.tasks.messages(dialog.id))
    )
    assert any(m.text().startswith(TRUNCATION_PREFIX) for m in sent)
    assert [message_to_dict(m) for m in await acme.tasks.messages(dialog.id)] == stored
    plain = await acme.agents.get("cheap")
    assert len(await plain.context()) == 13  # no manager: the whole view


async def test_every_agent_write_names_the_shard_key(acme, monkeypatch):
    monkeypatch.setattr(portable, "SHARDED_COLLECTIONS", portable.SHARDED_COLLECTIONS | {AGENTS})
    with observe_all() as log:
        agent = await acme.agents.get("coder")
        await agent.open("a")
        await agent.open("b")
        await agent.switch("a")
        await agent.fork("a", "c")
        await acme.agents.delete("coder")
    ours = [c for c in log if c.collection == AGENTS]
    assert {c.name.lower() for c in ours} >= {"insert", "update", "find", "delete"}
    assert portable.audit(ours) == []
    assert await acme.agents.list() == []


# ---------------------------------------------------------------- pure transitions
ALIASES = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("open"), ALIASES, st.booleans(), st.booleans()),
        st.tuples(st.just("switch"), ALIASES),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_state_transitions_match_a_plain_dict_model(ops):
    state = AgentState(name="coder")
    model: dict[str, str] = {}
    active: str | None = None
    for number, op in enumerate(ops):
        if op[0] == "open":
            _, alias, activate, replace = op
            dialog_id = f"d{number}"
            if alias in model and not replace:
                with pytest.raises(Conflict):
                    state.with_dialog(alias, dialog_id, activate=activate, replace=replace)
                continue
            state = state.with_dialog(alias, dialog_id, activate=activate, replace=replace)
            model[alias] = dialog_id
            active = alias if activate else active
        else:
            if op[1] not in model:
                with pytest.raises(NotFound):
                    state.switched(op[1])
                continue
            state = state.switched(op[1])
            active = op[1]
        assert state.dialogs == model and list(state.dialogs) == list(model)
        assert state.active_alias == active
        assert state.current_dialog == (model[active] if active else None)
        stored = state.to_document("acme")
        assert AgentState.from_document(stored) == state
        assert stored["_id"] == "acme/coder" and stored["tenant"] == "acme"


def test_state_refuses_bad_ids_before_anything_is_planned():
    state = AgentState(name="coder")
    with pytest.raises(ValidationError, match="dialog id"):
        state.with_dialog("main", "$where")
    with pytest.raises(ValidationError, match="alias"):
        state.with_dialog("a/b", "d1")
    with pytest.raises(NotFound, match="alias 'main'"):
        state.dialog_id("main")
    assert state.dialogs == {} and not state.exists
