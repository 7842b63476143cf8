"""Per-tenant encryption of what the integrations store (docs/encryption.md, "Integration
data"): LangGraph checkpoints, writes and blobs driven by real graphs, ADK sessions driven by
a Runner, the session-style adapters; raw scans of the database and of backups (with
plaintext controls), exact reads and resumes, moved ciphertexts, rotation and the sweep,
shredding."""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from google.adk.agents.llm_agent import LlmAgent
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from mindstore.backup import backup, erase, restore, verify
from mindstore.collection_names import (
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
)
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.crypto.aead import is_sealed, key_version
from mindstore.crypto.integration_fields import open_fields, seal_fields, stale_values
from mindstore.crypto.integration_sweep import reencrypt_integrations
from mindstore.crypto.keys import TenantKeys
from mindstore.crypto.sealed_collection import sealed_collection
from mindstore.errors import CryptoError, KeyShredded
from mindstore.integrations.adk import MindstoreSessionService
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.store import Store
from test_adk import ScriptedModel as AdkModel
from test_adk import call, shape, text
from test_integration_langgraph import ScriptedModel, history, search

SECRET = "SECRET"
LANGGRAPH = (LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES, LANGGRAPH_BLOBS)
TASKS = ("tasks", "task_pages", "payloads")
Factory = Callable[..., Awaitable[Store]]


def keyring() -> Keyring:
    return Keyring(LocalMasterKey(os.urandom(32)))


def strings(value: Any) -> list[str]:
    """Every string, key and clear byte string in a stored value (ciphertexts skipped)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes) and not is_sealed(value):
        return [value.decode("latin-1")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


async def leaks(store: Store, names: tuple[str, ...] = LANGGRAPH + TASKS) -> dict[str, int]:
    """How many stored strings hold the marker, per collection (only those that do)."""
    found: dict[str, int] = {}
    for name in names:
        async for document in store.database[name].find({}):
            count = sum(SECRET in s for s in strings(document))
            if count:
                found[name] = found.get(name, 0) + count
    return found


def sealed_versions(value: Any) -> list[int]:
    if is_sealed(value):
        return [key_version(value)]
    if isinstance(value, dict):
        return [v for item in value.values() for v in sealed_versions(item)]
    if isinstance(value, list):
        return [v for item in value for v in sealed_versions(item)]
    return []


async def versions(store: Store, names: tuple[str, ...] = LANGGRAPH) -> set[int]:
    found: set[int] = set()
    for name in names:
        async for document in store.database[name].find({}):
            found.update(sealed_versions(document))
    return found


# -- a LangGraph graph: tools, a long and a short state value, an interrupt ------------------


class NotesState(MessagesState):
    notes: str
    tag: str


def note(state: NotesState) -> dict[str, Any]:
    """A long value (a blob) and a short one (inline in the checkpoint), both secret."""
    asked = str(state["messages"][-1].content)
    return {"notes": f"{SECRET} notes on {asked} " + "x" * 80, "tag": f"{SECRET}{len(asked)}"}


def approve(state: NotesState) -> dict[str, Any]:
    answer = interrupt({"question": f"{SECRET} may I use the tool result?"})
    return {"tag": f"{SECRET}-{answer}"[:20]}


def notes_graph(checkpointer: Any) -> Any:
    builder = StateGraph(NotesState)
    builder.add_node("note", note)
    builder.add_node("agent", ScriptedModel())
    builder.add_node("tools", ToolNode([search]))
    builder.add_node("approve", approve)
    builder.add_edge(START, "note")
    builder.add_edge("note", "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "approve")
    builder.add_edge("approve", "agent")
    return builder.compile(checkpointer=checkpointer)


class OnlyNotes(TypedDict):
    notes: str


def notes_only(checkpointer: Any) -> Any:
    """A graph without messages: its state lives in the saver's documents alone."""
    builder = StateGraph(OnlyNotes)
    builder.add_node("more", lambda state: {"notes": state["notes"] + " and " + "y" * 70})
    builder.add_edge(START, "more")
    return builder.compile(checkpointer=checkpointer)


def config_of(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "metadata": {"note": f"{SECRET} meta"}}


async def talk(graph: Any, thread: str, questions: list[str]) -> None:
    """Each question through the graph, every interrupt answered."""
    config = config_of(thread)
    for i, question in enumerate(questions):
        asked = f"{SECRET} {question}"
        await graph.ainvoke({"messages": [HumanMessage(asked, id=f"{thread}-{question[:-1]}")]},
                            config)  # fmt: skip
        while (await graph.aget_state(config)).next:
            await graph.ainvoke(Command(resume=f"ok{i}"), config)


QUESTIONS = ["billing?", "refunds?"]


async def graph_on(store: Store, thread: str = "t1", questions: list[str] = QUESTIONS,
                   tenant: str = "acme") -> Any:  # fmt: skip
    graph = notes_graph(MindstoreSaver(store.scoped(tenant)))
    await talk(graph, thread, questions)
    return graph


# -- LangGraph: what is stored ------------------------------------------------------------


async def test_langgraph_documents_and_backups_hold_no_plaintext(
    store_factory: Factory, tmp_path: Path
) -> None:
    sealed = await store_factory(keyring=keyring())
    plain = await store_factory()
    graphs = [await graph_on(sealed), await graph_on(plain)]
    # the control: without a keyring every collection of the saver holds the marker
    control = await leaks(plain)
    assert all(control.get(name, 0) > 0 for name in LANGGRAPH), control
    assert await leaks(sealed) == {}
    # what the server reads stays clear: ids, metadata bookkeeping, channel names, refs
    raw = await sealed.database[LANGGRAPH_CHECKPOINTS].find({"tenant": "acme"}).to_list(None)
    assert raw and all(doc["md"]["source"] in ("input", "loop") for doc in raw)
    assert all(isinstance(doc["md"]["step"], int) and is_sealed(doc["md"]["note"]) for doc in raw)
    assert any(doc.get("iv", {}).get("tag") for doc in raw)  # a short value: inline, sealed
    assert all(is_sealed(doc["iv"]["tag"][1]) for doc in raw if "tag" in doc.get("iv", {}))
    assert any("notes" in doc.get("b", {}) for doc in raw)  # a long value: a blob, sealed
    writes = await sealed.database[LANGGRAPH_WRITES].find({}).to_list(None)
    assert any(item[1] == "__interrupt__" and is_sealed(item[3]) for w in writes for item in w["w"])
    # the same conversation reads back
    config = config_of("t1")
    assert await history(graphs[0], config) == await history(graphs[1], config)
    # a backup holds ciphertexts only, verifies without keys, and restores
    await backup(sealed, tmp_path / "sealed")
    await backup(plain, tmp_path / "plain")
    for folder, expect_leak in (("sealed", False), ("plain", True)):
        files = {f.name: gzip.decompress(f.read_bytes()).decode()
                 for f in (tmp_path / folder).rglob("*.gz")}  # fmt: skip
        langgraph_files = [name for name in files if name.startswith("langgraph_")]
        assert len(langgraph_files) == 3
        assert any(SECRET in files[name] for name in langgraph_files) is expect_leak, folder
        assert any(SECRET in body for body in files.values()) is expect_leak
    report = await verify(tmp_path / "sealed")
    assert report.counts[LANGGRAPH_CHECKPOINTS] == len(raw)
    before = await history(graphs[0], config)
    await MindstoreSaver(sealed.scoped("acme")).adelete_thread("t1")
    assert await sealed.database[LANGGRAPH_CHECKPOINTS].count_documents({}) == 0
    await restore(sealed, tmp_path / "sealed")
    assert await history(notes_graph(MindstoreSaver(sealed.scoped("acme"))), config) == before


async def test_langgraph_reads_resumes_and_admin_verbs_match_a_plaintext_store(
    store_factory: Factory,
) -> None:
    sealed = await store_factory(keyring=keyring())
    plain = await store_factory()
    reference = InMemorySaver()
    savers = [MindstoreSaver(sealed.scoped("acme")), MindstoreSaver(plain.scoped("acme"))]
    for checkpointer in (*savers, reference):
        await talk(notes_graph(checkpointer), "t1", QUESTIONS[:1])
    # another process (its own key cache, a fresh saver) resumes the sealed thread
    other = Store(sealed.backend, keyring=sealed.keyring)
    resumed = [notes_graph(MindstoreSaver(other.scoped("acme"))),
               notes_graph(MindstoreSaver(plain.scoped("acme"))),
               notes_graph(reference)]  # fmt: skip
    for graph in resumed:
        await talk(graph, "t1", QUESTIONS[1:])
    config = config_of("t1")
    got = [await history(graph, config) for graph in resumed]
    assert got[0] == got[1] == got[2]
    state = await resumed[0].aget_state(config)
    assert state.values["notes"].startswith(f"{SECRET} notes on ")
    assert state.values["tag"].startswith(SECRET)
    # filters: a sealed metadata value is matched after opening, a clear one on the server
    for wanted in ({"note": f"{SECRET} meta"}, {"source": "loop"}, {"note": "other"}):
        counts = [len([t async for t in s.alist(config, filter=wanted)]) for s in savers]
        assert counts[0] == counts[1], wanted
    assert len([t async for t in savers[0].alist(None, filter={"note": f"{SECRET} meta"})]) > 0
    # copy (re-sealed under the copy's ids), prune and delete work on sealed documents
    for saver in savers:
        await saver.acopy_thread("t1", "t2")
    copies = [await history(notes_graph(s), config_of("t2")) for s in savers]
    assert copies[0] == copies[1] and len(copies[0]) == len(got[0])
    assert await leaks(sealed) == {}
    for saver in savers:
        await saver.aprune(["t2"])
    pruned = [await history(notes_graph(s), config_of("t2")) for s in savers]
    assert pruned[0] == pruned[1] and len(pruned[0]) == 1


async def test_the_sync_forms_seal_and_open_from_a_worker_thread(store_factory: Factory) -> None:
    store = await store_factory(keyring=keyring())
    graph = notes_graph(MindstoreSaver(store.scoped("acme")))
    config = config_of("sync")
    asked = {"messages": [HumanMessage(f"{SECRET} sync?", id="s1")]}
    await asyncio.to_thread(graph.invoke, asked, config)
    states = await asyncio.to_thread(lambda: list(graph.get_state_history(config)))
    assert states[0].next == ("approve",)
    assert states[0].values["tag"] == f"{SECRET}{len(SECRET) + 6}"
    await asyncio.to_thread(graph.invoke, Command(resume="yes"), config)
    assert (await graph.aget_state(config)).values["tag"] == "SECRET-yes"
    assert await leaks(store) == {} and await versions(store) == {1}


def test_the_sync_forms_seal_in_a_script_without_a_loop() -> None:
    import mindstore

    store = asyncio.run(mindstore.connect("embedded", keyring=keyring()))
    graph = notes_graph(MindstoreSaver(store.scoped("acme")))
    config = config_of("script")
    graph.invoke({"messages": [HumanMessage(f"{SECRET} script", id="s1")]}, config)
    graph.invoke(Command(resume="fine"), config)
    assert graph.get_state(config).values["tag"] == "SECRET-fine"
    assert asyncio.run(leaks(store)) == {}
    asyncio.run(store.close())


async def test_the_conformance_suite_passes_on_a_keyring_store(store_factory: Factory) -> None:
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    store = await store_factory(keyring=keyring())

    @checkpointer_test(name="MindstoreSaver+keyring")
    async def factory():  # type: ignore[no-untyped-def]
        yield MindstoreSaver(store.scoped(f"conf{os.urandom(3).hex()}"))

    report = await validate(factory)
    assert report.passed_all(), report.to_dict()
    results = report.to_dict()["results"].values()
    assert sum(r["tests_passed"] for r in results) >= 81
    assert await versions(store) == {1}  # it ran sealed


# -- LangGraph: moved and changed ciphertexts ---------------------------------------------


async def _refused(store: Store, collection: str, doc_id: str, change: dict[str, Any],
                   read: Callable[[MindstoreSaver], Awaitable[Any]]) -> None:  # fmt: skip
    """`change` applied to a stored document makes `read` raise CryptoError (on a fresh
    saver and key cache); the document is put back and reads again."""
    raw = store.database[collection]
    before = await raw.find_one({"_id": doc_id})
    await raw.update_one({"_id": doc_id, "tenant": before["tenant"]}, {"$set": change})
    fresh = Store(store.backend, keyring=store.keyring)
    with pytest.raises(CryptoError, match="was not sealed there"):
        await read(MindstoreSaver(fresh.scoped(before["tenant"])))
    await raw.update_one({"_id": doc_id, "tenant": before["tenant"]},
                         {"$set": {k: before[k] for k in change}})  # fmt: skip
    await read(MindstoreSaver(fresh.scoped(before["tenant"])))


async def test_a_moved_or_changed_ciphertext_is_refused(store_factory: Factory) -> None:
    store = await store_factory(keyring=keyring())
    await graph_on(store, "t1")
    await graph_on(store, "t1", tenant="globex")
    checkpoints = await store.database[LANGGRAPH_CHECKPOINTS].find(
        {"tenant": "acme"}).sort("_id", 1).to_list(None)  # fmt: skip
    first, second = checkpoints[1], checkpoints[2]

    async def latest(saver: MindstoreSaver) -> Any:
        return [t async for t in saver.alist(config_of("t1"))]

    # a checkpoint's serialized checkpoint from another checkpoint of the thread
    await _refused(store, LANGGRAPH_CHECKPOINTS, first["_id"], {"c": second["c"]}, latest)
    # the same bytes given another serde type
    retyped = {"c": ["json", first["c"][1]]}
    await _refused(store, LANGGRAPH_CHECKPOINTS, first["_id"], retyped, latest)
    # a sealed metadata value and the message fingerprint from another checkpoint
    await _refused(store, LANGGRAPH_CHECKPOINTS, first["_id"], {"md": second["md"]}, latest)
    await _refused(store, LANGGRAPH_CHECKPOINTS, first["_id"],
                   {"ms": {**first["ms"], "h": second["ms"]["h"]}}, latest)  # fmt: skip
    # an inline value moved to another channel
    holder = next(doc for doc in checkpoints if "tag" in doc.get("iv", {}))
    await _refused(store, LANGGRAPH_CHECKPOINTS, holder["_id"],
                   {"iv": {**holder["iv"], "other": holder["iv"]["tag"]}}, latest)  # fmt: skip
    # a blob's value from another blob
    blobs = await store.database[LANGGRAPH_BLOBS].find({"tenant": "acme"}).to_list(None)
    notes = [b for b in blobs if b["_id"].endswith("~notes")]
    assert len(notes) >= 2
    await _refused(store, LANGGRAPH_BLOBS, notes[0]["_id"], {"b": notes[1]["b"]}, latest)
    # a pending write's value under another channel
    writes = await store.database[LANGGRAPH_WRITES].find({"tenant": "acme"}).to_list(None)
    doc = next(w for w in writes if any(is_sealed(item[3]) for item in w["w"]))
    items = [list(item) for item in doc["w"]]
    victim = next(item for item in items if is_sealed(item[3]))
    victim[1] = "elsewhere"
    await _refused(store, LANGGRAPH_WRITES, doc["_id"], {"w": items}, latest)
    # another tenant's checkpoint under this tenant's key: the tenant is bound too
    theirs = (await store.database[LANGGRAPH_CHECKPOINTS].find(
        {"tenant": "globex"}).sort("_id", 1).to_list(None))[1]  # fmt: skip
    await _refused(store, LANGGRAPH_CHECKPOINTS, first["_id"], {"c": theirs["c"]}, latest)


# -- LangGraph: rotation, the sweep, shredding --------------------------------------------


async def test_rotation_then_the_sweep_reseals_every_integration_document(
    store_factory: Factory,
) -> None:
    store = await store_factory(keyring=keyring())
    assert store.keyring is not None
    graph = await graph_on(store, "t1", QUESTIONS[:1])
    config = config_of("t1")
    early = notes_graph(MindstoreSaver(Store(store.backend, keyring=store.keyring).scoped("acme")))
    await history(early, config)  # another process: its key cache holds version 1 only
    assert await store.keyring.rotate("acme") == 2
    await talk(graph, "t1", QUESTIONS[1:])
    assert await versions(store) == {1, 2}  # old documents keep key 1, new ones use 2
    before = await history(graph, config)
    assert await history(early, config) == before  # it meets version 2 and reads the keys
    swept = await store.keyring.reencrypt("acme")
    assert swept.values_sealed > 0
    assert await versions(store) == {2}
    assert await versions(store, TASKS) == {2}
    fresh = Store(store.backend, keyring=store.keyring)
    assert await history(notes_graph(MindstoreSaver(fresh.scoped("acme"))), config) == before
    # idempotent: nothing is left to re-seal
    keys = await store.keyring.keys("acme")
    assert await reencrypt_integrations(store.database, keys) == 0


async def test_a_plaintext_thread_is_sealed_by_the_sweep_even_after_a_crash(
    store_factory: Factory,
) -> None:
    plain = await store_factory()
    await graph_on(plain, "t1")
    await graph_on(plain, "t2")
    config = config_of("t1")
    expected = await history(notes_graph(MindstoreSaver(plain.scoped("acme"))), config)
    store = Store(plain.backend, keyring=keyring())
    assert store.keyring is not None
    graph = notes_graph(MindstoreSaver(store.scoped("acme")))
    assert await history(graph, config) == expected  # plaintext reads as it is
    leaked = await leaks(store, LANGGRAPH)
    assert leaked

    class Crash(Exception):
        pass

    keys = await store.keyring.keys("acme", create=True)
    with pytest.raises(Crash):
        await reencrypt_integrations(Crashing(store.database, after=5, error=Crash), keys)
    assert 0 < sum((await leaks(store, LANGGRAPH)).values()) < sum(leaked.values())
    assert await history(graph, config) == expected  # half sealed reads the same
    await store.keyring.reencrypt("acme")
    assert await leaks(store) == {}
    assert await history(notes_graph(MindstoreSaver(store.scoped("acme"))), config) == expected
    for name in LANGGRAPH:  # every sealable value is sealed with the current key
        async for document in store.database[name].find({}):
            assert stale_values(name, document, 1) == 0


class Crashing:
    """A database whose updates fail after `after` of them (a sweep killed midway), or
    that runs `before(doc_id)` once ahead of the first update of `collection` (a writer
    racing the sweep on the document it is about to rewrite)."""

    def __init__(self, database: Any, *, after: int = 10**9, error: type[Exception] = RuntimeError,
                 before: Callable[[str], Awaitable[None]] | None = None,
                 collection: str = "") -> None:  # fmt: skip
        self.database, self.after, self.error = database, after, error
        self.before, self.collection = before, collection

    def __getitem__(self, name: str) -> Any:
        owner = self
        raw = self.database[name]

        class Collection:
            def find(self, *args: Any) -> Any:
                return raw.find(*args)

            async def find_one(self, *args: Any) -> Any:
                return await raw.find_one(*args)

            async def update_one(self, filter: Any, *args: Any, **kwargs: Any) -> Any:
                if owner.after <= 0:
                    raise owner.error
                owner.after -= 1
                if owner.before is not None and name == owner.collection:
                    before, owner.before = owner.before, None
                    await before(filter["_id"])
                return await raw.update_one(filter, *args, **kwargs)

        return Collection()


@pytest.mark.parametrize("collection", LANGGRAPH)
async def test_the_sweep_never_loses_a_write_made_while_it_reseals(
    store_factory: Factory, collection: str
) -> None:
    """A writer changes the very document the sweep has read and is about to rewrite: the
    sweep's guard sees it, reads again, and the change survives, sealed with the new key."""
    store = await store_factory(keyring=keyring())
    assert store.keyring is not None
    saver = MindstoreSaver(store.scoped("acme"))
    await talk(notes_graph(saver), "t1", QUESTIONS[:1])
    latest = await saver.aget_tuple(config_of("t1"))
    assert latest is not None
    await store.database[LANGGRAPH_WRITES].delete_many({"tenant": "acme"})
    await saver.aput_writes(latest.config, [("a", f"{SECRET} one")], "task-1")
    if collection == LANGGRAPH_BLOBS:  # the notes blobs only: a change keeps their type
        await store.database[LANGGRAPH_BLOBS].delete_many({"tenant": "acme", "t": "@refmap"})
    await store.keyring.rotate("acme")
    other = MindstoreSaver(Store(store.backend, keyring=store.keyring).scoped("acme"))
    changed: dict[str, Any] = {}

    async def racing_writer(doc_id: str) -> None:
        if collection == LANGGRAPH_WRITES:  # a second write of the task
            await other.aput_writes(latest.config, [("a", f"{SECRET} one"),
                                                    ("b", f"{SECRET} two")], "task-1")  # fmt: skip
        elif collection == LANGGRAPH_CHECKPOINTS:  # the checkpoint put again, new metadata
            at = {"configurable": {"thread_id": "t1", "checkpoint_ns": "",
                                   "checkpoint_id": doc_id.rsplit("/", 1)[1]}}  # fmt: skip
            stored = await other.aget_tuple(at)
            assert stored is not None
            parent = stored.parent_config or {"configurable": {"thread_id": "t1"}}
            metadata = {**stored.metadata, "note": f"{SECRET} changed"}
            await other.aput(parent, stored.checkpoint, metadata, {})  # type: ignore[arg-type]
            changed["config"] = at
        else:  # the blob's bytes replaced, its type kept
            kind, data = other.serde.dumps_typed(f"{SECRET} changed")
            assert kind == "msgpack"
            await other._storage.blobs.update_one({"_id": doc_id, "tenant": "acme", "t": kind},
                                          {"$set": {"t": kind, "b": data}})  # fmt: skip
            changed["blob"] = doc_id

    keys = await store.keyring.keys("acme")
    racing = Crashing(store.database, before=racing_writer, collection=collection)
    await reencrypt_integrations(racing, keys)
    assert await versions(store) == {2}
    reader = MindstoreSaver(Store(store.backend, keyring=store.keyring).scoped("acme"))
    if collection == LANGGRAPH_WRITES:
        got = await reader.aget_tuple(latest.config)
        assert got is not None
        written = [(channel, value) for _, channel, value in got.pending_writes]
        assert written == [("a", f"{SECRET} one"), ("b", f"{SECRET} two")]
    elif collection == LANGGRAPH_CHECKPOINTS:
        got = await reader.aget_tuple(changed["config"])
        assert got is not None and got.metadata["note"] == f"{SECRET} changed"
    else:
        raw = await store.database[LANGGRAPH_BLOBS].find_one({"_id": changed["blob"]})
        opened = await reader._storage.blobs.opened([raw])
        assert reader.serde.loads_typed((opened[0]["t"], opened[0]["b"])) == f"{SECRET} changed"


async def test_a_sweep_and_graphs_running_at_once_lose_nothing(store_factory: Factory) -> None:
    """The sweep in one store while two graphs write in others (their own key caches and
    savers), all at once; then every value reads as on a plaintext store, sealed with the
    newest key after one more sweep."""
    ring = keyring()
    store = await store_factory(keyring=ring)
    plain = await store_factory()
    assert store.keyring is not None
    for thread in ("a", "b"):
        await graph_on(store, thread, QUESTIONS[:1])
        await graph_on(plain, thread, QUESTIONS[:1])
    await store.keyring.rotate("acme")
    writers = [Store(store.backend, keyring=store.keyring) for _ in range(2)]
    await asyncio.gather(
        store.keyring.reencrypt("acme"),
        *(talk(notes_graph(MindstoreSaver(w.scoped("acme"))), thread, QUESTIONS[1:])
          for w, thread in zip(writers, ("a", "b"), strict=True)),
    )  # fmt: skip
    for thread in ("a", "b"):
        await talk(notes_graph(MindstoreSaver(plain.scoped("acme"))), thread, QUESTIONS[1:])
    await store.keyring.reencrypt("acme")
    assert await versions(store) == {2}
    for thread in ("a", "b"):
        got = [await history(notes_graph(MindstoreSaver(s.scoped("acme"))), config_of(thread))
               for s in (store, plain)]  # fmt: skip
        assert got[0] == got[1]


async def test_shred_makes_threads_and_their_backups_unreadable(
    store_factory: Factory, tmp_path: Path
) -> None:
    ring = keyring()
    store = await store_factory(keyring=ring)
    assert store.keyring is not None
    graph = await graph_on(store, "t1", QUESTIONS[:1])
    other = await graph_on(store, "t1", QUESTIONS[:1], tenant="globex")
    bare = notes_only(MindstoreSaver(store.scoped("acme")))
    only = {"configurable": {"thread_id": "n1"}}
    await bare.ainvoke({"notes": f"{SECRET} start"}, only)
    await backup(store, tmp_path / "before")
    await store.keyring.shred("acme")
    config = config_of("t1")
    saver = MindstoreSaver(store.scoped("acme"))
    # what only the saver's documents hold is refused too (not only the messages tasks)
    for bare_read in (bare.aget_state(only), bare.ainvoke({"notes": "again"}, only)):
        with pytest.raises(KeyShredded):
            await bare_read
    for read in (saver.aget_tuple(config), graph.aget_state(config), history(graph, config)):
        with pytest.raises(KeyShredded):
            await read
    with pytest.raises(KeyShredded):
        await graph.ainvoke({"messages": [HumanMessage("more", id="m")]}, config)
    assert (await other.aget_state(config)).values["tag"] == "SECRET-ok0"  # globex untouched
    # the backup written before: restored into the database, still unreadable
    await store.database[LANGGRAPH_CHECKPOINTS].delete_many({"tenant": "acme"})
    await restore(store, tmp_path / "before")
    assert await store.database[LANGGRAPH_CHECKPOINTS].count_documents({"tenant": "acme"}) > 0
    with pytest.raises(KeyShredded):
        await MindstoreSaver(store.scoped("acme")).aget_tuple(config)
    # restored elsewhere, even under the same master key: no data key exists there
    elsewhere = await store_factory(keyring=ring)
    await restore(elsewhere, tmp_path / "before")
    with pytest.raises(CryptoError):
        await MindstoreSaver(elsewhere.scoped("acme")).aget_tuple(config)
    # the saver cannot delete a shredded thread (it reads sealed fields); erase can
    with pytest.raises(KeyShredded):
        await saver.adelete_thread("t1")
    await erase(store, "acme")
    for name in LANGGRAPH:
        assert await store.database[name].count_documents({"tenant": "acme"}) == 0
    assert await store.database[LANGGRAPH_CHECKPOINTS].count_documents({"tenant": "globex"}) > 0


# -- ADK -----------------------------------------------------------------------------------

APP = "trips"


def remember(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remembers the user's city (user state), the app's motto and a session note."""
    tool_context.state["user:city"] = city
    tool_context.state["app:motto"] = f"{SECRET} motto"
    tool_context.state["note"] = f"{SECRET} session note"
    return {"ok": f"{SECRET} remembered"}


SCRIPT = [call("remember", {"city": f"{SECRET}-Lisbon"}),
          text(f"{SECRET}: noted.", thought=f"{SECRET} the user lives there")]  # fmt: skip


async def adk_run(store: Store) -> tuple[MindstoreSessionService, str]:
    service = MindstoreSessionService(store.scoped("acme"))
    agent = LlmAgent(name="planner", model=AdkModel(model="scripted", script=list(SCRIPT)),
                     tools=[remember], instruction="help")  # fmt: skip
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    session = await service.create_session(app_name=APP, user_id="alice",
                                           state={"opening": f"{SECRET} opening"})  # fmt: skip
    message = types.Content(role="user", parts=[types.Part(text=f"{SECRET} I live in Lisbon")])
    async for _event in runner.run_async(
        user_id="alice", session_id=session.id, new_message=message
    ):
        pass
    return service, session.id


async def adk_view(service: MindstoreSessionService, session_id: str) -> dict[str, Any]:
    got = await service.get_session(app_name=APP, user_id="alice", session_id=session_id)
    assert got is not None
    listed = await service.list_sessions(app_name=APP, user_id="alice")
    return {"events": [shape(e) for e in got.events], "state": got.state,
            "listed": [s.state for s in listed.sessions],
            "user": await service.get_user_state(app_name=APP, user_id="alice")}  # fmt: skip


async def test_adk_sessions_and_shared_state_are_sealed_and_read_exactly(
    store_factory: Factory, tmp_path: Path
) -> None:
    sealed = await store_factory(keyring=keyring())
    plain = await store_factory()
    runs = [await adk_run(sealed), await adk_run(plain)]
    views = [await adk_view(*run) for run in runs]
    assert views[0] == views[1]
    assert views[0]["state"]["user:city"] == f"{SECRET}-Lisbon"
    assert views[0]["state"]["app:motto"] == f"{SECRET} motto"
    assert views[0]["state"]["note"] == f"{SECRET} session note"
    assert len(views[0]["events"]) == 4
    # every ADK document is a task (sessions and the app/user registers): nothing else
    assert {n for n in await sealed.database.list_collection_names()
            if await sealed.database[n].count_documents({})} <= {*TASKS, "data_keys"}  # fmt: skip
    assert await leaks(plain, TASKS) and await leaks(sealed, TASKS) == {}
    await backup(sealed, tmp_path / "adk")
    for file in (tmp_path / "adk").rglob("*.gz"):
        assert SECRET not in gzip.decompress(file.read_bytes()).decode(), file.name
    await verify(tmp_path / "adk")
    # rotation and the sweep reach the sessions and registers; reads stay exact
    assert sealed.keyring is not None
    await sealed.keyring.rotate("acme")
    await sealed.keyring.reencrypt("acme")
    assert await versions(sealed, TASKS) == {2}
    fresh = MindstoreSessionService(Store(sealed.backend, keyring=sealed.keyring).scoped("acme"))
    assert await adk_view(fresh, runs[0][1]) == views[0]
    # shredded: every read refuses, and so does the backup restored into the database
    await sealed.keyring.shred("acme")
    service = runs[0][0]
    for read in (service.get_session(app_name=APP, user_id="alice", session_id=runs[0][1]),
                 service.list_sessions(app_name=APP, user_id="alice"),
                 service.get_user_state(app_name=APP, user_id="alice")):  # fmt: skip
        with pytest.raises(KeyShredded):
            await read
    await sealed.database["tasks"].delete_many({"tenant": "acme"})
    await restore(sealed, tmp_path / "adk")
    with pytest.raises(KeyShredded):
        await service.get_session(app_name=APP, user_id="alice", session_id=runs[0][1])


# -- the session-style adapters: only tasks, sealed -----------------------------------------


async def _langchain(store: Store) -> Any:
    from mindstore.integrations.langchain import MindstoreChatMessageHistory

    history_ = MindstoreChatMessageHistory("chat-1", store.scoped("acme"))
    await history_.aadd_messages([HumanMessage(f"{SECRET} hi", id="h1"),
                                  AIMessage(f"{SECRET} hello", id="a1")])  # fmt: skip
    return [m.model_dump() for m in await history_.aget_messages()]


async def _openai_agents(store: Store) -> Any:
    from mindstore.integrations.openai_agents import MindstoreSession

    session = MindstoreSession("chat-1", store.scoped("acme"))
    await session.add_items([
        {"role": "user", "content": f"{SECRET} weather?"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "weather",
         "arguments": f'{{"city": "{SECRET}"}}'},
        {"type": "function_call_output", "call_id": "c1", "output": f"{SECRET} -3C"},
    ])  # fmt: skip
    return await session.get_items()


async def _pydantic_ai(store: Store) -> Any:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from mindstore.integrations.pydantic_ai import load_messages, save_messages

    messages = [ModelRequest(parts=[UserPromptPart(content=f"{SECRET} question")]),
                ModelResponse(parts=[TextPart(content=f"{SECRET} answer")])]  # fmt: skip
    await save_messages(store.scoped("acme"), "chat-1", messages, title=f"{SECRET} title")
    loaded = await load_messages(store.scoped("acme"), "chat-1")
    return [[(type(p).__name__, p.content) for p in m.parts] for m in loaded]


async def _llamaindex(store: Store) -> Any:
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.storage.chat_store.base_db import MessageStatus

    from mindstore.integrations.llamaindex import MindstoreChatStore

    chats = MindstoreChatStore(store.scoped("acme"))
    await chats.add_messages("chat-1", [
        ChatMessage(role="user", content=f"{SECRET} question", additional_kwargs={"note": SECRET}),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="look",
                                                            tool_kwargs={"q": SECRET})]),
        ChatMessage(role="tool", content=f"{SECRET} result",
                    additional_kwargs={"tool_call_id": "c1"}),
        ChatMessage(role="assistant", content=f"{SECRET} answer"),
    ])  # fmt: skip
    await chats.archive_oldest_messages("chat-1", 1)
    await chats.delete_oldest_messages("chat-1", 1)
    return [[m.model_dump(mode="json") for m in await chats.get_messages("chat-1", status=s)]
            for s in (MessageStatus.ACTIVE, MessageStatus.ARCHIVED)]  # fmt: skip


async def _agent_framework(store: Store) -> Any:
    from agent_framework import Content, Message

    from mindstore.integrations.agent_framework import MindstoreHistoryProvider

    provider = MindstoreHistoryProvider(store.scoped("acme"))
    await provider.save_messages("chat-1", [
        Message(role="user", contents=[f"{SECRET} question"],
                additional_properties={"note": SECRET}),
        Message(role="assistant", contents=[Content.from_function_call(call_id="c1", name="look",
                                                                       arguments={"q": SECRET})],
                message_id="r1"),
        Message(role="tool", contents=[Content.from_function_result(call_id="c1",
                                                                    result=f"{SECRET} result")]),
        Message(role="assistant", contents=[Content.from_text_reasoning(text=SECRET),
                                            f"{SECRET} answer"]),
    ])  # fmt: skip
    return [m.to_dict() for m in await provider.get_messages("chat-1")]


@pytest.mark.parametrize(
    "adapter",
    [_langchain, _openai_agents, _pydantic_ai, _llamaindex, _agent_framework],
    ids=["langchain", "openai_agents", "pydantic_ai", "llamaindex", "agent_framework"],
)
async def test_session_adapters_store_only_sealed_tasks(
    store_factory: Factory, adapter: Callable[[Store], Awaitable[Any]]
) -> None:
    sealed = await store_factory(keyring=keyring())
    plain = await store_factory()
    assert await adapter(sealed) == await adapter(plain)
    assert await leaks(plain) and await leaks(sealed) == {}


# -- the pure walk ---------------------------------------------------------------------------


def _keys(version: int = 1) -> TenantKeys:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return TenantKeys("acme", {v: AESGCM(bytes([v]) * 32) for v in range(1, version + 1)})


typed = st.tuples(st.sampled_from(["msgpack", "json", "null"]), st.binary(max_size=40)).map(list)
values = st.one_of(
    st.none(), st.integers(-5, 5), st.text(max_size=12), st.lists(st.text(max_size=5), max_size=3)
)
checkpoints = st.fixed_dictionaries(
    {"_id": st.just("acme/t//c1"), "tenant": st.just("acme"), "c": typed},
    optional={
        "mdb": typed,
        "iv": st.dictionaries(st.sampled_from(["tag", "n", "flag"]), typed, max_size=3),
        "b": st.just({"x": "c0"}),
        "md": st.dictionaries(st.sampled_from(["source", "step", "note", "user"]), values),
        "ms": st.fixed_dictionaries(
            {"n": st.integers(0, 9), "h": st.binary(min_size=8, max_size=8)}
        ),
    },
)
items = st.tuples(
    st.integers(-3, 5),
    st.sampled_from(["a", "messages"]),
    st.sampled_from(["msgpack", "@ref"]),
    st.one_of(st.binary(max_size=20), st.just({"t": "task", "i": 0, "n": 1})),
).map(list)
writes = st.fixed_dictionaries(
    {"_id": st.just("acme/t//c1/k"), "tenant": st.just("acme"),
     "w": st.lists(items, max_size=4)}
)  # fmt: skip
blobs = st.fixed_dictionaries(
    {"_id": st.just("acme/t//c1~x"), "tenant": st.just("acme"),
     "t": st.sampled_from(["msgpack", "json"]), "b": st.binary(max_size=30)}
)  # fmt: skip
documents = st.one_of(
    checkpoints.map(lambda d: (LANGGRAPH_CHECKPOINTS, d)),
    writes.map(lambda d: (LANGGRAPH_WRITES, d)),
    blobs.map(lambda d: (LANGGRAPH_BLOBS, d)),
)


@settings(max_examples=150, deadline=None)
@given(documents)
def test_seal_then_open_gives_every_document_back(case: tuple[str, dict[str, Any]]) -> None:
    collection, document = case
    keys = _keys()
    sealed = seal_fields(collection, document["_id"], document, keys, "acme")
    assert open_fields(collection, document["_id"], sealed, keys, "acme") == document
    assert stale_values(collection, sealed, 1) == 0
    assert open_fields(collection, document["_id"], document, keys, "acme") == document  # plaintext
    # the clear fields are untouched, the sealable values that hold something are sealed
    sealable = ("c", "mdb", "md", "iv", "ms", "w", "b")
    assert {k: v for k, v in sealed.items() if k not in sealable} == {
        k: v for k, v in document.items() if k not in sealable
    }
    assert stale_values(collection, document, 1) == len(sealed_versions(sealed))
    # under another document id nothing sealed opens
    if sealed_versions(sealed):
        with pytest.raises(CryptoError):
            open_fields(collection, document["_id"] + "x", sealed, keys, "acme")


async def test_a_store_without_a_keyring_stores_as_is_and_refuses_an_encrypted_tenant(
    store_factory: Factory,
) -> None:
    from mindstore.crypto.sealed_collection import ClearCollection
    from mindstore.errors import KeyringRequired

    with pytest.raises(CryptoError):
        seal_fields("tasks", "x", {}, _keys(), "acme")
    store = await store_factory(keyring=keyring())
    await graph_on(store)  # acme is encrypted now
    plain = Store(store.backend)
    raw = plain.database[LANGGRAPH_BLOBS]
    clear = sealed_collection(raw, LANGGRAPH_BLOBS, None, "beta", plain.database)
    assert isinstance(clear, ClearCollection)
    await clear.update_one({"_id": "beta/t/x", "tenant": "beta"}, {"$set": {"b": b"{}"}},
                           upsert=True)  # fmt: skip
    assert (await raw.find_one({"_id": "beta/t/x"}))["b"] == b"{}"  # byte for byte
    before = await raw.count_documents({})
    saver = MindstoreSaver(plain.scoped("acme"))
    with pytest.raises(KeyringRequired):
        await talk(notes_graph(saver), "t9", ["more"])
    assert await raw.count_documents({}) == before
    with pytest.raises(KeyringRequired, match="cannot read"):
        await saver.aget_tuple(config_of("t1"))


async def test_a_sealed_write_that_names_no_document_is_refused(store_factory: Factory) -> None:
    """The seal binds each value to its document: an update by another filter is refused
    before anything is written."""
    store = await store_factory(keyring=keyring())
    raw = store.database[LANGGRAPH_BLOBS]
    sealed = sealed_collection(raw, LANGGRAPH_BLOBS, store.keyring, "acme", store.database)
    with pytest.raises(CryptoError, match="must name its document's _id"):
        await sealed.update_one({"tenant": "acme"}, {"$set": {"t": "json", "b": b"{}"}},
                                upsert=True)  # fmt: skip
    assert await raw.count_documents({}) == 0


async def test_a_store_without_a_keyring_stores_what_it_stored_before(store: Store) -> None:
    """The documents of a plaintext store hold no ciphertext and read as LangGraph wrote them."""
    graph = await graph_on(store, "t1", QUESTIONS[:1])
    assert await versions(store, LANGGRAPH + TASKS) == set()
    raw = await store.database[LANGGRAPH_CHECKPOINTS].find({}).to_list(None)
    assert all(type(doc["c"][1]) is bytes for doc in raw)
    assert (await graph.aget_state(config_of("t1"))).values["tag"] == "SECRET-ok0"
