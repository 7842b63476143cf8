"""Task ordinals (stored form 5, docs/search.md "The model"): a postings group names its
task by an ordinal the tenant hands out once, and a message's length, role and time are
its chunk's table's. Each task gets its own ordinal under racing searches and keeps it;
a rebuild never hands one out twice; an ordinal two tasks' chunks claim is read for
neither (no posting is read under another task's owner); ordinals past 32 bits, a task's
compressed terms and hostile groups round-trip or are ignored."""

from __future__ import annotations

import asyncio
from typing import Any

from bson import BSON, Binary
from hypothesis import given, settings
from hypothesis import strategies as st

import mindstore
from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_POSTINGS, SEARCH_TASKS
from mindstore.ids import task_key
from mindstore.search.entries import tables_of
from mindstore.search.postings import pack_terms, unpack_terms


async def _ordinals(store: mindstore.Store, tenant: str = "acme") -> dict[str, int]:
    """Task key -> the ordinal its mark holds."""
    marks = store.database[SEARCH_TASKS].find({"tenant": tenant})
    return {m["_id"]: m["r"] async for m in marks if not m["_id"].endswith("~terms")}


async def _chunk_ordinals(store: mindstore.Store, tenant: str = "acme") -> dict[str, set[int]]:
    """Task id -> the ordinals its chunks carry."""
    out: dict[str, set[int]] = {}
    async for chunk in store.database[SEARCH_ENTRIES].find({"tenant": tenant}):
        out.setdefault(chunk["task"], set()).add(chunk["r"])
    return out


async def test_each_task_gets_its_own_ordinal_under_racing_searches(stores: Any) -> None:
    views = [stores.sibling().scoped("acme") for _ in range(3)]
    made = []
    for n in range(40):
        task = await views[0].tasks.create(owner=f"owner{n % 3}")
        await views[0].tasks.add_human_message(task.id, f"lantern {n}")
        made.append(task.id)
    pages = await asyncio.gather(*(view.search("lantern", limit=100) for view in views))
    assert [page.total for page in pages] == [40, 40, 40]
    marks = await _ordinals(views[0].store)
    assert len(marks) == 40 and len(set(marks.values())) == 40
    chunks = await _chunk_ordinals(views[0].store)
    assert {task: {marks[task_key("acme", task)]} for task in made} == chunks
    # an append and a whole re-index (a redaction) keep the task's ordinal
    await views[1].tasks.add_human_message(made[0], "lantern again", message_id="again")
    await views[1].tasks.add_human_message(made[1], "lantern secret", message_id="secret")
    await views[1].tasks.redact(made[1], "secret")
    assert (await views[2].search("lantern", limit=100)).total == 41
    assert await _ordinals(views[0].store) == marks
    assert (await views[0].search_index.verify()).ok


async def test_a_rebuild_never_hands_out_an_ordinal_twice(acme: mindstore.TenantStore) -> None:
    for n in range(5):
        task = await acme.tasks.create()
        await acme.tasks.add_human_message(task.id, f"compass {n}")
    assert (await acme.search("compass")).total == 5
    before = await _ordinals(acme.store)
    await acme.search_index.rebuild()
    after = await _ordinals(acme.store)
    assert sorted(after) == sorted(before)
    assert min(after.values()) > max(before.values())
    assert (await acme.search("compass")).total == 5
    assert (await acme.search_index.verify()).ok


async def test_an_ordinal_two_tasks_chunks_claim_is_read_for_neither(stores: Any) -> None:
    """A chunk a catch-up cut off by an erase left behind (until its take-back) may carry
    an ordinal a later task was given: the search reads that ordinal's postings for no
    task, so bob's words are never shown as alice's, nor alice's under bob's scope."""
    store = stores.sibling()
    acme = store.scoped("acme")
    alice = await acme.tasks.create(owner="alice")
    await acme.tasks.add_human_message(alice.id, "harbour of alice", message_id="a")
    bob = await acme.tasks.create(owner="bob")
    await acme.tasks.add_human_message(bob.id, "harbour of bob", message_id="b")
    assert {h.message_id for h in (await acme.search("harbour")).hits} == {"a", "b"}
    entries = store.database[SEARCH_ENTRIES]
    ordinal = (await entries.find_one({"tenant": "acme", "task": alice.id}))["r"]
    stray = await entries.find_one({"tenant": "acme", "task": bob.id})
    # a chunk of bob's task at another index (as a stale catch-up's would be named)
    stray = {**stray, "_id": f"{stray['_id'].rpartition('/')[0]}/0000000007", "r": ordinal}
    await entries.insert_one(stray)
    for view in (acme, store.scoped("acme", owner="alice"), store.scoped("acme", owner="bob")):
        hits = (await view.search("harbour")).hits
        assert [(h.task_id, h.owner) for h in hits] in ([], [(bob.id, "bob")])
        assert all(h.message_id != "a" for h in hits)
    await entries.delete_one({"_id": stray["_id"]})
    alone = store.scoped("acme", owner="alice")
    assert {h.message_id for h in (await alone.search("harbour")).hits} == {"a"}


async def test_ordinals_past_32_bits_are_read_and_pulled(acme: mindstore.TenantStore) -> None:
    """BSON keeps an ordinal past 2**31 as an int64, which reads back as another type."""
    assert (await acme.search("nothing")).total == 0  # the statistics document exists
    await acme.store.database[SEARCH_POSTINGS].update_one(
        {"_id": "acme/"}, {"$set": {"r": 2**31 + 5}}
    )
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "meridian line", message_id="m")
    assert [h.message_id for h in (await acme.search("meridian")).hits] == ["m"]
    assert set((await _ordinals(acme.store)).values()) == {2**31 + 6}
    assert (await acme.search_index.verify()).ok
    await acme.tasks.delete(task.id)
    assert (await acme.search("meridian")).total == 0
    left = await acme.store.database[SEARCH_POSTINGS].count_documents(
        {"tenant": "acme", "_id": {"$ne": "acme/"}}
    )
    assert left == 0


async def test_a_group_that_names_no_ordinal_is_ignored(acme: mindstore.TenantStore) -> None:
    task = await acme.tasks.create()
    await acme.tasks.add_human_message(task.id, "quartz clock", message_id="q")
    assert (await acme.search("quartz")).total == 1
    postings = acme.store.database[SEARCH_POSTINGS]
    (block,) = await postings.find({"tenant": "acme", "_id": {"$regex": "^acme/quartz/"}}).to_list(
        None
    )
    hostile = [{"t": value, "p": Binary(b"\x00\x01\x00")} for value in
               ("1", True, 1.0, None, -3, 0, {"$gt": 0})]  # fmt: skip
    await postings.update_one({"_id": block["_id"]}, {"$push": {"e": {"$each": hostile}}})
    page = await acme.search("quartz")
    assert [h.message_id for h in page.hits] == ["q"]


@given(st.lists(st.text(max_size=12), max_size=40))
@settings(max_examples=200, deadline=None)
def test_a_tasks_terms_round_trip_compressed(terms: list[str]) -> None:
    halves = [terms[: len(terms) // 2], terms[len(terms) // 2 :]]
    stored = BSON.encode({"k": [pack_terms(part) for part in halves]}).decode()["k"]
    assert unpack_terms(stored) == list(dict.fromkeys(terms))


_CHUNKS = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from(["t1", "t2", "t3"]), st.sampled_from(["a", "b"])),
    max_size=12,
)


@given(_CHUNKS)
@settings(max_examples=200, deadline=None)
def test_an_ordinal_is_read_only_when_its_chunks_agree_on_task_and_owner(
    chunks: list[tuple[int, str, str]],
) -> None:
    documents = [  # the task a chunk names is its `_id`'s (`<tenant>\x1f<task>/<first>`)
        {"_id": f"{task_key('acme', task)}/{n:010d}", "r": r, "task": "other", "o": owner,
         "g": b"", "m": b""}
        for n, (r, task, owner) in enumerate(chunks)
    ]  # fmt: skip
    expected = {r: {(task, owner) for rr, task, owner in chunks if rr == r} for r, _t, _o in chunks}
    tables = tables_of(documents)
    assert set(tables) == {r for r, named in expected.items() if len(named) == 1}
    for r, table in tables.items():
        assert {(table.task, table.owner)} == expected[r]


async def test_the_tables_of_many_tasks_are_read_in_bounded_parts(
    acme: mindstore.TenantStore, monkeypatch: Any
) -> None:
    """A query whose words are in more tasks than one read names reads their tables in
    parts, and ranks the same."""
    from mindstore.search import index as search_index

    for n in range(7):
        task = await acme.tasks.create()
        await acme.tasks.add_human_message(task.id, f"beacon {'x ' * n}", message_id=f"b{n}")
    whole = await acme.search("beacon", limit=10)
    monkeypatch.setattr(search_index, "TABLE_ORDINALS", 2)
    with acme.store.backend.recorder.capture() as log:
        parts = await acme.search("beacon", limit=10)
    assert [(h.message_id, h.score) for h in parts.hits] == [
        (h.message_id, h.score) for h in whole.hits
    ]
    assert len(parts.hits) == 7
    assert [c.collection for c in log].count(SEARCH_ENTRIES) == 4 + 1  # 4 parts, the texts
