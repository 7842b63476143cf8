"""What a sealed value is bound to, against someone who can write to the database but holds
no key (docs/encryption.md, "What a database writer can do"): every move of a ciphertext,
or of a clear field that says where sealed content is read from, is refused, never read
as other content.

* a task's own content parts are bound to their index;
* an offloaded payload opens only where its marker was offloaded (message and field);
* the LangGraph saver: a serialized value of any type is checked (a list of ints is not
  read as bytes), a checkpoint's message record (`ms.t`, `ms.n`) is bound into its sealed
  chain, a pending write's reference is sealed, a reference-map blob's reference bound;
* data sealed in format 1 (the release before these bindings, `crypto_format1/store.json`,
  written by that release's code) still reads, the sweep moves it to format 2, and from
  then on the tenant refuses format 1 (an old ciphertext put back).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from bson import json_util

from mindstore.crypto import Keyring, LocalMasterKey, aead
from mindstore.crypto.aead import is_sealed
from mindstore.errors import CryptoError
from mindstore.formats.agent_state import AgentState
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TextPart
from mindstore.store import Store

pytest.importorskip("langgraph")

from mindstore.collection_names import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.integrations.langgraph import MindstoreSaver
from test_crypto_integrations import graph_on

Factory = Callable[..., Awaitable[Store]]
OFFLOAD = 1024
BIG = "payload " + "p" * 2 * OFFLOAD
FIXTURE = Path(__file__).with_name("crypto_format1") / "store.json"
FIXTURE_MASTER = bytes(range(32))
"""The fixture's master key (`crypto_format1/make.py`): test data only."""


def keyring() -> Keyring:
    return Keyring(LocalMasterKey(os.urandom(32)))


def part_texts(content: Any) -> list[Any]:
    return [part.text if isinstance(part, TextPart) else part["text"] for part in content]


async def fresh(store: Store) -> Store:
    """Another process on the same database: no cached keys, no saver heads."""
    return Store(store.backend, keyring=store.keyring)


# ----------------------------------------------------------------------------- task content


async def test_a_task_s_own_content_parts_swapped_in_the_database_are_refused(
    store_factory: Factory,
) -> None:
    store = await store_factory(keyring=keyring())
    acme = store.scoped("acme")
    parts = [TextPart(text="first part"), TextPart(text="second part")]
    task = await acme.tasks.create(content=parts)
    tasks = store.database["tasks"]
    stored = await tasks.find_one({"tenant": "acme"})
    content = stored["content"]
    assert all(is_sealed(part["text"]) for part in content)
    await tasks.update_one({"_id": stored["_id"]}, {"$set": {"content": content[::-1]}})
    with pytest.raises(CryptoError, match=r"task\.content\.0\.text .*was not sealed there"):
        await (await fresh(store)).scoped("acme").tasks.load(task.id)
    await tasks.update_one({"_id": stored["_id"]}, {"$set": {"content": content}})
    loaded = await (await fresh(store)).scoped("acme").tasks.load(task.id)
    assert part_texts(loaded.content) == ["first part", "second part"]


# ----------------------------------------------------------------------------- same class


@pytest.mark.parametrize("swap", ["message-parts", "messages", "metadata-values"])
async def test_other_positions_and_references_are_bound_too(
    store_factory: Factory, swap: str
) -> None:
    """The bindings of the same class that held before (each a swap a database writer can
    make): two parts of a message (bound to ``content.<i>``), two messages' content (to
    the message id), two metadata values (to their key). Streamed chunks (bound to their
    index) and the agent state (to its task) are held in test_crypto_stream.py."""
    store = await store_factory(keyring=keyring())
    tasks = store.scoped("acme").tasks
    task = await tasks.create(metadata={"a": "alpha", "b": "beta"})
    parts = [TextPart(text="one"), TextPart(text="two")]
    await tasks.add_message(task.id, UserMessage(id="m1", content=parts))
    await tasks.add_human_message(task.id, "three", message_id="m2")
    raw = store.database["tasks"]
    stored = await raw.find_one({"tenant": "acme"})
    if swap == "metadata-values":
        metadata = stored["metadata"]
        change = {"metadata": {"a": metadata["b"], "b": metadata["a"]}}
        read = tasks.get
    else:
        _, document, _ = await message_home(store, "m1")
        assert document["_id"] == stored["_id"], "the open page holds the messages"
        messages = [dict(m) for m in stored["messages"]]
        if swap == "message-parts":
            messages[0]["content"] = messages[0]["content"][::-1]
        else:
            messages[0]["content"], messages[1]["content"] = (
                messages[1]["content"], messages[0]["content"])  # fmt: skip
        change = {"messages": messages}
        read = tasks.messages
    await raw.update_one({"_id": stored["_id"]}, {"$set": change})
    with pytest.raises(CryptoError, match="was not sealed there"):
        await read(task.id)


@pytest.mark.parametrize("change", ["reordered", "removed", "role", "rolled-back"])
async def test_what_a_database_writer_can_still_do(store_factory: Factory, change: str) -> None:
    """The limits docs/encryption.md states, measured: whole messages reordered or removed,
    a clear field changed, a whole task document put back from an older copy all read as
    changed (authenticated encryption stops forged or moved content, not these)."""
    store = await store_factory(keyring=keyring())
    tasks = store.scoped("acme").tasks
    task = await tasks.create()
    await tasks.add_human_message(task.id, "one", message_id="m1")
    older = await store.database["tasks"].find_one({"tenant": "acme"})
    await tasks.add_human_message(task.id, "two", message_id="m2")
    stored = await store.database["tasks"].find_one({"tenant": "acme"})
    _, home, _ = await message_home(store, "m2")
    assert home["_id"] == stored["_id"], "the open page holds the messages"
    messages = stored["messages"]
    expected = {
        "reordered": ([messages[1], messages[0]], [("m2", "user"), ("m1", "user")]),
        "removed": ([messages[0]], [("m1", "user")]),
        "role": (
            [messages[0], {**messages[1], "role": "assistant"}],
            [("m1", "user"), ("m2", "assistant")],
        ),
    }
    if change == "rolled-back":
        await store.database["tasks"].replace_one({"_id": stored["_id"]}, older)
        wanted = [("m1", "user")]
    else:
        forged, wanted = expected[change]
        await store.database["tasks"].update_one(
            {"_id": stored["_id"]}, {"$set": {"messages": forged}}
        )
    read = await (await fresh(store)).scoped("acme").tasks.messages(task.id)
    assert [(m.id, m.role) for m in read] == wanted


# ----------------------------------------------------------------------------- payloads


async def message_home(store: Store, message_id: str) -> tuple[Any, dict[str, Any], int]:
    """(collection, stored document, index in its `messages`) of a stored message: the
    task document's open page or a sealed page."""
    for name in ("tasks", "task_pages"):
        async for document in store.database[name].find({"tenant": "acme"}):
            for index, message in enumerate(document.get("messages") or []):
                if isinstance(message, dict) and message.get("id") == message_id:
                    return store.database[name], document, index
    raise AssertionError(f"message {message_id!r} is not stored")


@pytest.mark.parametrize("into", ["another-message", "another-part"])
async def test_a_payload_marker_copied_elsewhere_is_refused(
    store_factory: Factory, into: str
) -> None:
    store = await store_factory(keyring=keyring(), offload_threshold=OFFLOAD)
    tasks = store.scoped("acme").tasks
    task = await tasks.create()
    if into == "another-message":
        await tasks.add_human_message(task.id, BIG, message_id="m1")
        await tasks.add_human_message(task.id, "small", message_id="m2")
        source, target = ("m1", 0), ("m2", 0)
    else:
        parts = [TextPart(text=BIG), TextPart(text="small")]
        await tasks.add_message(task.id, UserMessage(id="m1", content=parts))
        source, target = ("m1", 0), ("m1", 1)
    collection, document, index = await message_home(store, source[0])
    marker = document["messages"][index]["content"][source[1]]["text"]
    assert isinstance(marker, str) and marker.startswith("mindstore:payload:")
    collection, document, index = await message_home(store, target[0])
    before = document["messages"]
    forged = [dict(m) for m in before]
    forged[index]["content"] = [dict(p) for p in forged[index]["content"]]
    forged[index]["content"][target[1]]["text"] = marker
    await collection.update_one({"_id": document["_id"]}, {"$set": {"messages": forged}})
    with pytest.raises(CryptoError, match="where it was not offloaded"):
        await (await fresh(store)).scoped("acme").tasks.messages(task.id)
    await collection.update_one({"_id": document["_id"]}, {"$set": {"messages": before}})
    read = await (await fresh(store)).scoped("acme").tasks.messages(task.id)
    texts = [part.text for message in read for part in message.content]
    assert texts == [BIG, "small"]


async def test_a_payload_moved_to_another_tenant_by_a_restore_reads_before_and_after_the_sweep(
    store_factory: Factory, tmp_path: Path
) -> None:
    """A restore as another tenant gives a payload an id that does not derive from its
    place (`backup.rekey.moved_payload_id`): the place check reads the payload's own
    `message_id` and `path` (bound into format 2), so the moved tenant still reads, under
    a keyring and after its sweep sealed it."""
    from mindstore.backup import backup, restore

    plain = await store_factory(offload_threshold=OFFLOAD)
    tasks = plain.scoped("acme").tasks
    task = await tasks.create()
    await tasks.add_human_message(task.id, BIG, message_id="m1")
    await backup(plain, tmp_path / "acme", tenant="acme")
    sealed = await store_factory(keyring=keyring(), offload_threshold=OFFLOAD)
    await restore(sealed, tmp_path / "acme", as_tenant="gamma")
    gamma = sealed.scoped("gamma").tasks
    assert (await gamma.messages(task.id))[0].content[0].text == BIG
    await sealed.keyring.reencrypt("gamma")
    payload = await sealed.database["payloads"].find_one({"tenant": "gamma"})
    assert is_sealed(payload["data"])
    read = await (await fresh(sealed)).scoped("gamma").tasks.messages(task.id)
    assert read[0].content[0].text == BIG


# ----------------------------------------------------------------------------- LangGraph


def config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


async def read_thread(store: Store, thread: str = "t1") -> list[Any]:
    """Every checkpoint of a thread with its values and pending writes, as a fresh
    process reads them."""
    saver = MindstoreSaver((await fresh(store)).scoped("acme"))
    return [item async for item in saver.alist(config(thread))]


async def two_threads(store_factory: Factory) -> Store:
    """A sealed-only tenant (encrypted from its first write) with threads t1 and t2."""
    store = await store_factory(keyring=keyring())
    await graph_on(store, "t1", ["billing?"])
    await graph_on(store, "t2", ["refunds?"])
    assert (await store.keyring.keys("acme")).sealed_only
    return store


async def refused(store: Store, name: str, doc_id: str, change: dict[str, Any], match: str) -> None:
    """`change` set on a stored document makes reading thread t1 raise CryptoError
    (`match`); put back, the thread reads again."""
    raw = store.database[name]
    before = await raw.find_one({"_id": doc_id})
    await raw.update_one({"_id": doc_id}, {"$set": change})
    with pytest.raises(CryptoError, match=match):
        await read_thread(store)
    await raw.update_one({"_id": doc_id}, {"$set": {key: before[key] for key in change}})
    assert await read_thread(store)


@pytest.mark.parametrize("kind", ["write", "blob"])
async def test_a_value_stored_as_a_list_of_ints_is_refused_not_read_as_bytes(
    store_factory: Factory, kind: str
) -> None:
    store = await two_threads(store_factory)
    forged = list(MindstoreSaver(store.scoped("acme")).serde.dumps_typed("FORGED")[1])
    if kind == "write":
        writes = await store.database[LANGGRAPH_WRITES].find({"tenant": "acme"}).to_list(None)
        doc = next(w for w in writes if w["_id"].startswith("acme/t1/")
                   and any(item[2] == "msgpack" for item in w["w"]))  # fmt: skip
        items = [list(item) for item in doc["w"]]
        victim = next(item for item in items if item[2] == "msgpack")
        victim[3] = forged
        await refused(store, LANGGRAPH_WRITES, doc["_id"], {"w": items}, "in the clear")
    else:
        blob = await store.database[LANGGRAPH_BLOBS].find_one(
            {"tenant": "acme", "_id": {"$regex": "^acme/t1/.*~notes$"}}
        )
        await refused(store, LANGGRAPH_BLOBS, blob["_id"], {"b": forged, "t": "msgpack"},
                      "in the clear")  # fmt: skip


async def test_a_pending_write_moved_to_another_index_is_refused(store_factory: Factory) -> None:
    """A write's value is bound to its index (and channel, type and document: the task
    that wrote it is in the `_id`), so it is not read as another write of the node."""
    store = await two_threads(store_factory)
    writes = await store.database[LANGGRAPH_WRITES].find({"tenant": "acme"}).to_list(None)
    doc = next(w for w in writes if w["_id"].startswith("acme/t1/")
               and any(item[2] == "msgpack" and item[0] >= 0 for item in w["w"]))  # fmt: skip
    items = [list(item) for item in doc["w"]]
    victim = next(item for item in items if item[2] == "msgpack" and item[0] >= 0)
    victim[0] += 7
    await refused(store, LANGGRAPH_WRITES, doc["_id"], {"w": items}, "was not sealed there")


@pytest.mark.parametrize("field", ["t", "n"])
async def test_a_checkpoint_s_message_record_pointed_elsewhere_is_refused(
    store_factory: Factory, field: str
) -> None:
    """`ms.t` set to another thread's task would show that thread's messages; `ms.n`
    another count, another prefix of them."""
    store = await two_threads(store_factory)
    rows = (
        await store.database[LANGGRAPH_CHECKPOINTS]
        .find({"tenant": "acme", "_id": {"$regex": "^acme/t1/"}})
        .to_list(None)
    )
    row = max((r for r in rows if r.get("ms")), key=lambda r: r["_id"])
    assert is_sealed(row["ms"]["h"]) and "t" not in row["ms"]
    change = {"t": "t2"} if field == "t" else {"n": int(row["ms"]["n"]) - 1}
    await refused(store, LANGGRAPH_CHECKPOINTS, row["_id"], {"ms": {**row["ms"], **change}},
                  "was not sealed there")  # fmt: skip


async def test_a_pending_write_s_reference_pointed_at_another_thread_is_refused(
    store_factory: Factory,
) -> None:
    store = await two_threads(store_factory)
    writes = await store.database[LANGGRAPH_WRITES].find({"tenant": "acme"}).to_list(None)

    def with_ref(thread: str) -> tuple[dict[str, Any], int]:
        for doc in writes:
            if doc["_id"].startswith(f"acme/{thread}/"):
                for position, item in enumerate(doc["w"]):
                    if item[2] == "@ref":
                        return doc, position
        raise AssertionError(f"thread {thread} holds no reference")

    doc, position = with_ref("t1")
    items = [list(item) for item in doc["w"]]
    items[position][3] = {"t": "t2", "i": 0, "n": 1}  # in the clear, at another thread
    await refused(store, LANGGRAPH_WRITES, doc["_id"], {"w": items}, "in the clear")
    assert is_sealed(doc["w"][position][3])  # the reference itself is sealed
    theirs, at = with_ref("t2")  # t2's sealed reference copied in: bound to its document
    items = [list(item) for item in doc["w"]]
    items[position][3] = theirs["w"][at][3]
    items[position][0] = theirs["w"][at][0]
    await refused(store, LANGGRAPH_WRITES, doc["_id"], {"w": items}, "was not sealed there")


async def test_a_reference_map_blob_pointed_at_another_thread_is_refused(
    store_factory: Factory,
) -> None:
    store = await two_threads(store_factory)
    blob = await store.database[LANGGRAPH_BLOBS].find_one(
        {"tenant": "acme", "t": "@refmap", "_id": {"$regex": "^acme/t1/"}}
    )
    assert blob is not None and blob["r"]["t"] == "t1"
    for change in ({"t": "t2"}, {"n": 0}):
        await refused(store, LANGGRAPH_BLOBS, blob["_id"], {"r": {**blob["r"], **change}},
                      "was not sealed there")  # fmt: skip


# ----------------------------------------------------------------------------- format 1


def fixture_documents() -> dict[str, list[dict[str, Any]]]:
    loaded: dict[str, list[dict[str, Any]]] = json_util.loads(FIXTURE.read_text())
    return loaded


def formats(value: Any) -> list[int]:
    """The format of every ciphertext a stored value holds."""
    if is_sealed(value):
        return [aead.sealed_format(value)]
    if isinstance(value, dict):
        return [found for item in value.values() for found in formats(item)]
    if isinstance(value, list):
        return [found for item in value for found in formats(item)]
    return []


async def stored_formats(store: Store) -> set[int]:
    found: set[int] = set()
    for name in fixture_documents():
        if name != "data_keys":
            async for document in store.database[name].find({"tenant": "acme"}):
                found.update(formats(document))
    return found


async def everything(store: Store) -> dict[str, Any]:
    """What the fixture's tenant reads as, through a fresh process."""
    acme = (await fresh(store)).scoped("acme")
    record = await acme.tasks.get("old-task")
    state = await acme.tasks.agent_state("old-task")
    threads = {}
    for thread in ("t1", "t2"):
        threads[thread] = [
            (item.checkpoint["channel_values"], item.metadata, item.pending_writes)
            for item in await read_thread(store, thread)
        ]
    return {
        "title": record.title,
        "metadata": record.metadata,
        "content": part_texts((await acme.tasks.load("old-task")).content),
        "messages": [m.to_dict() for m in await acme.tasks.messages("old-task")],
        "state": None if state is None else (state.summary, state.node),
        "threads": repr(threads),
    }


async def test_format_1_data_still_reads_and_the_sweep_moves_it_to_format_2(
    store_factory: Factory,
) -> None:
    store = await store_factory(
        keyring=Keyring(LocalMasterKey(FIXTURE_MASTER)), offload_threshold=OFFLOAD
    )
    documents = fixture_documents()
    for name, rows in documents.items():
        if rows:
            await store.database[name].insert_many(rows)
    assert await stored_formats(store) == {aead.LEGACY_FORMAT}
    before = await everything(store)
    assert before["title"] == "old title" and before["metadata"] == {"city": "Lisbon", "n": 3}
    assert before["content"] == ["first part", "second part"]
    assert before["state"] == ("old summary", "n1")
    texts = [part.get("text") for m in before["messages"] for part in m["content"]]
    assert texts == ["hello there", BIG, "small"]
    assert "SECRET billing?" in before["threads"] and "SECRET refunds?" in before["threads"]
    assert (await store.keyring.keys("acme")).legacy_bindings

    await store.keyring.reencrypt("acme")
    assert await stored_formats(store) == {aead.FORMAT}
    assert not (await (await fresh(store)).keyring.keys("acme")).legacy_bindings
    assert await everything(store) == before

    # from now on format 1 is refused: a ciphertext of the fixture put back
    tasks = store.database["tasks"]
    old = next(d for d in documents["tasks"] if d["_id"].endswith("old-task"))
    current = await tasks.find_one({"_id": old["_id"]})
    await tasks.update_one({"_id": old["_id"]}, {"$set": {"title": old["title"]}})
    with pytest.raises(CryptoError, match="format 1"):
        await (await fresh(store)).scoped("acme").tasks.get("old-task")
    # and the new bindings hold: the task's parts swapped
    await tasks.update_one(
        {"_id": old["_id"]},
        {"$set": {"title": current["title"], "content": current["content"][::-1]}},
    )  # fmt: skip
    with pytest.raises(CryptoError, match="was not sealed there"):
        await (await fresh(store)).scoped("acme").tasks.load("old-task")


async def test_a_sweep_cut_short_by_the_previous_release_starts_over(
    store_factory: Factory,
) -> None:
    """A sweep the previous release cut short saved where it stopped; the tasks before that
    point hold format 1, so resuming there and then refusing format 1 would lose them: a
    cursor of another format is not resumed."""
    store = await store_factory(
        keyring=Keyring(LocalMasterKey(FIXTURE_MASTER)), offload_threshold=OFFLOAD
    )
    for name, rows in fixture_documents().items():
        if rows:
            await store.database[name].insert_many(rows)
    last = max(d["_id"] for d in fixture_documents()["tasks"])
    await store.database["data_keys"].insert_one(
        {"_id": "acme/sweep", "tenant": "acme", "kind": "sweep", "after": last, "version": 1}
    )  # what the previous release saved after its last task
    before = await everything(store)
    progress = await store.keyring.reencrypt("acme")
    assert progress.resumed_after is None
    assert await stored_formats(store) == {aead.FORMAT}
    assert await everything(store) == before


async def test_format_1_data_keeps_its_old_binding_until_the_sweep(store_factory: Factory) -> None:
    """What the sweep closes, measured: before it, two format-1 content parts swapped read
    reordered (format 1 bound no index); that is why the sweep must run after upgrading."""
    store = await store_factory(keyring=Keyring(LocalMasterKey(FIXTURE_MASTER)))
    tasks = store.database["tasks"]
    old = next(d for d in fixture_documents()["tasks"] if d["_id"].endswith("old-task"))
    await tasks.insert_one({**old, "content": old["content"][::-1]})
    await store.database["data_keys"].insert_many(fixture_documents()["data_keys"])
    loaded = await (await fresh(store)).scoped("acme").tasks.load("old-task")
    assert part_texts(loaded.content) == ["second part", "first part"]


async def test_a_tenant_s_first_key_refuses_format_1_at_once(store_factory: Factory) -> None:
    """A tenant encrypted by this release holds no format-1 ciphertext: its keys are made
    with the bindings flag, so nothing needs a sweep before the new bindings hold."""
    store = await store_factory(keyring=keyring())
    await store.scoped("acme").tasks.create(title="new")
    keys = await store.keyring.keys("acme")
    assert not keys.legacy_bindings
    await store.keyring.rotate("acme")
    assert not (await (await fresh(store)).keyring.keys("acme")).legacy_bindings


async def test_a_removed_bindings_flag_makes_the_key_unwrap_no_more(store_factory: Factory) -> None:
    store = await store_factory(keyring=keyring())
    task = await store.scoped("acme").tasks.create(title="new")
    data_keys = store.database["data_keys"]
    await data_keys.update_one({"_id": "acme/v1"}, {"$unset": {"bindings": ""}})
    with pytest.raises(CryptoError):
        await (await fresh(store)).scoped("acme").tasks.get(task.id)


async def test_an_agent_state_of_format_1_opens_where_its_binding_did_not_change(
    store_factory: Factory,
) -> None:
    """Format 1 and 2 of the same field open alike where the binding did not change."""
    store = await store_factory(keyring=Keyring(LocalMasterKey(FIXTURE_MASTER)))
    for name, rows in fixture_documents().items():
        if rows and name in ("tasks", "data_keys"):
            await store.database[name].insert_many(rows)
    acme = store.scoped("acme")
    state = await acme.tasks.agent_state("old-task")
    assert isinstance(state, AgentState) and state.summary == "old summary"
