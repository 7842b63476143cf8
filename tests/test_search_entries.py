"""The index's entries packed per task and chunk (docs/search.md, "The model"): the packing
round trip and its bounds (hypothesis, against an independent reading of the rules), the
lookup of the chunk holding a message (one chunk per hit, one round trip per page), sealed
chunks bound to their tenant, and an index of stored form 3 (one entry per message)
dropped and rebuilt by the next search."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from mindstore import Store
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS
from mindstore.crypto import Keyring, LocalMasterKey
from mindstore.crypto.aead import is_sealed
from mindstore.errors import CryptoError
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TextPart
from mindstore.search.entries import (
    CHUNK_SPAN,
    CHUNK_TEXT,
    Entry,
    chunk_indexes,
    holding,
    key_of,
    pack_chunks,
    unpack_chunk,
)
from mindstore.search.postings import FORMAT


def _plain(payload: bytes, _task: str, _chunk: str) -> bytes:
    return payload


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _matches(clause: dict[str, Any], chunk: dict[str, Any]) -> bool:
    """`holding`'s clause evaluated as a server would: `_id` range, then `l` bound."""
    ids, last = clause["_id"], clause["l"]
    return ids["$gte"] <= chunk["_id"] < ids["$lt"] and chunk["l"] >= last["$gte"]


MESSAGES = st.lists(
    st.tuples(
        st.integers(0, 40),  # the gap to the previous indexed message
        st.text(min_size=1, max_size=12),  # its id
        st.text(max_size=3000),  # its text: a few pass CHUNK_TEXT together, or alone
    ),
    min_size=1,
    max_size=60,
)


@given(MESSAGES)
@settings(max_examples=60, deadline=None)
def test_chunks_give_back_each_message_within_their_bounds(drawn: list[Any]) -> None:
    index, entries = -1, []
    for gap, message_id, text in drawn:
        index += gap + 1
        entries.append(Entry(f"acme/t/{index}", index, message_id, len(text), text, {}))
    chunks = pack_chunks(entries, "acme", "t", "ann", _plain)
    # every message once, in order, with its id and text; the clear indexes agree
    opened = [row for chunk in chunks for row in unpack_chunk(chunk, chunk["z"])]
    assert opened == [(e.index, e.message_id, e.text) for e in entries]
    assert [i for chunk in chunks for i in chunk_indexes(chunk)] == [e.index for e in entries]
    for chunk in chunks:
        held = [e for e in entries if e.index in chunk_indexes(chunk)]
        assert chunk["l"] == held[-1].index and chunk["n"] == sum(e.length for e in held)
        assert chunk["l"] - held[0].index < CHUNK_SPAN
        assert len(held) == 1 or sum(_size(e.text) for e in held) <= CHUNK_TEXT
        assert key_of(chunk["_id"]) == "acme/t" and chunk["o"] == "ann"
    # each message's lookup clause selects exactly the chunk holding it
    for entry in entries:
        chosen = [c["_id"] for c in chunks if _matches(holding(entry.id), c)]
        assert chosen == [c["_id"] for c in chunks if entry.index in chunk_indexes(c)]


def test_a_chunk_is_closed_at_its_span_and_at_its_bytes() -> None:
    def entry(index: int, size: int) -> Entry:
        return Entry(f"acme/t/{index}", index, f"m{index}", 1, "x" * size, {})

    small = pack_chunks(
        [entry(i, 10) for i in range(2 * CHUNK_SPAN + 6)], "acme", "t", None, _plain
    )
    assert [chunk_indexes(c)[0] for c in small] == [0, CHUNK_SPAN, 2 * CHUNK_SPAN]
    large = pack_chunks([entry(i, CHUNK_TEXT // 3) for i in range(7)], "acme", "t", None, _plain)
    assert [len(chunk_indexes(c)) for c in large] == [3, 3, 1]
    alone = pack_chunks([entry(0, 5), entry(1, 3 * CHUNK_TEXT), entry(2, 5)], "acme", "t",
                        None, _plain)  # fmt: skip
    assert [chunk_indexes(c) for c in alone] == [[0], [1], [2]]


async def test_a_page_reads_one_bounded_chunk_per_hit_in_one_round_trip(acme: Any) -> None:
    """120 messages of 1,000 bytes: chunks of 8 (8 KiB); a page of 5 hits spread over the
    task reads the 5 chunks holding them, once, and no more."""
    task = await acme.tasks.create()
    texts = [f"needle{n % 24} " + "haystack " * 110 for n in range(120)]
    await acme.tasks.add_messages(
        task.id, [UserMessage(id=f"m{n}", content=[TextPart(text=t)]) for n, t in enumerate(texts)]
    )
    assert (await acme.search("zzz")).total == 0  # indexed
    chunks = await acme.store.database[SEARCH_ENTRIES].find({"tenant": "acme"}).to_list(None)
    assert len(chunks) == 15 and all(len(chunk_indexes(c)) == 8 for c in chunks)
    largest = max(len(bytes(c["z"])) for c in chunks)
    with acme.store.backend.recorder.capture() as log:
        page = await acme.search("needle3", limit=5)
    assert {hit.message_id for hit in page.hits} == {f"m{n}" for n in (3, 27, 51, 75, 99)}
    assert all("needle3" in hit.snippet.text for hit in page.hits)
    # two finds: the task's tables (its chunks' clear fields), then the page's texts
    read = log.by_name("find")
    assert [c.collection for c in read] == [SEARCH_ENTRIES] * 2 and read.round_trips == 2
    tables = read[0].bytes_received
    assert tables <= 15 * (200 + 8 * 4)  # 15 chunks' ids, owners and tables, no text
    assert read.bytes_received - tables <= 5 * (largest + 200)  # five chunks and fields


def _keyring() -> Keyring:
    return Keyring(LocalMasterKey(os.urandom(32)))


async def test_a_sealed_chunk_opens_in_its_own_tenant_only(stores: Any) -> None:
    """Two tenants under one keyring: acme's chunk put in the place of globex's (its
    `_id`, tenant and task) does not open there."""
    store = Store(stores.store.backend, keyring=_keyring())
    made = {}
    for tenant in ("acme", "globex"):
        view = store.scoped(tenant)
        task = await view.tasks.create(task_id="same")
        await view.tasks.add_human_message(task.id, f"zebracorn of {tenant}", message_id="m")
        assert [h.snippet.text for h in (await view.search("zebracorn")).hits] == [
            f"zebracorn of {tenant}"
        ]
        made[tenant] = await store.database[SEARCH_ENTRIES].find_one({"tenant": tenant})
    assert is_sealed(made["acme"]["z"]) and b"zebracorn" not in bytes(made["acme"]["z"])
    entries = store.database[SEARCH_ENTRIES]
    await entries.update_one({"_id": made["globex"]["_id"]}, {"$set": {"z": made["acme"]["z"]}})
    with pytest.raises(CryptoError, match=r"search\.z"):
        await store.scoped("globex").search("zebracorn")


async def test_an_index_of_stored_form_3_is_dropped_and_rebuilt(acme: Any) -> None:
    """Entries of form 3 (one document per message, its text in clear in `x`) under a
    statistics document that says form 3: the next search drops them, packs the task's
    entries anew and answers with the right snippet."""
    task = await acme.tasks.create(owner="ann")
    await acme.tasks.add_human_message(task.id, "hotel in lisbon", message_id="m")
    assert [hit.message_id for hit in (await acme.search("hotel")).hits] == ["m"]
    store = acme.store
    entries, postings = store.database[SEARCH_ENTRIES], store.database[SEARCH_POSTINGS]
    await entries.delete_many({"tenant": "acme"})
    old = {"_id": f"acme/{task.id}/0", "tenant": "acme", "task": task.id, "i": 0, "m": "m",
           "o": "ann", "n": 3, "x": "stale words of form three"}  # fmt: skip
    await entries.insert_one(old)
    await postings.update_one({"_id": "acme/"}, {"$set": {"f": 3}})
    store.search_states.clear()  # as a store started on the new version
    hits = (await acme.search("hotel")).hits
    assert [(h.message_id, h.snippet.text) for h in hits] == [("m", "hotel in lisbon")]
    assert (await postings.find_one({"_id": "acme/"}))["f"] == FORMAT == 5
    held = await entries.find({"tenant": "acme"}).to_list(None)
    assert [d["_id"] for d in held] == [f"acme/{task.id}/0000000000"] and "x" not in held[0]
    assert (await acme.search_index.verify()).ok


async def test_a_redaction_rewrites_the_task_chunks_without_the_message(
    acme: mindstore.TenantStore,
) -> None:
    """The redacted message's text is packed with its neighbours': every chunk of its
    task goes with the redaction, and the next search packs the others anew."""
    task = await acme.tasks.create()
    for n, text in enumerate(["first words", "quokkafy secret words", "last words"]):
        await acme.tasks.add_human_message(task.id, text, message_id=f"m{n}")
    assert len((await acme.search("words")).hits) == 3
    entries = acme.store.database[SEARCH_ENTRIES]
    await acme.tasks.redact(task.id, "m1")
    assert await entries.count_documents({"tenant": "acme"}) == 0  # before any search
    assert sorted(h.message_id for h in (await acme.search("words")).hits) == ["m0", "m2"]
    held = await entries.find({"tenant": "acme"}).to_list(None)
    opened = [row for chunk in held for row in unpack_chunk(chunk, bytes(chunk["z"]))]
    assert [(i, m) for i, m, _ in opened] == [(0, "m0"), (2, "m2")]
    assert not [t for _, _, t in opened if "quokkafy" in t]
    assert (await acme.search_index.verify()).ok


async def test_a_task_whose_mark_another_caller_took_loses_its_chunks_and_vectors(
    stores: Any,
) -> None:
    """`forget_task` after another caller deleted the mark: the task's chunks are found by
    its `_id` range and their vectors by the indexes the chunks hold; the other task's
    stay."""
    from mindstore.collection_names import SEARCH_TASKS, SEARCH_VECTORS
    from mindstore.search import HashingEmbedder
    from mindstore.search.lifecycle import forget_task

    store = Store(stores.store.backend, embedder=HashingEmbedder(16))
    acme = store.scoped("acme")
    gone, kept = [await acme.tasks.create() for _ in range(2)]
    for task in (gone, kept):
        texts = [f"wedding note {n}" for n in range(70)]  # two chunks each
        await acme.tasks.add_messages(
            task.id, [UserMessage(content=[TextPart(text=t)]) for t in texts]
        )
    assert (await acme.search("wedding", mode="lexical")).total == 140
    database = store.database
    assert await database[SEARCH_VECTORS].count_documents({"task": gone.id}) == 70
    await database[SEARCH_TASKS].delete_one({"_id": f"acme/{gone.id}"})
    await forget_task(database, "acme", gone.id)
    for name, left in ((SEARCH_ENTRIES, 2), (SEARCH_VECTORS, 70)):
        assert await database[name].count_documents({"task": gone.id}) == 0
        assert await database[name].count_documents({"task": kept.id}) == left


async def test_a_text_whose_chunk_was_cut_anew_is_read_by_its_range(acme: Any) -> None:
    """A page names each hit's chunk as the tables read saw it and reads those by `_id`; a
    message that is no longer there (its task chunked anew between the two reads) is
    read by the range that holds it, one more find, and not dropped from the page."""
    from mindstore.ids import task_key
    from mindstore.search.codec import codec_for

    task = await acme.tasks.create()
    await acme.tasks.add_messages(
        task.id, [UserMessage(id=f"m{n}", content=[TextPart(text=f"word {n}")]) for n in range(70)]
    )
    assert (await acme.search("word")).total == 70
    index = acme._search_store
    codec = await codec_for("acme", None, await index.state())
    key = task_key("acme", task.id)
    names = [f"{key}/3", f"{key}/66"]
    with acme.store.backend.recorder.capture() as log:
        right = await index.texts(names, codec, {names[0]: f"{key}/0000000000",
                                                 names[1]: f"{key}/0000000064"})  # fmt: skip
    assert {n: t.message_id for n, t in right.items()} == {names[0]: "m3", names[1]: "m66"}
    assert log.round_trips == 1
    with acme.store.backend.recorder.capture() as log:
        moved = await index.texts(names, codec, {names[0]: f"{key}/0000000000",
                                                 names[1]: f"{key}/0000000009"})  # fmt: skip
    assert {n: t.message_id for n, t in moved.items()} == {names[0]: "m3", names[1]: "m66"}
    assert log.round_trips == 2
