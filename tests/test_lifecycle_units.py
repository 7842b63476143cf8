"""One lifecycle for everything the store holds: LangGraph threads, agents and policies are
backed up, verified, restored, erased and expired like tasks (docs/backup.md).

A tenant is planted with a marker ("123-45-6789") in every place an application can put
it: the graph state of a LangGraph thread (a large channel value, a blob, and a small one,
inline), its messages, an OpenAI Agents session, an agent's alias and dialog, on an
owner-scoped view and on the tenant's own; a second tenant gets another marker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import bson
import pytest

pytest.importorskip("langgraph")
pytest.importorskip("agents")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

import mindstore
from mindstore.backends.recorder import observe_all
from mindstore.backup import BackupCorrupt, backup, erase, restore, verify
from mindstore.backup.retention import erase_before, get_policy, set_policy
from mindstore.backup.threads import checkpoint_time, prefix_of
from mindstore.documents import (
    AGENTS,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    POLICIES,
)
from mindstore.integrations.langchain import MindstoreChatMessageHistory
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.integrations.langgraph_store import MindstoreStore
from mindstore.integrations.openai_agents import MindstoreSession
from mindstore.model.paging import PagePolicy
from mindstore.portable import WRITE_COMMANDS
from mindstore.registry import COLLECTIONS, REGISTRY

REGISTRY_NAMES = [entry.name for entry in REGISTRY]
from test_backup_support import read_file_records, rewrite_file  # noqa: E402

MARK = "123-45-6789"
OTHER = "987-65-4321"
THREAD = {"configurable": {"thread_id": "t1"}}


def thread_of(owner: str | None) -> str:
    """Ann's thread and the tenant's own: a thread id names one conversation per tenant."""
    return "t1" if owner is None else f"t1-{owner}"


def config_of(owner: str | None) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_of(owner)}}


SAVER = (LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES, LANGGRAPH_BLOBS)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    profile: dict
    flag: str


def graph(saver: MindstoreSaver, mark: str) -> Any:
    """A graph whose state holds `mark` in its messages, a large channel (a blob) and a small
    one (inline in the checkpoint)."""

    def node(state: State) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"noted {n}", id=f"ai-{n}")],
                "profile": {"id": mark, "notes": "x" * 100, "n": n}, "flag": mark}  # fmt: skip

    builder = StateGraph(State)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


async def turn(view: Any, mark: str, i: int) -> None:
    await graph(MindstoreSaver(view), mark).ainvoke(
        {"messages": [HumanMessage(f"my id is {mark} ({i})", id=f"h{i}")]}, config_of(view.owner)
    )


async def plant(store: Any, tenant: str, mark: str = MARK) -> None:
    """Ann's thread, session and a LangGraph-store memory (owner-scoped), the tenant's own
    thread, an agent with a dialog under an alias holding the marker, and a retention
    policy."""
    for owner in ("ann", None):
        view = store.scoped(tenant, owner=owner)
        for i in range(2):
            await turn(view, mark, i)
        await MindstoreSession(f"s-{owner}", view).add_items(
            [{"role": "user", "content": f"id {mark}"}]
        )
        if owner is not None:
            await MindstoreStore(view).aput(("memories", owner), "note", {"text": f"is {mark}"})
    agent = await store.scoped(tenant).agents.get("ann", system_prompt=f"remember {mark}")
    await agent.open(f"id-{mark}")
    await agent.receive(f"it is {mark}")
    await set_policy(store, tenant, max_age_days=30)


async def everything(db: Any) -> dict[str, list[bytes]]:
    """Every document of every collection of the database, as BSON, sorted."""
    return {name: sorted(bson.encode(doc) for doc in await db[name].find({}).to_list())
            for name in sorted(await db.list_collection_names())}  # fmt: skip


def holding(dump: dict[str, list[bytes]], needle: str) -> dict[str, int]:
    """Documents that hold `needle` (or name it as their tenant), by collection."""
    raw = needle.encode()
    found = {name: sum(raw in doc or bson.decode(doc).get("tenant") == needle for doc in docs)
             for name, docs in dump.items()}  # fmt: skip
    return {name: count for name, count in found.items() if count}


async def tuples(store: Any, tenant: str, owner: str | None) -> tuple[Any, list[Any]]:
    saver = MindstoreSaver(store.scoped(tenant, owner=owner))
    config = config_of(owner)
    return await saver.aget_tuple(config), [t async for t in saver.alist(config)]


# ----------------------------------------------------------------------------- the registry


async def test_every_writer_writes_only_collections_of_the_registry(store_factory: Any) -> None:
    """Every writer of mindstore, driven once (tasks, dialogs, forks, paging, payloads,
    redaction, agents, policies, the LangGraph saver with copy and prune, the sessions of
    the Agents SDK and LangChain): what they write is exactly the registry."""
    from mindstore.crypto import Keyring, LocalMasterKey

    # with a keyring: its data keys are a collection mindstore writes too (`KEY_STORE`)
    store = await store_factory(page_policy=PagePolicy(page_messages=2),
                                keyring=Keyring(LocalMasterKey.generate()))  # fmt: skip
    store.offload_threshold = 200
    with observe_all() as log:
        await plant(store, "acme")
        acme = store.scoped("acme")
        record = await acme.dialogs.create("bob")
        for i in range(6):
            await acme.tasks.add_human_message(record.id, f"{i} " + "y" * 300, message_id=f"m{i}")
        await acme.tasks.redact(record.id, "m5")
        await acme.dialogs.fork(record.id, last_n=2)
        saver = MindstoreSaver(acme)
        await saver.acopy_thread("t1", "t2")
        await saver.aprune(["t2"])
        await MindstoreChatMessageHistory("chat", acme).aadd_messages([HumanMessage("hi")])
        await acme.search("hi")  # a search brings the search index up to date
    written = {c.collection for c in log if c.name.lower() in WRITE_COMMANDS and c.collection}
    assert written == set(COLLECTIONS)


def test_the_registry_is_the_document_models_and_the_docs_name_each_collection() -> None:
    from mindstore.backup.manifest import COLLECTIONS as BACKED_UP
    from mindstore.documents import DOCUMENT_MODELS
    from mindstore.portable import MINDSTORE_COLLECTIONS
    from mindstore.registry import DERIVED, KEY_STORE

    names = {entry.name for entry in REGISTRY}
    derived = {entry.name for entry in DERIVED}  # the search index: rebuilt, never backed up
    assert names | derived == {model.Settings.name for model in DOCUMENT_MODELS}
    # the keyring's collection is mindstore's too, and in backups (its tenant-wrapped keys)
    assert names | derived == MINDSTORE_COLLECTIONS and KEY_STORE.name in names
    assert set(BACKED_UP) == names
    models = {model.Settings.name: model for model in DOCUMENT_MODELS}
    for entry in (*REGISTRY, *DERIVED):  # the fields the registry names are the documents' own
        assert "tenant" in models[entry.name].model_fields
        assert entry.owner_field is None or entry.owner_field in models[entry.name].model_fields
    docs = (Path(__file__).parent.parent / "docs" / "backup.md").read_text()
    for name in names:
        assert f"`{name}`" in docs, name
    assert "not yet" not in docs


# ----------------------------------------------------------------------------- erase


async def test_erasing_a_tenant_leaves_nothing_of_it_in_any_collection(store: Any) -> None:
    await plant(store, "acme")
    await plant(store, "beta", OTHER)
    before = await everything(store.database)
    assert set(holding(before, MARK)) == {"tasks", "agents", "memory_items", *SAVER}
    # (no keyring here: no data keys; tests/test_crypto_drills.py erases an encrypted tenant)
    assert set(holding(before, "acme")) == set(REGISTRY_NAMES) - {
        "task_pages",
        "payloads",
        "data_keys",
    }
    beta = {name: [doc for doc in docs if bson.decode(doc)["tenant"] == "beta"]
            for name, docs in before.items()}  # fmt: skip

    receipt = await erase(store, "acme")

    after = await everything(store.database)
    assert holding(after, MARK) == {} and holding(after, "acme") == {}
    assert {name: docs for name, docs in after.items() if docs} == \
        {name: docs for name, docs in beta.items() if docs}  # fmt: skip
    erased = {name: len(docs) - len(beta[name]) for name, docs in before.items()}
    always = dict.fromkeys(("tasks", "dialog_nodes", "payloads"), 0)  # the receipt's first keys
    assert receipt.counts == {**always, **{name: count for name, count in erased.items() if count}}


async def test_erasing_an_owner_takes_their_threads_and_agent_and_keeps_the_rest(
    store: Any,
) -> None:
    await plant(store, "acme")
    tenant_thread = await tuples(store, "acme", None)
    receipt = await erase(store, "acme", owner="ann")
    db = store.database
    ann = prefix_of("acme", "ann", thread_of("ann"))
    for name in SAVER:
        assert not [
            d for d in await db[name].find({"tenant": "acme"}).to_list() if d["_id"].startswith(ann)
        ]
        assert receipt.counts[name] > 0
    assert await tuples(store, "acme", "ann") == (None, [])
    assert await tuples(store, "acme", None) == tenant_thread  # the tenant's own thread is whole
    assert await db[AGENTS].count_documents({}) == 0 and receipt.counts[AGENTS] == 1  # agent "ann"
    assert await get_policy(store, "acme") is not None and POLICIES not in receipt.counts
    assert await MindstoreSession("s-ann", store.scoped("acme", owner="ann")).get_items() == []
    assert await MindstoreSession("s-None", store.scoped("acme")).get_items() != []


async def test_erasing_the_task_of_a_thread_takes_the_whole_thread(store: Any) -> None:
    await plant(store, "acme")
    acme = store.scoped("acme")
    saver = MindstoreSaver(acme)
    first = [t async for t in saver.alist(THREAD)][-2]  # time travel: a branch of its own
    await graph(saver, MARK).ainvoke({"messages": [HumanMessage("again", id="h9")]}, first.config)
    stored = await store.database["tasks"].find({"tenant": "acme", "metadata.thread_id": "t1",
                                                 "owner": None}).to_list()  # fmt: skip
    assert len(stored) == 2  # the thread's task and the branch's
    ann_before = await tuples(store, "acme", "ann")

    receipt = await erase(store, "acme", task_id="t1")

    assert receipt.counts["tasks"] == 2
    assert await tuples(store, "acme", None) == (None, [])
    assert await store.database["tasks"].count_documents(
        {"tenant": "acme", "metadata.thread_id": "t1", "owner": None}) == 0  # fmt: skip
    assert await tuples(store, "acme", "ann") == ann_before  # ann's own thread stays


# ----------------------------------------------------------------------------- backup, restore


async def test_a_restored_tenant_resumes_its_threads_sessions_and_agents_exactly(
    store: Any, store_factory: Any, tmp_path: Path
) -> None:
    await plant(store, "acme")
    await plant(store, "beta", OTHER)
    manifest = await backup(store, tmp_path / "acme", tenant="acme")
    # format 5: the first that holds memory items (docs/backup.md)
    assert manifest.format_version == 5 and manifest.tenants == ["acme"]
    assert all(manifest.counts[name] > 0 for name in (*SAVER, AGENTS, POLICIES, "memory_items"))
    report = await verify(tmp_path / "acme")
    assert report.counts == manifest.counts

    fresh = await store_factory()
    await restore(fresh, tmp_path / "acme")
    for owner in ("ann", None):
        assert await tuples(fresh, "acme", owner) == await tuples(store, "acme", owner)
        view = (store.scoped("acme", owner=owner), fresh.scoped("acme", owner=owner))
        items = [await MindstoreSession(f"s-{owner}", v).get_items() for v in view]
        assert items[0] == items[1] and items[0]
    original, restored = [await s.scoped("acme").agents.state("ann") for s in (store, fresh)]
    assert restored == original and restored.version > 0
    assert await get_policy(fresh, "acme") == await get_policy(store, "acme")
    restored_docs = await everything(fresh.database)
    assert holding(restored_docs, OTHER) == {}  # nothing of beta
    original_docs = await everything(store.database)
    for name in (*SAVER, AGENTS, POLICIES, "memory_items"):  # byte for byte
        assert restored_docs[name] == [
            d for d in original_docs[name] if bson.decode(d)["tenant"] == "acme"
        ]

    # the threads go on from where they were, on both stores alike
    for target in (store, fresh):
        await turn(target.scoped("acme", owner="ann"), MARK, 2)
    assert await tuples(fresh, "acme", "ann") != await tuples(fresh, "acme", None)
    ours, theirs = [await tuples(s, "acme", "ann") for s in (store, fresh)]
    assert ours[1][0].checkpoint["channel_values"]["messages"] == \
        theirs[1][0].checkpoint["channel_values"]["messages"]  # fmt: skip

    again = await restore(store, tmp_path / "acme", mode="overwrite", dry_run=True)
    assert again.counts[POLICIES]["unchanged"] == 1 and again.counts[AGENTS]["unchanged"] == 1


async def test_a_tenant_restored_under_another_name_resumes_there(
    store: Any, tmp_path: Path
) -> None:
    await plant(store, "acme")
    await backup(store, tmp_path / "acme", tenant="acme")
    await restore(store, tmp_path / "acme", as_tenant="acme-copy")
    for owner in ("ann", None):
        original, copy = await tuples(store, "acme", owner), await tuples(store, "acme-copy", owner)
        assert [t.checkpoint for t in copy[1]] == [t.checkpoint for t in original[1]]
        assert [t.pending_writes for t in copy[1]] == [t.pending_writes for t in original[1]]
    assert (await store.scoped("acme-copy").agents.state("ann")).dialogs == \
        (await store.scoped("acme").agents.state("ann")).dialogs  # fmt: skip
    await erase(store, "acme")
    assert await tuples(store, "acme-copy", "ann") != (None, [])  # the copy is its own


async def test_a_backup_without_threads_agents_or_policies_keeps_its_old_format(
    store: Any, tmp_path: Path
) -> None:
    acme = store.scoped("acme")
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "hello")
    manifest = await backup(store, tmp_path / "b", tenant="acme")
    assert manifest.format_version == 1
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "dialog_nodes.jsonl.gz",
        "manifest.json",
        "payloads.jsonl.gz",
        "tasks.jsonl.gz",
    ]
    await set_policy(store, "acme", max_age_days=7)
    assert (await backup(store, tmp_path / "c", tenant="acme")).format_version == 3
    assert (await verify(tmp_path / "c")).counts[POLICIES] == 1


async def test_an_owners_backup_holds_their_threads_and_agent_only(
    store: Any, tmp_path: Path
) -> None:
    await plant(store, "acme")
    manifest = await backup(store, tmp_path / "ann", tenant="acme", owner="ann")
    ann = prefix_of("acme", "ann", thread_of("ann"))
    for name in SAVER:
        records = read_file_records(tmp_path / "ann" / f"{name}.jsonl.gz")
        assert records and all(r["_id"].startswith(ann) for r in records)
        assert len(records) == await store.database[name].count_documents(
            {"tenant": "acme", "_id": {"$gt": ann, "$lt": ann[:-1] + "0"}}
        )
    assert manifest.counts[AGENTS] == 1 and manifest.counts[POLICIES] == 0
    await verify(tmp_path / "ann")
    assert (await backup(store, tmp_path / "tasks", task_ids=["acme/t1"])).format_version == 1


async def test_an_incremental_backup_holds_the_threads_active_since_whole(
    store: Any, tmp_path: Path
) -> None:
    await plant(store, "acme")
    await asyncio.sleep(0.01)  # a backup since a time includes its millisecond
    since = dt.datetime.now(dt.UTC)
    quiet = await backup(store, tmp_path / "quiet", tenant="acme", since=since)
    assert quiet.format_version == 1  # no thread, agent or policy changed since
    await turn(store.scoped("acme", owner="ann"), MARK, 2)
    manifest = await backup(store, tmp_path / "since", tenant="acme", since=since)
    ann = prefix_of("acme", "ann", thread_of("ann"))
    checkpoints = read_file_records(tmp_path / "since" / f"{LANGGRAPH_CHECKPOINTS}.jsonl.gz")
    assert {r["_id"][: len(ann)] for r in checkpoints} == {ann}
    assert manifest.counts[LANGGRAPH_CHECKPOINTS] == await store.database[
        LANGGRAPH_CHECKPOINTS
    ].count_documents({"tenant": "acme", "o": "ann"})  # the whole thread, its older checkpoints too
    await verify(tmp_path / "since")


def _forge(path: Path, name: str, change: Any) -> None:
    records = read_file_records(path / f"{name}.jsonl.gz")
    rewrite_file(path, name, change(records))


FORGERIES = {
    "checkpoint moved to another owner":
        (LANGGRAPH_CHECKPOINTS, lambda rs: [{**rs[0], "o": "mallory"}, *rs[1:]]),
    "checkpoint of another tenant's key":
        (LANGGRAPH_CHECKPOINTS, lambda rs: [{**rs[0], "_id": "beta" + rs[0]["_id"][4:]}, *rs[1:]]),
    "checkpoint without its bytes":
        (LANGGRAPH_CHECKPOINTS, lambda rs: [{**rs[0], "c": "x"}, *rs[1:]]),
    "write twice": (LANGGRAPH_WRITES, lambda rs: [rs[0], *rs]),
    "write item malformed":
        (LANGGRAPH_WRITES, lambda rs: [{**rs[0], "w": [["0", "c", "t", b""]]}, *rs[1:]]),
    "blob without a channel":
        (LANGGRAPH_BLOBS, lambda rs: [{**rs[0], "_id": rs[0]["_id"].split("~")[0]}, *rs[1:]]),
    "agent of another tenant": (AGENTS, lambda rs: [{**rs[0], "_id": "beta/ann"}]),
    "agent active on no alias": (AGENTS, lambda rs: [{**rs[0], "active_alias": "nowhere"}]),
    "policy keeping nothing":
        (POLICIES, lambda rs: [{**rs[0], "retention": {**rs[0]["retention"], "max_age_days": 0}}]),
    "policy of another tenant": (POLICIES, lambda rs: [{**rs[0], "_id": "beta"}]),
}  # fmt: skip


@pytest.mark.parametrize("forgery", FORGERIES)
async def test_verify_refuses_a_forged_thread_agent_or_policy_record(
    store: Any, tmp_path: Path, forgery: str
) -> None:
    await plant(store, "acme")
    await backup(store, tmp_path / "b", tenant="acme")
    name, change = FORGERIES[forgery]
    _forge(tmp_path / "b", name, change)
    with pytest.raises(BackupCorrupt):
        await verify(tmp_path / "b")
    empty = await mindstore.connect("embedded")  # nothing is written by a refused restore
    try:
        with pytest.raises(BackupCorrupt):
            await restore(empty, tmp_path / "b")
        assert await empty.database[name].count_documents({}) == 0
    finally:
        await empty.close()


async def test_verify_refuses_another_owners_units_in_an_owners_backup(
    store: Any, tmp_path: Path
) -> None:
    await plant(store, "acme")
    await backup(store, tmp_path / "ann", tenant="acme", owner="ann")
    tenant_writes = await store.database[LANGGRAPH_WRITES].find(
        {"tenant": "acme", "_id": {"$gt": "acme/t1/", "$lt": "acme/t10"}}).to_list()  # fmt: skip
    _forge(tmp_path / "ann", LANGGRAPH_WRITES, lambda rs: [*rs, tenant_writes[0]])
    with pytest.raises(BackupCorrupt, match="outside the backup's scope"):
        await verify(tmp_path / "ann")
    await backup(store, tmp_path / "ann2", tenant="acme", owner="ann")
    policy = await store.database[POLICIES].find_one({"_id": "acme"})
    _forge(tmp_path / "ann2", POLICIES, lambda rs: [policy])
    with pytest.raises(BackupCorrupt, match="outside the backup's scope"):
        await verify(tmp_path / "ann2")


# ----------------------------------------------------------------------------- retention


async def test_retention_keeps_a_live_thread_whole_and_expires_an_idle_one(store: Any) -> None:
    await plant(store, "acme")
    db = store.database
    old = dt.datetime(2001, 1, 1, tzinfo=dt.UTC)
    await db["tasks"].update_many({"tenant": "acme"}, {"$set": {"updated_at": old}})
    live = await erase_before(store, "acme", before=dt.timedelta(hours=1))
    # the threads' checkpoints are new: their messages tasks stay, though older than the cut-off
    thread_tasks = {
        t["_id"] for t in await db["tasks"].find({"metadata.integration": "langgraph"}).to_list()
    }
    assert len(thread_tasks) == 2 and {f"acme/{i}" for i in live.kept_with_threads} == thread_tasks
    assert not any(name in live.counts for name in SAVER)
    assert live.counts["tasks"] == 3  # the two sessions and the agent's dialog
    assert await tuples(store, "acme", "ann") != (None, [])

    idle = await erase_before(store, "acme", before=dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    assert all(idle.counts[name] > 0 for name in SAVER) and idle.counts["tasks"] == 2
    assert idle.counts[AGENTS] == 1  # unchanged since the cut-off, and its dialog is gone
    left = await everything(db)
    assert holding(left, MARK) == {} and {n for n, docs in left.items() if docs} == {POLICIES}


async def test_a_thread_written_during_the_sweep_is_kept(store: Any, monkeypatch: Any) -> None:
    """The thread is found idle, then a graph step writes to it before its documents are
    listed for deletion: the activity check on that list keeps it whole."""
    from mindstore.backup import retention_units

    await plant(store, "acme")
    await asyncio.sleep(0.01)
    cutoff = dt.datetime.now(dt.UTC)
    listing = retention_units.thread_documents
    stepped: list[str] = []

    async def step_first(db: Any, tenant: str, prefixes: Any) -> Any:
        if not stepped:  # one step on each thread, before the first thread is listed
            for owner in ("ann", None):
                await turn(store.scoped("acme", owner=owner), MARK, 5)
            stepped.append("done")
        return await listing(db, tenant, prefixes)

    monkeypatch.setattr(retention_units, "thread_documents", step_first)
    receipt = await erase_before(store, "acme", before=cutoff)
    assert not any(name in receipt.counts for name in SAVER)
    assert len(receipt.kept_with_threads) == 2
    latest, history = await tuples(store, "acme", "ann")
    assert len(latest.checkpoint["channel_values"]["messages"]) == 6 and len(history) == 9


async def test_retention_keeps_an_agent_whose_dialog_lives(store: Any) -> None:
    await plant(store, "acme")
    receipt = await erase_before(store, "acme", before=dt.timedelta(hours=1), owner="ann")
    assert AGENTS not in receipt.counts and receipt.counts["tasks"] == 0
    dry = await erase_before(store, "acme", before=dt.datetime.now(dt.UTC) + dt.timedelta(days=1),
                             owner="ann", dry_run=True)  # fmt: skip
    assert dry.counts[AGENTS] == 1 and dry.counts[LANGGRAPH_CHECKPOINTS] > 0
    assert await store.database[AGENTS].count_documents({}) == 1  # a dry run deletes nothing


def test_a_checkpoint_id_gives_its_time() -> None:
    from langgraph.checkpoint.base.id import uuid6

    now = dt.datetime.now(dt.UTC)
    moment = checkpoint_time(str(uuid6(clock_seq=3)))
    assert moment is not None and abs((moment - now).total_seconds()) < 5
    assert checkpoint_time("not-a-uuid") is None
    assert checkpoint_time("0c2f2b5e-6a1b-4c1e-9a77-0d2b6f1b9a10") is None  # version 4


# ----------------------------------------------------------------------------- redaction


async def test_redaction_reaches_the_messages_channel_and_erase_the_state_blobs(store: Any) -> None:
    """A thread's messages are tasks: a redacted message reads back redacted from every
    checkpoint. Other channel values are the graph's serialized state, opaque to mindstore:
    redaction does not reach them; erasing the thread (or retention) does."""
    await plant(store, "acme")
    acme = store.scoped("acme")
    await acme.tasks.redact("t1", "h0", reason="request")
    latest, history = await tuples(store, "acme", None)
    first = [
        m
        for t in history
        for m in t.checkpoint["channel_values"].get("messages", [])
        if m.id == "h0"
    ]
    assert len(first) == len(history) - 1 and all(m.content == "" for m in first)  # every step
    # the graph's input and the nodes' writes were compacted into references to the task:
    # no saver document holds a copy of the redacted text
    dump = await everything(store.database)
    assert holding({name: dump[name] for name in SAVER}, f"my id is {MARK} (0)") == {}
    assert f"{MARK} (1)" in json.dumps(
        [m.content for m in latest.checkpoint["channel_values"]["messages"]]
    )
    assert latest.checkpoint["channel_values"]["profile"]["id"] == MARK  # state: not redacted
    await erase(store, "acme", task_id="t1")
    thread = prefix_of("acme", None, "t1")
    left = [d for name in SAVER
            for d in await store.database[name].find({"tenant": "acme"}).to_list()
            if d["_id"].startswith(thread)]  # fmt: skip
    assert left == []
