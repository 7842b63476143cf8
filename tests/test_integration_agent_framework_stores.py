"""Microsoft Agent Framework's session store and workflow checkpoint storage on mindstore:
a workflow checkpoints on `MindstoreCheckpointStorage` and resumes from a checkpoint (in a
new storage object, as after a restart) exactly as on the framework's
`InMemoryCheckpointStorage`, and an agent resumes from a `MindstoreSessionStore` session
as from the framework's `SessionStore`; saves are exactly-once by checkpoint id; the
session store keeps compare-and-swap versions against real concurrent writers; hostile ids
round-trip and bad input is refused before any write; everything is sealed under a keyring
and goes through backup, restore, erase, retention and a key rotation's sweep. The
framework's own tests of both interfaces run in tests/agent_framework_stores."""

from __future__ import annotations

import asyncio
import itertools
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("agent_framework")


from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatResponse,
    Content,
    Executor,
    FunctionInvocationLayer,
    InMemoryCheckpointStorage,
    InMemoryHistoryProvider,
    Message,
    SessionStore,
    WorkflowBuilder,
    WorkflowCheckpoint,
    WorkflowCheckpointException,
    WorkflowContext,
    handler,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.crypto.aead import is_sealed, key_version
from mindstore.errors import Conflict, NotFound, ValidationError
from mindstore.integrations.agent_framework_checkpoints import (
    MindstoreCheckpointStorage,
    checkpoint_task_id,
    workflow_task_id,
)
from mindstore.integrations.agent_framework_sessions import (
    MindstoreSessionStore,
    session_task_id,
)

SECRET = "SECRET"
EXAMPLES = itertools.count()


async def stored_documents(store: Any) -> list[Any]:
    """Every document of the tasks collections, in `_id` order (what a write would change)."""
    found = []
    for name in ("tasks", "task_pages", "payloads"):
        found += [d async for d in store.database[name].find({}).sort("_id", 1)]
    return found


# -- a workflow that checkpoints, resumed from a checkpoint -----------------------------------


class Tally(Executor):
    """Adds its step to a running list kept in the workflow's state, then passes it on."""

    def __init__(self, id: str, target: str | None) -> None:
        super().__init__(id=id)
        self.target = target

    @handler
    async def run(self, message: list[str], ctx: WorkflowContext[list[str], str]) -> None:
        seen = [*message, f"{self.id}:{SECRET}"]
        ctx.set_state(f"seen-{self.id}", len(seen))
        if self.target is None:
            await ctx.yield_output(" > ".join(seen))
        else:
            await ctx.send_message(seen, target_id=self.target)


def build(storage: Any) -> Any:
    first, second, third = Tally("first", "second"), Tally("second", "third"), Tally("third", None)
    return (
        WorkflowBuilder(name="tally", start_executor=first, checkpoint_storage=storage)
        .add_edge(first, second)
        .add_edge(second, third)
        .build()
    )


def shape(checkpoint: WorkflowCheckpoint) -> dict[str, Any]:
    """A checkpoint's content without its random id, links and timestamp."""
    data = dict(checkpoint.to_dict())
    for key in ("checkpoint_id", "previous_checkpoint_id", "timestamp"):
        data.pop(key)
    return data


async def workflow_story(make_storage: Any) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """Run, then resume from the middle checkpoint on a new storage object (a restart)."""
    storage = make_storage()
    first_outputs = (await build(storage).run(["start"])).get_outputs()
    checkpoints = sorted(
        await storage.list_checkpoints(workflow_name="tally"), key=lambda c: c.timestamp
    )
    middle = checkpoints[len(checkpoints) // 2]
    restarted = make_storage()
    resumed = (await build(restarted).run(checkpoint_id=middle.checkpoint_id)).get_outputs()
    after = sorted(
        await restarted.list_checkpoints(workflow_name="tally"), key=lambda c: c.timestamp
    )
    assert after[len(checkpoints)].previous_checkpoint_id == middle.checkpoint_id
    return first_outputs, resumed, [shape(c) for c in after]


async def test_a_workflow_resumes_from_a_checkpoint_exactly_as_on_the_in_memory_storage(store):
    memory = InMemoryCheckpointStorage()
    ours = await workflow_story(lambda: MindstoreCheckpointStorage(store.scoped("acme")))
    theirs = await workflow_story(lambda: memory)
    assert ours == theirs
    assert ours[0] == ours[1] == [f"start > first:{SECRET} > second:{SECRET} > third:{SECRET}"]
    latest = await MindstoreCheckpointStorage(store.scoped("acme")).get_latest(
        workflow_name="tally"
    )
    assert latest is not None and shape(latest) == ours[2][-1]


class Scripted(FunctionInvocationLayer, BaseChatClient):
    """Stands in for a model: looks the question up, then answers."""

    async def _answer(self, messages: list[Message]) -> ChatResponse:
        n = len(messages)
        if messages[-1].role == "user":
            call = Content.from_function_call(
                call_id=f"call-{n}", name="lookup", arguments={"n": n}
            )
            return ChatResponse(
                messages=[Message(role="assistant", contents=[call], message_id=f"c{n}")]
            )
        return ChatResponse(
            messages=[Message(role="assistant", contents=[f"answer {n}"], message_id=f"a{n}")]
        )

    def _inner_get_response(
        self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        return self._answer(list(messages))


def lookup(n: int) -> str:
    """Look a number up."""
    return f"found {n}"


async def agent_story(sessions: Any) -> list[Any]:
    """Two turns, the session stored between them and loaded by a new agent (a restart);
    the history lives in the session's state (the framework's in-memory provider)."""

    def agent() -> Agent:
        return Agent(
            client=Scripted(), tools=[lookup], context_providers=[InMemoryHistoryProvider()]
        )

    session = agent().create_session(session_id="chat-1")
    await agent().run("first question", session=session)
    await sessions.set("org/chat-1", session)
    restored = await sessions.get("org/chat-1")
    response = await agent().run("second question", session=restored)
    await sessions.set("org/chat-1", restored)
    final = await sessions.get("org/chat-1")
    history = final.state[InMemoryHistoryProvider.DEFAULT_SOURCE_ID]["messages"]
    return [response.text, final.session_id, [(m.role, m.text) for m in history]]


async def test_an_agent_resumes_from_a_stored_session_exactly_as_on_the_in_memory_store(store):
    ours = await agent_story(MindstoreSessionStore(store.scoped("acme")))
    assert ours == await agent_story(SessionStore())
    assert ours[0] == "answer 7" and len(ours[2]) == 8
    assert await MindstoreSessionStore(store.scoped("acme")).version("org/chat-1") == 2


# -- checkpoints: exactly-once, immutable, deleted -------------------------------------------


async def test_a_retried_save_stores_one_checkpoint_even_after_a_crash_between_its_writes(store):
    view = store.scoped("acme")
    storage = MindstoreCheckpointStorage(view)
    checkpoint = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", state={"n": 1})
    original = storage._append

    async def crash_before_the_entry(task_id: str, message: Any, name: str) -> None:
        if task_id == workflow_task_id("w"):
            raise ConnectionError("lost")
        await original(task_id, message, name)

    storage._append = crash_before_the_entry  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await storage.save(checkpoint)
    assert await storage.list_checkpoint_ids(workflow_name="w") == []  # not listed yet
    storage._append = original  # type: ignore[method-assign]
    for _ in range(3):  # the retry, then replays (a lost reply)
        assert await storage.save(checkpoint) == checkpoint.checkpoint_id
    assert await storage.list_checkpoint_ids(workflow_name="w") == [checkpoint.checkpoint_id]
    assert (await view.tasks.get(checkpoint_task_id(checkpoint.checkpoint_id))).seq == 1
    assert (await view.tasks.get(workflow_task_id("w"))).seq == 1
    # two writers saving the same checkpoint at once store it once too
    twin = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", state={"n": 2})
    await asyncio.gather(*(MindstoreCheckpointStorage(view).save(twin) for _ in range(4)))
    assert await storage.list_checkpoint_ids(workflow_name="w") == [
        checkpoint.checkpoint_id,
        twin.checkpoint_id,
    ]
    assert (await view.tasks.get(workflow_task_id("w"))).seq == 2


async def test_a_checkpoint_is_immutable_and_a_deleted_id_is_not_reused(store):
    storage = MindstoreCheckpointStorage(store.scoped("acme"))
    checkpoint = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", state={"n": 1})
    await storage.save(checkpoint)
    other = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", state={"n": 2},
                               checkpoint_id=checkpoint.checkpoint_id)  # fmt: skip
    before = await stored_documents(store)
    with pytest.raises(Conflict, match="checkpoint_id"):
        await storage.save(other)
    assert await stored_documents(store) == before
    assert (await storage.load(checkpoint.checkpoint_id)).state == {"n": 1}
    assert await storage.delete(checkpoint.checkpoint_id) is True
    assert await storage.list_checkpoints(workflow_name="w") == []
    assert await storage.get_latest(workflow_name="w") is None
    with pytest.raises(Conflict, match="not reused"):
        await storage.save(checkpoint)
    with pytest.raises(WorkflowCheckpointException):
        await storage.load(checkpoint.checkpoint_id)


async def test_a_checkpoint_erased_with_its_task_is_listed_nowhere(store):
    """Retention and an owner's erase remove tasks whole: a checkpoint whose task is gone
    is neither listed nor the latest, though its workflow's list still names it."""
    view = store.scoped("acme")
    storage = MindstoreCheckpointStorage(view)
    old = WorkflowCheckpoint(
        workflow_name="w", graph_signature_hash="h", timestamp="2026-01-01T00:00:00+00:00"
    )
    new = WorkflowCheckpoint(
        workflow_name="w", graph_signature_hash="h", timestamp="2026-02-01T00:00:00+00:00"
    )
    for checkpoint in (old, new):
        await storage.save(checkpoint)
    assert (await storage.get_latest(workflow_name="w")).checkpoint_id == new.checkpoint_id  # type: ignore[union-attr]
    await view.tasks.delete(checkpoint_task_id(new.checkpoint_id))
    assert await storage.list_checkpoint_ids(workflow_name="w") == [old.checkpoint_id]
    assert [c.checkpoint_id for c in await storage.list_checkpoints(workflow_name="w")] == [
        old.checkpoint_id
    ]
    assert (await storage.get_latest(workflow_name="w")).checkpoint_id == old.checkpoint_id  # type: ignore[union-attr]
    assert await storage.delete(new.checkpoint_id) is False


async def test_checkpoints_are_the_tenants_own(store):
    acme, globex = (MindstoreCheckpointStorage(store.scoped(t)) for t in ("acme", "globex"))
    checkpoint = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h")
    await acme.save(checkpoint)
    assert await globex.list_checkpoint_ids(workflow_name="w") == []
    assert await globex.delete(checkpoint.checkpoint_id) is False
    with pytest.raises(WorkflowCheckpointException):
        await globex.load(checkpoint.checkpoint_id)
    assert (await acme.load(checkpoint.checkpoint_id)).checkpoint_id == checkpoint.checkpoint_id


async def test_a_checkpoint_that_would_not_decode_is_refused_before_any_write(store):
    storage = MindstoreCheckpointStorage(store.scoped("acme"))
    before = await stored_documents(store)
    with pytest.raises(WorkflowCheckpointException, match="NotAllowed"):
        await storage.save(WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h",
                                              state={"x": NotAllowed()}))  # fmt: skip
    nameless = WorkflowCheckpoint(workflow_name="", graph_signature_hash="h")
    control = WorkflowCheckpoint(workflow_name="w", graph_signature_hash="h", checkpoint_id="a\x00")
    for bad, what in ((nameless, "workflow_name"), (control, "checkpoint_id"),
                      ({"workflow_name": "w"}, "checkpoint")):  # fmt: skip
        with pytest.raises(ValidationError, match=what):
            await storage.save(bad)  # type: ignore[arg-type]
    assert await stored_documents(store) == before


class NotAllowed:
    """Pickles, but is not among the types a checkpoint may hold here."""


# -- sessions: compare-and-swap versions -----------------------------------------------------


async def test_of_writers_racing_on_one_version_exactly_one_wins(store):
    sessions = MindstoreSessionStore(store.scoped("acme"))
    assert await sessions.set("chat", AgentSession(session_id="chat"), expected_version=0) == 1

    async def writer(n: int) -> int | None:
        session = AgentSession(session_id="chat")
        session.state["writer"] = n
        try:
            return await MindstoreSessionStore(store.scoped("acme")).set(
                "chat", session, expected_version=1
            )
        except Conflict:
            return None

    results = await asyncio.gather(*(writer(n) for n in range(6)))
    winners = [n for n, r in enumerate(results) if r is not None]
    assert len(winners) == 1 and results[winners[0]] == 2
    found = await sessions.get_versioned("chat")
    assert found is not None and found[1] == 2 and found[0].state["writer"] == winners[0]
    with pytest.raises(Conflict, match="expected version 1, stored 2"):
        await sessions.set("chat", AgentSession(), expected_version=1)
    with pytest.raises(Conflict, match="expected version 0"):
        await sessions.set("chat", AgentSession(), expected_version=0)


async def test_plain_sets_from_racing_writers_all_land_one_after_another(store):
    async def writer(n: int) -> int:
        session = AgentSession(session_id="chat")
        session.state["writer"] = n
        return await MindstoreSessionStore(store.scoped("acme")).set("chat", session)

    versions = await asyncio.gather(*(writer(n) for n in range(5)))
    assert sorted(versions) == [1, 2, 3, 4, 5]
    sessions = MindstoreSessionStore(store.scoped("acme"))
    found = await sessions.get_versioned("chat")
    assert found is not None and found[1] == 5 and found[0].state["writer"] == versions.index(5)
    await sessions.delete("chat")
    assert await sessions.version("chat") == 0 and await sessions.get("chat") is None
    with pytest.raises(Conflict):  # a writer that read before the delete
        await sessions.set("chat", AgentSession(), expected_version=5)


async def test_sessions_are_the_views_own(store):
    ann = MindstoreSessionStore(store.scoped("acme", owner="ann"))
    await ann.set("chat", AgentSession(session_id="a"))
    assert await MindstoreSessionStore(store.scoped("globex")).get("chat") is None
    bob = MindstoreSessionStore(store.scoped("acme", owner="bob"))
    assert await bob.get("chat") is None
    with pytest.raises(NotFound):  # another owner's: not overwritten
        await bob.set("chat", AgentSession(session_id="b"))
    assert (await ann.get("chat")).session_id == "a"  # type: ignore[union-attr]


hostile = st.one_of(
    st.sampled_from(["$ne", "a.b", "../../etc", "org/team/chat-1", "_:x:00", "a" * 512, "café 🙂"]),
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40),
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ids=st.lists(hostile, min_size=1, max_size=3, unique=True))
async def test_hostile_ids_are_opaque_and_never_meet(store, ids):
    tenant = f"hostile-{next(EXAMPLES)}"  # the examples share the test's store
    sessions = MindstoreSessionStore(store.scoped(tenant))
    storage = MindstoreCheckpointStorage(store.scoped(tenant))
    for session_id in ids:
        await sessions.set(session_id, AgentSession(session_id=session_id))
        await storage.save(WorkflowCheckpoint(workflow_name=session_id, checkpoint_id=session_id,
                                              graph_signature_hash=session_id))  # fmt: skip
    for session_id in ids:
        assert session_task_id(session_id).startswith("_:agent-framework-session:")
        assert (await sessions.get(session_id)).session_id == session_id  # type: ignore[union-attr]
        assert await storage.list_checkpoint_ids(workflow_name=session_id) == [session_id]
        assert (await storage.load(session_id)).graph_signature_hash == session_id
    for session_id in ids:
        await sessions.delete(session_id)
        assert await storage.delete(session_id) is True


@pytest.mark.parametrize("bad", ["", "a\x00b", "a\nb", "x" * 513, 7, None])
async def test_bad_session_ids_and_input_are_refused_naming_the_argument_before_any_write(
    store, bad
):
    sessions = MindstoreSessionStore(store.scoped("acme"))
    await sessions.set("kept", AgentSession(session_id="kept"))
    before = await stored_documents(store)
    for call in (sessions.get(bad), sessions.set(bad, AgentSession()), sessions.delete(bad)):
        with pytest.raises(ValidationError, match="session_id"):
            await call
    with pytest.raises(ValidationError, match="session"):
        await sessions.set("kept", {"session_id": "x"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="expected_version"):
        await sessions.set("kept", AgentSession(), expected_version=-1)
    unsupported = AgentSession()
    unsupported.state["x"] = object()
    with pytest.warns(RuntimeWarning), pytest.raises(ValidationError, match="session"):
        await sessions.set("kept", unsupported)
    assert await stored_documents(store) == before


# -- under a keyring; backup, restore, erase -------------------------------------------------


async def everything(view: Any) -> tuple[Any, ...]:
    sessions = MindstoreSessionStore(view)
    storage = MindstoreCheckpointStorage(view)
    found = await sessions.get_versioned("chat/1")
    return (
        (found[0].to_dict(), found[1]) if found is not None else None,
        [shape(c) for c in await storage.list_checkpoints(workflow_name="tally")],
    )


async def fill(view: Any) -> None:
    session = AgentSession(session_id="chat/1", service_session_id=f"{SECRET}-resp")
    session.state["note"] = {"text": f"{SECRET} state"}
    sessions = MindstoreSessionStore(view)
    await sessions.set("chat/1", session)
    await sessions.set("chat/1", session, expected_version=1)
    await build(MindstoreCheckpointStorage(view)).run(["start"])


def strings(value: Any) -> list[str]:
    """Every string, key and clear byte string in a stored value (ciphertexts skipped)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes) and not is_sealed(value):
        return [value.decode("latin-1")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


async def leaks(store: Any) -> dict[str, int]:
    """How many stored strings hold the marker, per collection (only those that do)."""
    found: dict[str, int] = {}
    for name in await store.database.list_collection_names():
        async for document in store.database[name].find({}):
            count = sum(SECRET in s for s in strings(document))
            if count:
                found[name] = found.get(name, 0) + count
    return found


async def test_sessions_and_checkpoints_are_sealed_under_a_keyring(store_factory):
    sealed = await store_factory(keyring=Keyring(LocalMasterKey(os.urandom(32))))
    plain = await store_factory()
    for target in (sealed, plain):
        await fill(target.scoped("acme", owner="ann"))
    assert await everything(sealed.scoped("acme")) == await everything(plain.scoped("acme"))
    assert (await everything(sealed.scoped("acme")))[0][1] == 2
    assert await leaks(plain) and await leaks(sealed) == {}


def key_versions(value: Any) -> set[int]:
    """The key versions of every ciphertext in a stored value."""
    if is_sealed(value):
        return {key_version(value)}
    if isinstance(value, dict):
        return {v for item in value.values() for v in key_versions(item)}
    if isinstance(value, list):
        return {v for item in value for v in key_versions(item)}
    return set()


async def test_rotation_then_the_sweep_reseals_sessions_and_checkpoints(store_factory):
    sealed = await store_factory(keyring=Keyring(LocalMasterKey(os.urandom(32))))
    assert sealed.keyring is not None
    await fill(sealed.scoped("acme", owner="ann"))
    before = await everything(sealed.scoped("acme"))
    assert await sealed.keyring.rotate("acme") == 2
    assert {v for d in await stored_documents(sealed) for v in key_versions(d)} == {1}
    swept = await sealed.keyring.reencrypt("acme")
    assert swept.values_sealed > 0
    assert {v for d in await stored_documents(sealed) for v in key_versions(d)} == {2}
    assert await everything(sealed.scoped("acme")) == before
    assert await leaks(sealed) == {}


async def test_sessions_and_checkpoints_survive_backup_and_restore_and_are_erased(
    store, store_factory, tmp_path
):
    from mindstore.backup import backup, erase, restore

    await fill(store.scoped("acme", owner="ann"))
    before = await everything(store.scoped("acme"))
    assert before[0] is not None and len(before[1]) >= 3
    await backup(store, tmp_path / "backup")
    fresh = await store_factory()
    await restore(fresh, tmp_path / "backup")
    assert await everything(fresh.scoped("acme")) == before
    await erase(fresh, "acme", owner="ann")
    assert await everything(fresh.scoped("acme")) == (None, [])


async def test_retention_erases_sessions_and_checkpoints_not_updated_since_the_cutoff(store):
    from mindstore.backup.retention import erase_before

    await fill(store.scoped("acme", owner="ann"))
    before = await everything(store.scoped("acme"))
    now = datetime.now(UTC)
    await erase_before(store, "acme", before=now - timedelta(days=1))
    assert await everything(store.scoped("acme")) == before  # all newer than the cutoff
    await erase_before(store, "acme", before=now + timedelta(minutes=5))
    assert await everything(store.scoped("acme")) == (None, [])
