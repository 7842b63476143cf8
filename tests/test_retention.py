"""Retention: tasks not updated since a date go, with their nodes and payloads; nothing else."""

from __future__ import annotations

import datetime as dt

import bson
import pytest

import mindstore
from conftest import StoreFactory
from mindstore.backup.retention import apply_policy, erase_before, get_policy, set_policy
from mindstore.errors import MindstoreError, NotFound

OLD = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
CUTOFF = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def store(store: mindstore.Store) -> mindstore.Store:
    """The suite's store (`MINDSTORE_TEST_URI` or embedded) with a small offload threshold."""
    return StoreFactory(store).sibling(offload_threshold=64)


async def age(store, tenant, task_id, when=OLD):
    await store.database["tasks"].update_one(
        {"_id": f"{tenant}/{task_id}"}, {"$set": {"updated_at": when}}
    )


async def world(store):
    """acme: an old and a fresh task of alice, an old dialog with a fresh fork, an old dialog
    with an old fork; beta: an old task (another tenant)."""
    acme = store.scoped("acme")
    old = await acme.tasks.create(owner="alice", task_id="old")
    await acme.tasks.add_human_message("old", "big " + "x" * 200)  # offloaded payload
    await acme.tasks.create(owner="alice", task_id="fresh")
    parent = await acme.dialogs.create("bot", "sys", dialog_id="parent")
    await acme.dialogs.put_text("parent", "hi")
    fork = await acme.dialogs.fork("parent")
    chain = await acme.dialogs.create("bot", "sys", dialog_id="chain")
    chain_fork = await acme.dialogs.fork("chain")
    await store.scoped("beta").tasks.create(task_id="old")
    for tenant, task_id in (
        ("acme", old.id),
        ("acme", parent.id),
        ("acme", chain.id),
        ("acme", chain_fork.id),
        ("beta", "old"),
    ):
        await age(store, tenant, task_id)
    return fork.id, chain_fork.id


async def dump(store):
    out = {}
    for name in ("tasks", "dialog_nodes", "payloads"):
        out[name] = {
            d["_id"]: bson.encode(d) for d in await store.database[name].find({}).to_list()
        }
    return out


async def test_old_tasks_go_with_their_nodes_and_payloads_and_forks_are_respected(store):
    _fork, chain_fork = await world(store)
    before = await dump(store)
    dry = await erase_before(store, "acme", before=CUTOFF, dry_run=True)
    assert await dump(store) == before
    receipt = await erase_before(store, "acme", before=CUTOFF)
    assert dry.counts == receipt.counts and dry.kept_with_forks == receipt.kept_with_forks
    after = await dump(store)
    gone = set(before["tasks"]) - set(after["tasks"])
    # old, chain and its old fork go (the fork first, then its parent in the same run);
    # parent stays because its fork is fresh; beta is another tenant
    assert gone == {"acme/old", "acme/chain", f"acme/{chain_fork}"}
    assert receipt.kept_with_forks == ["parent"]
    assert not any(k.startswith("acme/old") or k == "acme/chain" for k in after["dialog_nodes"])
    assert (
        await store.database["payloads"].count_documents({"tenant": "acme", "task_id": "old"}) == 0
    )
    for name, docs in after.items():  # everything that stayed is byte-identical
        for key, raw in docs.items():
            assert before[name][key] == raw
    assert "beta/old" in after["tasks"]


async def test_a_task_written_during_the_sweep_is_kept(store, monkeypatch):
    await world(store)
    acme = store.scoped("acme")
    original = type(store.backend.database["tasks"]).delete_many

    async def write_first(self, query, *args, **kwargs):
        await acme.tasks.add_human_message("old", "still talking")  # the sweep raced a writer
        monkeypatch.setattr(type(self), "delete_many", original)
        return await original(self, query, *args, **kwargs)

    monkeypatch.setattr(type(store.backend.database["tasks"]), "delete_many", write_first)
    receipt = await erase_before(store, "acme", before=CUTOFF)
    assert "acme/old" in {d["_id"] for d in await store.database["tasks"].find({}).to_list()}
    assert (await acme.tasks.get("old")).seq == 2  # nothing of it was lost
    assert (
        await store.database["payloads"].count_documents({"tenant": "acme", "task_id": "old"}) == 1
    )
    assert receipt.counts["tasks"] == 2  # chain and its fork


async def test_an_interrupted_sweep_finishes_on_the_next_run(store, monkeypatch):
    await world(store)
    nodes = type(store.backend.database["dialog_nodes"])
    original = nodes.delete_many

    async def crash(self, *args, **kwargs):
        raise RuntimeError("process died after deleting tasks")

    monkeypatch.setattr(nodes, "delete_many", crash)
    with pytest.raises(RuntimeError):
        await erase_before(store, "acme", before=CUTOFF)
    monkeypatch.setattr(nodes, "delete_many", original)
    second = await erase_before(store, "acme", before=CUTOFF)
    assert second.counts["dialog_nodes"] >= 1  # the leftovers of the first run
    assert (
        await store.database["payloads"].count_documents({"tenant": "acme", "task_id": "old"}) == 0
    )
    again = await erase_before(store, "acme", before=CUTOFF)
    assert again.counts == {"tasks": 0, "dialog_nodes": 0, "payloads": 0}


async def test_policies_and_bad_arguments(store):
    await world(store)
    with pytest.raises(NotFound):
        await apply_policy(store, "acme")
    assert await get_policy(store, "acme") is None
    await set_policy(store, "acme", max_age_days=365)
    assert (await get_policy(store, "acme"))["max_age_days"] == 365
    receipt = await apply_policy(store, "acme")
    assert receipt.counts["tasks"] == 3
    before = await dump(store)
    for call in (
        lambda: erase_before(store, "acme", before="yesterday"),
        lambda: erase_before(store, "acme", before=dt.timedelta(days=-1)),
        lambda: erase_before(store, {"$ne": 1}, before=CUTOFF),
        lambda: erase_before(store, "acme", before=CUTOFF, owner={"$gt": ""}),
        lambda: set_policy(store, "acme", max_age_days=0),
        lambda: set_policy(store, "acme", max_age_days="30"),
    ):
        with pytest.raises(MindstoreError):
            await call()
    assert await dump(store) == before
