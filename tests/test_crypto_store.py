"""Per-tenant encryption end to end: what the database and backups hold, reads, analytics,
rotation, shredding, moved ciphertexts, the re-encryption sweep (docs/encryption.md)."""

from __future__ import annotations

import gzip
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mindstore import PagePolicy
from mindstore.backup import backup, restore, verify
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.crypto.aead import is_sealed, key_version
from mindstore.errors import CryptoError, KeyShredded
from mindstore.model.messages import UserMessage, message_to_dict
from mindstore.model.parts import ImagePart, TaskConfigPart, TextPart, ToolCallPart
from mindstore.model.storage_form import bson_size
from mindstore.store import Store

SECRET = "SECRET"
IMAGE = "data:image/png;base64,U0VDUkVUIGltYWdl"  # an image whose bytes say SECRET
CONFIG = TaskConfigPart(model_name="gpt-x", user_prompt=f"{SECRET} prompt")
SMALL_PAGES = PagePolicy(page_messages=4)
Factory = Callable[..., Awaitable[Store]]


def keyring() -> Keyring:
    return Keyring(LocalMasterKey(os.urandom(32)))


async def conversation(store: Store, tenant: str = "acme") -> str:
    """One task that writes every kind of content, through every kind of write: create,
    whole messages, part verbs, a tool answer, a sub-task, streaming, a payload, a title."""
    tasks = store.scoped(tenant).tasks
    record = await tasks.create(title=f"{SECRET} title", content=f"{SECRET} content",
                                config=CONFIG, metadata={"note": f"{SECRET} note"})  # fmt: skip
    tid = record.id
    await tasks.add_human_message(tid, f"{SECRET} question")
    turn = await tasks.add_assistant_message(tid)
    await tasks.add_reasoning_part(tid, turn.id, f"{SECRET} reasoning", signature="sig")
    await tasks.add_text_part(tid, turn.id, f"{SECRET} answer")
    call = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": f"{SECRET} query"})
    await tasks.add_tool_call_part(tid, turn.id, call)
    await tasks.answer_tool_call(tid, "c1", {"hits": [f"{SECRET} hit"]})
    await tasks.add_message(tid, UserMessage(content=[ImagePart(image=IMAGE)],
                                             metadata={"k": f"{SECRET} meta"}))  # fmt: skip
    await tasks.add_human_message(tid, f"{SECRET} long " + "x" * 3000)  # offloaded payload
    await tasks.add_task_entry(tid, [TextPart(text=f"{SECRET} entry")],
                               TaskConfigPart(model_name="sub-model"))  # fmt: skip
    await tasks.add_human_message(tid, f"{SECRET} inside")
    await tasks.add_task_exit(tid, [TextPart(text=f"{SECRET} handoff")])
    async with tasks.stream(tid, flush_bytes=8) as stream:
        for word in (SECRET, " streamed", " words"):
            await stream.text(word)
    await tasks.set_title(tid, f"{SECRET} title two")
    return tid


def texts(value: Any) -> list[str]:
    """Every string and key in a stored value (ciphertexts are binaries, not strings)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes) and not is_sealed(value):
        return [value.decode("latin-1")]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (*texts(k), *texts(v))]
    if isinstance(value, list):
        return [t for item in value for t in texts(item)]
    return []


async def raw_leaks(store: Store) -> list[str]:
    found = []
    for name in ("tasks", "task_pages", "payloads", "dialog_nodes"):
        async for document in store.database[name].find({}):
            found += [f"{name}: {t[:60]}" for t in texts(document) if SECRET in t or IMAGE in t]
    return found


async def make(factory: Factory, **options: Any) -> Store:
    return await factory(offload_threshold=1024, page_policy=SMALL_PAGES, **options)


async def test_no_plaintext_in_the_database_or_in_a_backup(store_factory: Factory,
                                                           tmp_path: Path) -> None:  # fmt: skip
    store = await make(store_factory, keyring=keyring())
    tid = await conversation(store)
    assert await raw_leaks(store) == []
    assert await store.database["task_pages"].count_documents({}) > 0  # pages were sealed too
    assert await store.database["payloads"].count_documents({}) == 1
    # the fields analytics and guards read are in the clear
    raw = await store.database["tasks"].find_one({})
    assert raw["state"] == "running" and raw["seq"] > 0
    await backup(store, tmp_path / "b")
    files = list((tmp_path / "b").rglob("*.gz"))
    assert files
    for file in files:
        text = gzip.decompress(file.read_bytes()).decode()
        assert SECRET not in text and "U0VDUkVU" not in text, file.name
        assert "data_keys" not in file.name
    report = await verify(tmp_path / "b")  # an encrypted backup's shape is still checked
    assert report is not None
    # the guard that makes this test meaningful: without a keyring the same writes leak
    plain = await make(store_factory)
    await conversation(plain)
    assert len(await raw_leaks(plain)) >= 10
    assert tid


async def test_reads_are_exact_and_equal_a_plaintext_store(store_factory: Factory) -> None:
    sealed = await make(store_factory, keyring=keyring())
    plain = await make(store_factory)
    tids = [await conversation(sealed), await conversation(plain)]
    read = []
    for store, tid in zip((sealed, plain), tids, strict=True):
        tasks = store.scoped("acme").tasks
        loaded = await tasks.load(tid)
        record = await tasks.get(tid)
        listed = (await tasks.list()).items
        read.append({
            "messages": [_shape(m) for m in await tasks.messages(tid)],
            "loaded": [_shape(m) for m in loaded.messages],
            "content": loaded.content,
            "title": record.title,
            "listed": [r.title for r in listed],
            "metadata": record.metadata,
            "tail": [_shape(m) for m in await tasks.tail(tid, 3)],
            "size": (await tasks.header(tid)).seq,
        })  # fmt: skip
    assert read[0] == read[1]
    assert read[0]["title"] == f"{SECRET} title two"
    texts_read = [t for m in read[0]["messages"] for t in texts(m)]
    assert f"{SECRET} long " + "x" * 3000 in texts_read  # the payload came back
    assert IMAGE in texts_read and f"{SECRET} streamed words" in texts_read


RUN_FIELDS = ("id", "task_id", "started_ts", "finished_ts", "scope", "entry_id", "answer_id",
              "trigger_call_id", "dialog_id")  # fmt: skip


def _shape(message: Any) -> dict[str, Any]:
    """A message without what differs between two runs (ids, times)."""
    document = message_to_dict(message)

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in RUN_FIELDS}  # fmt: skip
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(document)  # type: ignore[no-any-return]


async def test_size_bytes_counts_the_ciphertexts(store_factory: Factory) -> None:
    store = await store_factory(keyring=keyring(), offload_threshold=1024, page_policy=None)
    tid = await conversation(store)
    raw = await store.database["tasks"].find_one({})
    header = await store.scoped("acme").tasks.header(tid)
    assert header.size_bytes == sum(bson_size(m) for m in raw["messages"])


async def test_analytics_rows_equal_a_plaintext_stores(store_factory: Factory) -> None:
    from mindstore.model.plans import parse_stored
    from mindstore.workload import WorkloadSpec, generate

    workload = generate(WorkloadSpec(tenants=1, owners_per_tenant=2, tasks=8, mean_messages=12,
                                     fork_every=0))  # fmt: skip
    stores = [await make(store_factory, keyring=keyring()), await make(store_factory)]
    for store in stores:
        for document in workload.tasks:
            messages = parse_stored(document["messages"])
            await store.scoped(document["tenant"]).tasks.create(
                owner=document["owner"], title=document.get("title"), messages=messages,
                replay=True, state=document.get("state", "running"),
            )  # fmt: skip
    tenant = workload.tasks[0]["tenant"]
    reports = []
    for store in stores:
        analytics = store.scoped(tenant).analytics
        reports.append([
            await analytics.usage(group_by=["model"]), await analytics.tools(),
            await analytics.latency(), await analytics.sessions(), await analytics.subtasks(),
        ])  # fmt: skip
    assert reports[0] == reports[1]
    assert await raw_leaks(stores[0]) == []


async def test_rotate_new_writes_use_the_new_key_old_content_stays_readable(
    store_factory: Factory,
) -> None:
    store = await make(store_factory, keyring=keyring())
    assert store.keyring is not None
    acme = store.scoped("acme").tasks
    tid = (await acme.create(title="first", config=CONFIG)).id
    await acme.add_human_message(tid, "before rotation")
    assert await store.keyring.rotate("acme") == 2
    await acme.add_human_message(tid, "after rotation")
    raw = await store.database["tasks"].find_one({})
    versions = [key_version(m["content"][0]["text"]) for m in raw["messages"][1:]]
    assert versions == [1, 2]
    assert [m.text() for m in await acme.messages(tid)][1:] == ["before rotation", "after rotation"]
    status = await store.keyring.status("acme")
    assert status.versions == (1, 2) and status.current == 2 and status.shredded_at is None
    # another process (its own key cache) reads both, and writes with the newest key
    other = Store(store.backend, keyring=store.keyring).scoped("acme").tasks
    assert [m.text() for m in await other.messages(tid)][-1] == "after rotation"
    # a process whose key cache predates a rotation made elsewhere: it meets version 3
    # in a message it changes, reads the keys again, and goes on
    assert [m.text() for m in await other.messages(tid)][1] == "before rotation"  # cache: 1, 2
    assert await store.keyring.rotate("acme") == 3
    turn = await acme.add_assistant_message(tid)
    await acme.add_text_part(tid, turn.id, "sealed with 3, ")
    await other.add_text_part(tid, turn.id, "from the other process")
    assert (await acme.messages(tid))[-1].text() == "sealed with 3, from the other process"
    # the sweep re-seals everything with version 3
    swept = await store.keyring.reencrypt("acme")
    assert swept.tasks_done == 1 and swept.version == 3
    raw = await store.database["tasks"].find_one({})
    assert {key_version(m["content"][0]["text"]) for m in raw["messages"][1:]} == {3}
    assert key_version(raw["title"]) == 3
    assert [m.text() for m in await acme.messages(tid)][1:] == [
        "before rotation",
        "after rotation",
        "sealed with 3, from the other process",
    ]
    assert (await acme.get(tid)).title == "first"


async def test_shred_makes_the_database_and_every_backup_unreadable(
    store_factory: Factory, tmp_path: Path
) -> None:
    ring = keyring()
    store = await make(store_factory, keyring=ring)
    assert store.keyring is not None
    tid = await conversation(store)
    other = await conversation(store, tenant="globex")
    await backup(store, tmp_path / "before")
    destroyed = await store.keyring.shred("acme")
    assert destroyed == 1
    acme = store.scoped("acme").tasks
    for read in (acme.messages(tid), acme.load(tid), acme.get(tid), acme.tail(tid, 2)):
        with pytest.raises(KeyShredded):
            await read
    with pytest.raises(KeyShredded):
        await acme.add_human_message(tid, "more")
    with pytest.raises(KeyShredded):
        await store.keyring.rotate("acme")
    assert (await store.keyring.status("acme")).shredded_at is not None
    # another tenant is untouched
    assert (await store.scoped("globex").tasks.get(other)).title == f"{SECRET} title two"
    # the backup written before the shred: restored into the same database, refused
    await acme.delete(tid)
    await restore(store, tmp_path / "before")
    with pytest.raises(KeyShredded):
        await acme.messages(tid)
    # restored anywhere else, even with the same master key, nothing decrypts: the data
    # keys were never in the backup
    elsewhere = await make(store_factory, keyring=ring)
    await restore(elsewhere, tmp_path / "before")
    with pytest.raises(CryptoError):
        await elsewhere.scoped("acme").tasks.messages(tid)
    assert await store.database["data_keys"].count_documents({"tenant": "acme", "kind": "key"}) == 0


async def test_a_moved_ciphertext_is_refused_with_a_typed_error(store_factory: Factory) -> None:
    ring = keyring()
    store = await make(store_factory, keyring=ring)
    acme = store.scoped("acme").tasks
    one = (await acme.create()).id
    two = (await acme.create()).id
    await acme.add_human_message(one, "for task one only")
    await acme.add_human_message(two, "task two")
    tasks = store.database["tasks"]
    first = (await tasks.find_one({"_id": f"acme/{one}"}))["messages"][0]
    second = (await tasks.find_one({"_id": f"acme/{two}"}))["messages"][0]
    moved = dict(second, content=first["content"])  # task one's text into task two's message
    await tasks.update_one({"_id": f"acme/{two}"}, {"$set": {"messages.0": moved}})
    fresh = Store(store.backend, keyring=ring).scoped("acme").tasks  # no cached tails
    with pytest.raises(CryptoError, match="was not sealed there"):
        await fresh.messages(two)
    assert [m.text() for m in await acme.messages(one)] == ["for task one only"]
    # into another tenant's task: refused too
    globex = store.scoped("globex").tasks
    three = (await globex.create()).id
    await globex.add_human_message(three, "globex")
    third = (await tasks.find_one({"_id": f"globex/{three}"}))["messages"][0]
    moved = dict(third, content=first["content"])
    await tasks.update_one({"_id": f"globex/{three}"}, {"$set": {"messages.0": moved}})
    with pytest.raises(CryptoError):
        await Store(store.backend, keyring=ring).scoped("globex").tasks.messages(three)


async def test_a_plaintext_tenant_is_encrypted_from_a_moment_on_and_the_sweep_resumes(
    store_factory: Factory,
) -> None:
    plain = await make(store_factory)
    tids = [await conversation(plain) for _ in range(3)]
    expected = [[_shape(m) for m in await plain.scoped("acme").tasks.messages(t)] for t in tids]
    # the same database, now with a keyring: old plaintext reads as before, new writes sealed
    store = Store(plain.backend, keyring=keyring(), offload_threshold=1024,
                  page_policy=SMALL_PAGES)  # fmt: skip
    assert store.keyring is not None
    acme = store.scoped("acme").tasks
    assert [[_shape(m) for m in await acme.messages(t)] for t in tids] == expected
    await acme.add_human_message(tids[0], f"{SECRET} new")
    expected[0].append(_shape((await acme.messages(tids[0]))[-1]))
    leaks_before = len(await raw_leaks(store))
    assert leaks_before > 0

    class Crash(Exception):
        pass

    def crash_after_one(progress: Any) -> None:
        if progress.tasks_done == 1:
            raise Crash

    with pytest.raises(Crash):
        await store.keyring.reencrypt("acme", progress=crash_after_one)
    assert 0 < len(await raw_leaks(store)) < leaks_before  # one task sealed, the rest not yet
    assert [[_shape(m) for m in await acme.messages(t)] for t in tids] == expected  # mixed reads
    resumed = await store.keyring.reencrypt("acme")
    assert resumed.resumed_after is not None and resumed.tasks_done == 2
    assert await raw_leaks(store) == []
    assert [[_shape(m) for m in await acme.messages(t)] for t in tids] == expected
    for tid in tids:  # the sizes followed the ciphertexts (pages and the open page)
        raw = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
        pages = [p async for p in store.database["task_pages"].find({"task": f"acme/{tid}"})]
        assert raw["sealed_bytes"] == sum(p["size_bytes"] for p in pages)
        assert raw["size_bytes"] - raw["sealed_bytes"] == sum(bson_size(m) for m in raw["messages"])
        assert all(p["size_bytes"] == sum(bson_size(m) for m in p["messages"]) for p in pages)
    # writes still work after the sweep bumped the versions under the header cache
    await acme.add_human_message(tids[1], "after the sweep")
    assert (await acme.messages(tids[1]))[-1].text() == "after the sweep"


async def test_a_store_without_a_keyring_has_no_key_store(store: Store) -> None:
    assert store.keyring is None
    await store.scoped("acme").tasks.create(title="t")
    assert await store.database["data_keys"].count_documents({}) == 0
    raw = await store.database["tasks"].find_one({})
    assert raw["title"] == "t"


@pytest.mark.parametrize("pages", [None, PagePolicy(page_messages=4)])
async def test_the_context_window_reads_a_sealed_checkpoint(
    store_factory: Factory, pages: PagePolicy | None
) -> None:
    """The window takes the checkpoint's part from its pipeline (open page) or the latest
    compression message (paged): its sealed summary is opened there too."""
    from test_compression_store import CONFIG as SMALL_CONFIG
    from test_compression_store import tool_round

    store = await store_factory(keyring=keyring(), page_policy=pages)
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=SMALL_CONFIG)).id
    for i in range(6):
        await tool_round(tasks, tid, f"big{i}")
    window = await tasks.context(tid, strategy="compact_summarization")
    assert window.compressed_now and window.checkpoint is not None
    raw = await store.database["tasks"].find_one({})
    marks = [m for m in raw["messages"] if m.get("role") == "compression"]
    assert marks and is_sealed(marks[-1]["content"][0]["cache"])  # the summary is sealed
    again = await tasks.context(tid, auto_compress=False)
    assert again.checkpoint == window.checkpoint
    assert [m.to_dict() for m in again.messages] == [m.to_dict() for m in window.messages]
