"""The lexical index's stored form at scale: the binary postings codec round-trips and
splits at its byte bound, a frequent term's postings are spread over blocks bounded in
bytes (found whole by every store, pulled whole on delete), and an index of an older
stored form is dropped and rebuilt, not misread (docs/search.md, "The model")."""

from __future__ import annotations

from typing import Any

import pytest
from bson import BSON
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TextPart
from mindstore.search import postings
from mindstore.search.postings import FORMAT, Occurrence, Packed, pack_group, unpack


@st.composite
def _postings(draw: st.DrawFn) -> list[Packed]:
    """One task's postings of one term: ascending indexes, any positions (a message's
    length, role and time are its chunk's table's: test_search_units)."""
    indexes = sorted(draw(st.sets(st.integers(0, 10**6), min_size=1, max_size=12)))
    out = []
    for index in indexes:
        places = tuple(sorted(draw(st.sets(st.integers(0, 5000), max_size=6))))
        out.append(Packed(index, places))
    return out


def _expected(ordinal: int, items: list[Packed], *, places: bool = True) -> list[Occurrence]:
    return [
        Occurrence(ordinal, p.index, len(p.positions), p.positions if places else ()) for p in items
    ]


def _seal(data: bytes, task: str, term: str) -> bytes:
    """A stand-in seal that binds its context (the real one is AES-GCM: test_search_lifecycle)."""
    return f"{task}|{term}|".encode() + data[::-1]


def _reveal(term: str) -> Any:
    def reveal(sealed: bytes, task: str) -> bytes:
        head = f"{task}|{term}|".encode()
        assert sealed.startswith(head)
        return sealed[len(head) :][::-1]

    return reveal


@given(_postings(), st.integers(1, 2**40), st.integers(1, 64), st.booleans())
@settings(max_examples=150, deadline=None)
def test_groups_round_trip_and_split_at_their_byte_bound(
    items: list[Packed], ordinal: int, bound: int, sealed: bool
) -> None:
    seal = _seal if sealed else None
    groups = pack_group(ordinal, "hotel", items, seal, bound=bound)
    for group in groups:
        assert set(group) == ({"t", "p", "x"} if sealed else {"t", "p"})
        assert group["t"] == ordinal
        # a part past its bound holds one posting only (a posting is never cut)
        assert len(group["p"]) <= bound or len(unpack(group)) == 1
        if sealed:  # bound to the ordinal, not to a task id (none starts with "#")
            assert bytes(group["x"]).startswith(f"#{ordinal}|hotel|".encode())
    # each part reads alone: together, every posting in order, positions opened
    opened = [p for g in groups for p in unpack(g, _reveal("hotel") if sealed else None)]
    assert opened == _expected(ordinal, items)
    if sealed:  # without the key the counts stay and the positions are hidden
        assert [p for g in groups for p in unpack(g)] == _expected(ordinal, items, places=False)
    if bound >= 64 and len(items) > 1:
        whole = pack_group(ordinal, "hotel", items, seal, bound=10**9)
        assert len(whole) == 1 and len(groups) >= 1


async def _block_sizes(store: mindstore.Store, term: str) -> dict[str, int]:
    """Bytes of packed postings in each block of `term` (its `_id` -> bytes)."""
    found = store.database[SEARCH_POSTINGS].find(
        {"tenant": "acme", "_id": {"$regex": f"^acme/{term}/"}}
    )
    return {
        d["_id"]: sum(len(g["p"]) + len(g.get("x") or b"") for g in d["e"]) async for d in found
    }


async def test_a_frequent_term_splits_into_bounded_blocks(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With small bounds, a term in every message fills several blocks, none past its bound
    (plus one part); a store that did not see them written finds every message, and a
    deleted task's postings leave every block."""
    monkeypatch.setattr(postings, "BLOCK_BYTES", 400)
    monkeypatch.setattr(postings, "PART_BYTES", 120)
    writer, reader = stores.sibling(), stores.sibling()
    acme, other = writer.scoped("acme"), reader.scoped("acme")
    assert (await other.search("hotel")).total == 0  # the reader knows of block 0 only
    tasks = []
    for t in range(4):
        task = await acme.tasks.create(owner=f"owner{t}")
        texts = [f"hotel room {t} {n} hotel" for n in range(40)]
        await acme.tasks.add_messages(
            task.id, [UserMessage(content=[TextPart(text=text)]) for text in texts]
        )
        tasks.append(task.id)
    assert (await acme.search("hotel", limit=5)).total == 160
    sizes = await _block_sizes(writer, "hotel")
    assert len(sizes) >= 5
    assert max(sizes.values()) <= 400 + 120 + 64  # a block: its width, one part's overshoot
    # another store, whose copy of the counter is behind, completes its lookup once
    with reader.backend.recorder.capture() as log:
        page = await other.search("hotel", limit=100)
    assert page.total == 160 and len({(h.task_id, h.index) for h in page.hits}) == 100
    # its lookup (it holds no carrier row), then the blocks it did not know of, once
    assert [c.collection for c in log].count(SEARCH_POSTINGS) == 2
    with reader.backend.recorder.capture() as log:
        assert (await other.search("hotel", limit=5)).total == 160
    assert [c.collection for c in log].count(SEARCH_POSTINGS) == 1
    # deleting a task pulls its postings from every block it wrote to
    ordinals = {
        c["task"]: c["r"] async for c in writer.database[SEARCH_ENTRIES].find({"tenant": "acme"})
    }
    assert sorted(ordinals) == sorted(tasks) and len(set(ordinals.values())) == 4
    await acme.tasks.delete(tasks[1])
    assert (await other.search("hotel", limit=5)).total == 120
    found = [
        p.ordinal
        async for d in writer.database[SEARCH_POSTINGS].find(
            {"tenant": "acme", "e": {"$exists": True}}
        )
        for g in d["e"]
        for p in unpack(g)
    ]
    assert set(found) == {ordinals[t] for t in (tasks[0], tasks[2], tasks[3])}
    # an append lands in the current block, and is found
    await acme.tasks.add_human_message(tasks[0], "one more hotel", message_id="late")
    found_late = await other.search("more hotel", match="all")  # "more" is a stop word
    assert "late" in [h.message_id for h in found_late.hits]
    assert (await acme.search_index.verify()).ok


async def test_a_block_of_one_posting_groups_stays_within_its_width(
    acme: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word written once per task makes groups of a few packed bytes each, whose keys and
    fields weigh more than their postings: each group counts its `GROUP_BYTES` too, so the
    block's whole document stays within the width (plus one part and the document's own
    fields), not the width in packed bytes alone (which here would be 9x the document)."""
    monkeypatch.setattr(postings, "BLOCK_BYTES", 2000)
    for n in range(300):
        await acme.tasks.create(messages=[UserMessage(content=[TextPart(text=f"ahoy {n}")])])
    assert (await acme.search("ahoy", limit=5)).total == 300
    documents = (
        await acme.store.database[SEARCH_POSTINGS]
        .find({"tenant": "acme", "_id": {"$regex": "^acme/ahoy/"}})
        .to_list(None)
    )
    sizes = [len(BSON.encode(d)) for d in documents]
    packed = [sum(len(g["p"]) for g in d["e"]) for d in documents]
    assert len(sizes) >= 5 and max(sizes) <= 2000 + 64 + 40
    assert max(sizes) > 5 * max(packed)  # the fields outweigh the postings
    assert (await acme.search_index.verify()).ok


async def test_a_store_whose_count_is_behind_a_rebuild_is_read_whole(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that indexed before another rebuilt the tenant still counts the bytes it
    saw: its next catch-up writes past the rebuilt count's blocks. The statistics document
    records the last block written, so a search of the rebuilt store reads that block."""
    monkeypatch.setattr(postings, "BLOCK_BYTES", 400)
    monkeypatch.setattr(postings, "PART_BYTES", 120)
    stale, fresh = stores.sibling(), stores.sibling()
    behind, current = stale.scoped("acme"), fresh.scoped("acme")
    kept = await behind.tasks.create()
    gone = await behind.tasks.create()
    for task, count in ((kept, 5), (gone, 60)):
        texts = [f"hotel room {n} hotel" for n in range(count)]
        await behind.tasks.add_messages(
            task.id, [UserMessage(content=[TextPart(text=text)]) for text in texts]
        )
    assert (await behind.search("hotel", limit=5)).total == 65
    await behind.tasks.delete(gone.id)
    await current.search_index.rebuild()  # the count starts again from the kept task
    late = await behind.tasks.create()
    await behind.tasks.add_human_message(late.id, "zebra crossing", message_id="z")
    assert [h.message_id for h in (await behind.search("zebra")).hits] == ["z"]
    stats = await fresh.database[SEARCH_POSTINGS].find_one({"_id": "acme/"})
    assert postings.block_of(stats["q"]) < stats["qb"]  # written past the count's blocks
    assert [h.message_id for h in (await current.search("zebra")).hits] == ["z"]
    assert (await current.search("hotel", limit=5)).total == 5


async def test_an_index_of_an_older_stored_form_is_rebuilt_not_misread(acme: Any) -> None:
    """Postings of stored form 2 (packed strings, partitions by task) under a statistics
    document that says so: the next search drops them and indexes again."""
    task = await acme.tasks.create(owner="ann")
    await acme.tasks.add_human_message(task.id, "hotel in lisbon", message_id="m")
    assert [hit.message_id for hit in (await acme.search("hotel")).hits] == ["m"]
    store = acme.store
    collection = store.database[SEARCH_POSTINGS]
    # as form 2 wrote it: one string per posting, partition 3, an `o` per group
    await collection.delete_many({"tenant": "acme", "_id": {"$ne": "acme/"}})
    old = {"t": task.id, "o": "ann", "p": "0,3,u,1,0"}
    await collection.insert_one({"_id": "acme/hotel/3", "tenant": "acme", "e": [old]})
    await collection.update_one({"_id": "acme/"}, {"$set": {"f": 2}, "$unset": {"q": ""}})
    store.search_states.clear()  # as a store started on the new version
    assert [hit.message_id for hit in (await acme.search("hotel")).hits] == ["m"]
    stats = await collection.find_one({"_id": "acme/"})
    assert stats["f"] == FORMAT == 5 and stats["q"] > 0
    assert await collection.find_one({"_id": "acme/hotel/3"}) is None
    assert (await acme.search_index.verify()).ok


async def test_a_search_over_many_blocks_costs_three_round_trips(
    acme: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hundreds of postings documents come back in the change check's first reply, not in
    one more round trip per 101 documents; then the tables, then the texts."""
    monkeypatch.setattr(postings, "BLOCK_BYTES", 16)
    monkeypatch.setattr(postings, "PART_BYTES", 4)
    for _ in range(4):
        task = await acme.tasks.create()
        texts = [f"alpha bravo charlie delta echo {n}" for n in range(40)]
        await acme.tasks.add_messages(
            task.id, [UserMessage(content=[TextPart(text=text)]) for text in texts]
        )
    assert (await acme.search("alpha", limit=5)).total == 160
    found = acme.store.database[SEARCH_POSTINGS].find({"tenant": "acme"})
    assert len([d async for d in found]) > 300
    with acme.store.backend.recorder.capture() as log:
        page = await acme.search("alpha bravo charlie delta echo", limit=5)
    assert page.total == 160
    assert [(c.collection, c.round_trips) for c in log] == [
        ("tasks", 1), ("search_entries", 1), ("search_entries", 1)]  # fmt: skip
