"""Erase: exactly the data asked for, a receipt that can be checked, no silent dangling nodes."""

from __future__ import annotations

import hashlib
import json

import bson
import pytest

from mindstore.backup import erase, ids_digest
from mindstore.errors import ValidationError
from mindstore.ids import task_key

OWNERS = ("alice", "bob", "carol")


async def _populate(store):
    """Tenant acme with three owners (bob forks one of alice's dialogs), tenant beta."""
    ids: dict[tuple[str, str], list[str]] = {}
    for tenant, owners in (("acme", OWNERS), ("beta", ("alice",))):
        for owner in owners:
            for n in range(2):
                task = await store.scoped(tenant).tasks.create(owner=owner, title=f"{owner} {n}")
                await store.scoped(tenant).tasks.add_human_message(task.id, f"hi {n}")
                await store.scoped(tenant).tasks.add_system_message(task.id, "sys")
                ids.setdefault((tenant, owner), []).append(task.id)
                await store.database["payloads"].insert_one(
                    {
                        "_id": f"p-{task.id}",
                        "tenant": tenant,
                        "task_id": task.id,
                        "data": b"\x01" * 8,
                    }
                )
    nodes = store.database["dialog_nodes"]
    alice_root = ids[("acme", "alice")][0]
    await nodes.insert_one(
        {
            "_id": task_key("acme", alice_root),
            "tenant": "acme",
            "owner": "alice",
            "parent_id": None,
            "root_id": alice_root,
            "ancestors": [],
        }
    )
    bob_fork = ids[("acme", "bob")][0]  # bob forked alice's dialog: another owner's child
    await nodes.insert_one(
        {
            "_id": task_key("acme", bob_fork),
            "tenant": "acme",
            "owner": "bob",
            "parent_id": alice_root,
            "root_id": alice_root,
            "ancestors": [alice_root],
        }
    )
    # an orphan node of alice whose task was already deleted: erased with her data
    await nodes.insert_one(
        {
            "_id": "gone-task",
            "tenant": "acme",
            "owner": "alice",
            "parent_id": None,
            "root_id": "gone-task",
        }
    )
    return ids


async def _snapshot(store) -> dict[str, dict[str, bytes]]:
    out = {}
    for name in ("tasks", "dialog_nodes", "payloads"):
        out[name] = {
            d["_id"]: bson.encode(d) for d in await store.database[name].find({}).to_list()
        }
    return out


async def test_erasing_one_owner_leaves_everyone_else_byte_identical(store):
    ids = await _populate(store)
    before = await _snapshot(store)
    alice = ids[("acme", "alice")]
    receipt = await erase(store, "acme", owner="alice")
    after = await _snapshot(store)

    erased = {
        "tasks": {task_key("acme", t) for t in alice},
        "dialog_nodes": {task_key("acme", alice[0]), "gone-task"},
        "payloads": {f"p-{t}" for t in alice},
    }
    for name, docs in before.items():
        assert set(after[name]) == set(docs) - erased[name]
        for _id, raw in after[name].items():
            assert raw == docs[_id]  # byte-identical, bob's dangling fork included
    assert receipt.counts == {"tasks": 2, "dialog_nodes": 2, "payloads": 2}
    assert receipt.messages == 4
    # beta's alice is another tenant's user: untouched
    assert {task_key("beta", t) for t in ids[("beta", "alice")]} <= set(after["tasks"])
    # bob's fork lost its parent: said so in the receipt
    assert receipt.dangling_total == 1
    assert receipt.dangling_dialog_nodes == [
        {"id": ids[("acme", "bob")][0], "missing_parent": alice[0], "owner": "bob"}
    ]
    # the receipt's hash is reproducible from the erased ids
    lines = sorted(
        f"{name}\t{json.dumps(i)}\n".encode() for name, values in erased.items() for i in values
    )
    assert receipt.ids_sha256 == hashlib.sha256(b"".join(lines)).hexdigest()
    assert receipt.ids_sha256 == ids_digest({k: list(v) for k, v in erased.items()})
    data = receipt.to_dict()
    assert data["kind"] == "mindstore-erase-receipt" and data["total"] == 6
    assert not any(i in json.dumps(data) for i in alice[1:])  # no erased ids in the receipt

    again = await erase(store, "acme", owner="alice")  # idempotent
    assert again.total == 0 and await _snapshot(store) == after


async def test_dry_run_erases_nothing_and_reports_the_same(store):
    await _populate(store)
    before = await _snapshot(store)
    dry = await erase(store, "acme", owner="alice", dry_run=True)
    assert await _snapshot(store) == before
    real = await erase(store, "acme", owner="alice")
    assert dry.dry_run and not real.dry_run
    assert (dry.counts, dry.ids_sha256, dry.dangling_dialog_nodes) == (
        real.counts,
        real.ids_sha256,
        real.dangling_dialog_nodes,
    )


async def test_erase_one_task_and_a_whole_tenant(store):
    ids = await _populate(store)
    carol = ids[("acme", "carol")][1]
    receipt = await erase(store, "acme", task_id=carol)
    assert receipt.counts == {"tasks": 1, "dialog_nodes": 0, "payloads": 1}
    assert await store.database["tasks"].find_one({"_id": task_key("acme", carol)}) is None
    # a task of another tenant is not found under this tenant
    other = ids[("beta", "alice")][0]
    assert (await erase(store, "acme", task_id=other)).total == 0
    assert await store.database["tasks"].find_one({"_id": task_key("beta", other)}) is not None

    beta_before = {k: dict(d) for k, d in (await _snapshot(store)).items()}
    whole = await erase(store, "acme")
    assert whole.counts == {"tasks": 5, "dialog_nodes": 3, "payloads": 5}
    assert whole.dangling_total == 0
    after = await _snapshot(store)
    for name, docs in after.items():
        assert all(bson.decode(raw)["tenant"] == "beta" for raw in docs.values())
        assert docs == {
            i: v for i, v in beta_before[name].items() if bson.decode(v)["tenant"] == "beta"
        }


async def test_erase_validates_its_arguments(store):
    with pytest.raises(ValidationError):
        await erase(store, "acme", owner="a", task_id="t")
    with pytest.raises(ValidationError):
        await erase(store, "bad tenant!")
    with pytest.raises(ValidationError):
        await erase(store, "acme", task_id={"$ne": None})
