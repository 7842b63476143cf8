"""Encryption of what the first crypto tests left in the clear (docs/encryption.md):
streamed chunks (each sealed on its own, bound to its index), the agent-graph state, and
pending changes to sealed messages, which the re-encryption sweep now seals too."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from interleaving import hooked
from mindstore.backup import backup, verify
from mindstore.crypto.aead import is_sealed, key_version
from mindstore.errors import CryptoError, KeyShredded
from mindstore.formats.agent_state import AgentState
from mindstore.model.messages import AssistantMessage
from mindstore.model.parts import TextPart
from mindstore.model.storage_form import CHUNKS_KEY, bson_size
from mindstore.store import Store
from paging_fixtures import unfolded
from test_crypto_store import (
    CONFIG,
    SECRET,
    SMALL_PAGES,
    Factory,
    _shape,
    conversation,
    keyring,
    make,
    raw_leaks,
    texts,
)

WORDS = [f"{SECRET}-{i} " for i in range(12)]


async def streamed(store: Store, tenant: str = "acme") -> tuple[str, str]:
    """A task with one streamed turn: reasoning then text, one write per delta."""
    tasks = store.scoped(tenant).tasks
    tid = (await tasks.create(config=CONFIG)).id
    await tasks.add_human_message(tid, "question")
    async with tasks.stream(tid, flush_bytes=1, flush_ms=3_600_000) as stream:
        for word in WORDS[:4]:
            await stream.reasoning(word)
        for word in WORDS[4:]:
            await stream.text(word)
    assert stream.message_id is not None
    return tid, stream.message_id


async def raw_turn(store: Store, tid: str, tenant: str = "acme") -> dict[str, Any]:
    document = await store.database["tasks"].find_one({"_id": f"{tenant}/{tid}"})
    turn: dict[str, Any] = document["messages"][-1]
    return turn


async def test_chunks_are_pushed_sealed_and_read_back_exactly(
    store_factory: Factory, tmp_path: Path
) -> None:
    sealed = await make(store_factory, keyring=keyring())
    plain = await make(store_factory)
    tid, mid = await streamed(sealed)
    plain_tid, _ = await streamed(plain)
    raw = await raw_turn(sealed, tid)
    for part in raw["content"]:  # each write after the first pushed one sealed chunk
        assert is_sealed(part["text" if part["type"] == "text" else "reasoning"])
        assert len(part[CHUNKS_KEY]) >= 3 and all(is_sealed(c) for c in part[CHUNKS_KEY])
    control = await raw_turn(plain, plain_tid)  # the same chunks, in the clear, without one
    assert any(SECRET in c for part in control["content"] for c in part[CHUNKS_KEY])
    assert await raw_leaks(sealed) == []
    # reads are exact: equal to the store without a keyring, whatever the read
    reads = []
    for store, task in ((sealed, tid), (plain, plain_tid)):
        tasks = store.scoped("acme").tasks
        reads.append({
            "messages": [_shape(m) for m in await tasks.messages(task)],
            "tail": [_shape(m) for m in await tasks.tail(task, 1)],
            "loaded": [_shape(m) for m in (await tasks.load(task)).messages],
        })  # fmt: skip
    assert reads[0] == reads[1]
    assert (await sealed.scoped("acme").tasks.get_message(tid, mid)).text() == "".join(WORDS[4:])
    # size_bytes counts the sealed chunks exactly (the open page's documents)
    document = await sealed.database["tasks"].find_one({"_id": f"acme/{tid}"})
    header = await sealed.scoped("acme").tasks.header(tid)
    assert header.size_bytes - header.sealed_bytes == sum(
        bson_size(m) for m in document["messages"]
    )
    # a backup holds the ciphertexts, and verify accepts the chunked, sealed shape
    await backup(sealed, tmp_path / "b")
    for file in (tmp_path / "b").rglob("*.gz"):
        assert SECRET not in gzip.decompress(file.read_bytes()).decode(), file.name
    assert await verify(tmp_path / "b") is not None


async def test_a_streamed_write_sends_only_its_chunk_under_a_keyring(
    store_factory: Factory,
) -> None:
    """Bytes per write stay the chunk's (plus the ciphertext's 30 bytes), not the text so far."""
    sent: dict[bool, list[int]] = {}
    for encrypted in (True, False):
        store = await make(store_factory, **({"keyring": keyring()} if encrypted else {}))
        tasks = store.scoped("acme").tasks
        tid = (await tasks.create(config=CONFIG)).id
        await tasks.add_human_message(tid, "question")
        async with tasks.stream(tid, flush_bytes=1, flush_ms=3_600_000) as stream:
            await stream.text("first ")
            with store.backend.recorder.capture() as log:
                for _ in range(20):
                    await stream.text("x" * 50)
        sent[encrypted] = [c.bytes_sent for c in log.by_name("update")]
    assert len(sent[True]) == len(sent[False]) == 20
    # constant per write (the 20th as the 2nd), and close to the plaintext write
    assert max(sent[True][1:]) - min(sent[True][1:]) <= 4
    assert all(0 < e - p <= 64 for e, p in zip(sent[True], sent[False], strict=True))


DELTAS = st.one_of(st.text(max_size=12), st.sampled_from(["mindstore:x", "é" * 600]))
"""Deltas, with ones stored escaped and ones offloaded (a write that folds the chunks)."""


def chunk_lists(value: Any) -> list[list[Any]]:
    if isinstance(value, dict):
        own = [value[CHUNKS_KEY]] if isinstance(value.get(CHUNKS_KEY), list) else []
        return own + [c for v in value.values() for c in chunk_lists(v)]
    if isinstance(value, list):
        return [c for v in value for c in chunk_lists(v)]
    return []


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(st.tuples(st.sampled_from(["text", "text", "reasoning"]), DELTAS), min_size=1,
                   max_size=25),
    flush_bytes=st.integers(1, 64),
)  # fmt: skip
@example(kinds=[("text", "Hi"), ("text", "a" * 1010)], flush_bytes=1)  # sealed: over 1 KiB
@example(  # chunks pushed, then folded (an offloaded delta, an escaped one), then pushed
    kinds=[("text", d) for d in ("Hello", " wor", "é" * 600, "x", "mindstore:x", "y")],
    flush_bytes=1,
)
async def test_any_stream_reads_back_exactly_with_sizes_exact_under_a_keyring(
    store_factory: Factory, kinds: list[tuple[str, str]], flush_bytes: int
) -> None:
    store = await make(store_factory, keyring=keyring())
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    await tasks.add_human_message(tid, "question")
    async with tasks.stream(tid, flush_bytes=flush_bytes, flush_ms=3_600_000) as stream:
        for kind, delta in kinds:
            await (stream.text(delta) if kind == "text" else stream.reasoning(delta))
    runs: list[tuple[str, str]] = []
    for kind, delta in kinds:
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + delta)
        else:
            runs.append((kind, delta))
    assert stream.message_id is not None
    parts = (await tasks.get_message(tid, stream.message_id)).content  # type: ignore[union-attr]
    assert [(p.type, getattr(p, "text", None) or getattr(p, "reasoning", "")) for p in parts] == [
        (kind, text) for kind, text in runs
    ]
    document = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
    pages = [p async for p in store.database["task_pages"].find({"task": f"acme/{tid}"})]
    header = await tasks.header(tid)
    assert header.size_bytes - header.sealed_bytes == sum(
        bson_size(m) for m in document["messages"]
    )
    assert header.sealed_bytes == sum(bson_size(m) for p in pages for m in p["messages"])
    stored = [c for d in [document, *pages] for chunks in chunk_lists(d) for c in chunks]
    assert all(is_sealed(chunk) for chunk in stored)


async def test_a_reordered_or_moved_chunk_is_refused(store_factory: Factory) -> None:
    ring = keyring()
    store = await make(store_factory, keyring=ring)
    tid, _ = await streamed(store)
    tasks = store.database["tasks"]
    raw = await raw_turn(store, tid)
    at = len((await tasks.find_one({"_id": f"acme/{tid}"}))["messages"]) - 1
    text_part = next(i for i, p in enumerate(raw["content"]) if p["type"] == "text")
    chunks = raw["content"][text_part][CHUNKS_KEY]
    path = f"messages.{at}.content.{text_part}.{CHUNKS_KEY}"

    async def refused() -> None:
        fresh = Store(store.backend, keyring=ring).scoped("acme").tasks  # no cached tail
        with pytest.raises(CryptoError, match="was not sealed there"):
            await fresh.messages(tid)

    key = {"_id": f"acme/{tid}"}
    other_path = f"messages.{at}.content.{1 - text_part}.{CHUNKS_KEY}"
    await tasks.update_one(key, {"$set": {path: [chunks[1], chunks[0], *chunks[2:]]}})
    await refused()
    reasoning = raw["content"][1 - text_part][CHUNKS_KEY]  # into the reasoning part
    await tasks.update_one(key, {"$set": {path: chunks, other_path: [chunks[0], *reasoning[1:]]}})
    await refused()
    other, _ = await streamed(store)  # into another task's streamed part, same place
    await tasks.update_one(key, {"$set": {other_path: reasoning}})
    assert await Store(store.backend, keyring=ring).scoped("acme").tasks.messages(tid)  # restored
    foreign = (await raw_turn(store, other))["content"][text_part][CHUNKS_KEY]
    await tasks.update_one(key, {"$set": {path: foreign}})
    await refused()


async def test_shred_makes_streamed_text_and_agent_state_unreadable(
    store_factory: Factory,
) -> None:
    store = await make(store_factory, keyring=keyring())
    assert store.keyring is not None
    tid, mid = await streamed(store)
    tasks = store.scoped("acme").tasks
    await tasks.save_agent_state(tid, AgentState(context_summary=f"{SECRET} summary"))
    await store.keyring.shred("acme")
    for read in (tasks.get_message(tid, mid), tasks.tail(tid, 1), tasks.agent_state(tid)):
        with pytest.raises(KeyShredded):
            await read
    with pytest.raises(KeyShredded):
        async with tasks.stream(tid) as stream:
            await stream.text("more")


async def test_agent_state_is_sealed_whole_and_bound_to_its_task(
    store_factory: Factory, tmp_path: Path
) -> None:
    ring = keyring()
    store = await make(store_factory, keyring=ring)
    tasks = store.scoped("acme").tasks
    one = (await tasks.create(config=CONFIG)).id
    two = (await tasks.create(config=CONFIG)).id
    state = AgentState(context=[{"role": "user", "content": f"{SECRET} graph message"}],
                       context_summary=f"{SECRET} summary")  # fmt: skip
    state.set_interrupt("approve", f"{SECRET} reason", "interrupted_before",
                        {"ask": f"{SECRET} data", "$ref": "kept"})  # fmt: skip
    reply = AssistantMessage(id="r1", content=[TextPart(text=f"{SECRET} reply")])
    await tasks.save_agent_state(one, state, messages=[reply])
    await tasks.save_agent_state(two, AgentState(context_summary="two"))
    raw = await store.database["tasks"].find_one({"_id": f"acme/{one}"})
    assert is_sealed(raw["agent_state"])
    assert await raw_leaks(store) == []
    assert await tasks.agent_state(one) == state  # exact, escaped keys included
    assert (await tasks.messages(one))[-1].text() == f"{SECRET} reply"
    await backup(store, tmp_path / "b")
    for file in (tmp_path / "b").rglob("*.gz"):
        assert SECRET not in gzip.decompress(file.read_bytes()).decode(), file.name
    assert await verify(tmp_path / "b") is not None  # a sealed state passes the shape check
    # moved to another task: refused, not read as that task's state
    await store.database["tasks"].update_one(
        {"_id": f"acme/{two}"}, {"$set": {"agent_state": raw["agent_state"]}}
    )
    with pytest.raises(CryptoError, match="was not sealed there"):
        await tasks.agent_state(two)
    # the control: without a keyring the same state is stored in the clear
    plain = await make(store_factory)
    plain_tid = (await plain.scoped("acme").tasks.create(config=CONFIG)).id
    await plain.scoped("acme").tasks.save_agent_state(plain_tid, state)
    assert any("agent_state" in leak or SECRET in leak for leak in await raw_leaks(plain))


async def plaintext_history(store: Store) -> list[str]:
    """Tasks written without a keyring: every kind of content, a streamed turn with chunks,
    an agent state, and changes to sealed messages left in `pending` (their fold crashed)."""
    tasks = store.scoped("acme").tasks
    tids = []
    for n in range(3):
        tid = await conversation(store)
        await tasks.save_agent_state(tid, AgentState(context_summary=f"{SECRET} state {n}"))
        async with tasks.stream(tid, flush_bytes=1, flush_ms=3_600_000) as stream:
            for word in WORDS:  # chunks in the clear, sealed one by one by the sweep
                await stream.text(word)
        early = await tasks.add_assistant_message(tid)
        told = await tasks.add_human_message(tid, f"{SECRET} to redact {n}")
        for i in range(8):  # the early turn goes into a sealed page
            await tasks.add_human_message(tid, f"filler {i}")
        with unfolded(tasks):  # entries that add parts, set a part's text again and again
            await tasks.add_text_part(tid, early.id, f"{SECRET} late part {n}")
            await tasks.add_reasoning_part(tid, early.id, f"{SECRET} late reasoning {n}")
            async with tasks.stream(tid, early.id, flush_bytes=1, flush_ms=3_600_000) as s:
                for word in WORDS[:3]:
                    await s.text(word)
            await tasks.redact(tid, told.id, reason="pii")  # replace content sealed by the sweep
        document = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
        assert len(document["pending"]) >= 6 and document["sealed"] > 0
        assert any(e["p"].endswith(".text") for e in document["pending"])
        tids.append(tid)
    return tids


async def test_the_sweep_seals_agent_state_and_pending_entries_and_resumes_after_a_crash(
    store_factory: Factory, tmp_path: Path
) -> None:
    plain = await make(store_factory)
    tids = await plaintext_history(plain)
    tasks_plain = plain.scoped("acme").tasks
    expected = [[_shape(m) for m in await tasks_plain.messages(t)] for t in tids]
    states = [await tasks_plain.agent_state(t) for t in tids]
    leaks = await raw_leaks(plain)
    assert any("pending" in leak or "late part" in leak for leak in leaks)
    store = Store(plain.backend, keyring=keyring(), offload_threshold=1024,
                  page_policy=SMALL_PAGES)  # fmt: skip
    assert store.keyring is not None
    tasks = store.scoped("acme").tasks

    class Crash(Exception):
        pass

    def crash_after_one(progress: Any) -> None:
        if progress.tasks_done == 1:
            raise Crash

    with pytest.raises(Crash):
        await store.keyring.reencrypt("acme", progress=crash_after_one)
    assert 0 < len(await raw_leaks(store)) < len(leaks)
    first = await store.database["tasks"].find_one({"_id": f"acme/{min(tids)}"})
    assert is_sealed(first["agent_state"])
    assert first["pending"] and not [t for t in texts(first["pending"]) if SECRET in t]
    resumed = await store.keyring.reencrypt("acme")
    assert resumed.resumed_after is not None and resumed.tasks_done == 2
    assert await raw_leaks(store) == []  # messages, pages, payloads, state, pending
    assert [[_shape(m) for m in await tasks.messages(t)] for t in tids] == expected
    assert [await tasks.agent_state(t) for t in tids] == states
    for tid in tids:
        document = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
        assert document.get("pending")  # nothing folded them yet: sealed where they are
        await tasks.add_human_message(tid, "after the sweep")  # this write folds them
        document = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
        assert not document.get("pending")
        pages = [p async for p in store.database["task_pages"].find({"task": f"acme/{tid}"})]
        assert document["sealed_bytes"] == sum(p["size_bytes"] for p in pages)
        assert document["size_bytes"] - document["sealed_bytes"] == sum(
            bson_size(m) for m in document["messages"]
        )
        assert all(p["size_bytes"] == sum(bson_size(m) for m in p["messages"]) for p in pages)
        assert [_shape(m) for m in await tasks.messages(tid)][:-1] == expected[tids.index(tid)]
    assert await raw_leaks(store) == []
    await backup(store, tmp_path / "b")
    assert await verify(tmp_path / "b") is not None
    # a second sweep after a rotation re-seals the state with the new key
    await store.keyring.rotate("acme")
    await store.keyring.reencrypt("acme")
    document = await store.database["tasks"].find_one({"_id": f"acme/{tids[0]}"})
    assert key_version(document["agent_state"]) == 2
    assert await tasks.agent_state(tids[0]) == states[0]


async def test_a_fold_under_way_when_the_sweep_seals_pending_entries_does_not_drop_them(
    store_factory: Factory,
) -> None:
    """A fold reads the plaintext entries, the sweep seals them, then the fold writes its
    page and clears the list: the clear is refused (the sweep moved `pending_at`), so the
    next fold writes the sealed values."""
    plain = await make(store_factory)
    tid = await plaintext_history_one(plain)
    store = Store(plain.backend, keyring=keyring(), offload_threshold=1024,
                  page_policy=SMALL_PAGES)  # fmt: skip
    assert store.keyring is not None
    ring = store.keyring
    tasks = store.scoped("acme").tasks

    async def sweep() -> None:
        await ring.reencrypt("acme")

    with hooked(tasks.port.scope, "pages", ["update_one"], sweep) as pages:
        await tasks.add_human_message(tid, "this write folds")  # the sweep runs mid-fold
    assert pages.fired == 1
    document = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
    assert document.get("pending")  # the fold's clear was refused: the sealed list stays
    assert not [t for t in texts(document["pending"]) if SECRET in t]
    await tasks.add_human_message(tid, "the next write folds again")
    document = await store.database["tasks"].find_one({"_id": f"acme/{tid}"})
    assert not document.get("pending")
    await ring.reencrypt("acme", restart=True)  # what the stale fold copied back is sealed
    assert await raw_leaks(store) == []


async def plaintext_history_one(store: Store) -> str:
    tasks = store.scoped("acme").tasks
    tid = (await tasks.create(config=CONFIG)).id
    early = await tasks.add_assistant_message(tid)
    for i in range(8):
        await tasks.add_human_message(tid, f"filler {i}")
    with unfolded(tasks):
        await tasks.add_text_part(tid, early.id, f"{SECRET} late part")
    return tid


class RacingPages:
    """A database whose `task_pages` changes under the sweep once: the page's `version`
    moves (as a fold's or a seal's write does) between the sweep's read and its write."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self.fired = 0

    def __getitem__(self, name: str) -> Any:
        collection = self.database[name]
        if name != "task_pages":
            return collection
        racing = self

        class Pages:
            def __getattr__(self, attribute: str) -> Any:
                return getattr(collection, attribute)

            async def update_one(self, query: Any, update: Any, **options: Any) -> Any:
                if not racing.fired and "version" in query:
                    racing.fired += 1
                    await collection.update_one({"_id": query["_id"]}, {"$inc": {"version": 1}})
                return await collection.update_one(query, update, **options)

        return Pages()


async def test_a_page_changed_under_the_sweep_is_read_again_not_skipped(
    store_factory: Factory,
) -> None:
    from mindstore.crypto.sweep import reencrypt

    plain = await make(store_factory)
    tid = await plaintext_history_one(plain)
    expected = [_shape(m) for m in await plain.scoped("acme").tasks.messages(tid)]
    store = Store(plain.backend, keyring=keyring(), offload_threshold=1024,
                  page_policy=SMALL_PAGES)  # fmt: skip
    assert store.keyring is not None
    racing = RacingPages(store.database)
    await reencrypt(racing, await store.keyring.keys("acme", create=True))
    assert racing.fired == 1
    assert await raw_leaks(store) == []  # the page the race hit was sealed on a second read
    assert [_shape(m) for m in await store.scoped("acme").tasks.messages(tid)] == expected
