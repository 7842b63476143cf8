"""Backup -> restore is lossless; scopes hold exactly their data; restore modes and tenants."""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import tempfile
from pathlib import Path

import bson
import pytest
from bson import Binary, Decimal128, Int64
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_backup_support import (
    COLLECTIONS,
    keys,
    messages,
    new_store,
    raw_dump,
    read_file_records,
    values,
)

from mindstore.backup import (
    BackupError,
    RestoreConflict,
    backup,
    restore,
    verify,
)
from mindstore.errors import ValidationError
from mindstore.ids import task_key
from mindstore.model.parts import TaskConfigPart, ToolCallPart, ToolMetadata

UTC = dt.timezone.utc

# ----------------------------------------------------------------------------- property


def _ms(moment: dt.datetime) -> dt.datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


raw_task = st.fixed_dictionaries({
    "tenant": st.sampled_from(["acme", "beta"]),
    "owner": st.one_of(st.none(), st.sampled_from(["alice", "bob", "ünï-😀"])),
    "title": st.one_of(st.none(), st.text(max_size=20)),
    "updated_at": st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2100, 1, 1),
                               timezones=st.just(UTC)).map(_ms),
    "metadata": st.dictionaries(keys, values(10), max_size=3),
    "messages": messages,
    "seq": st.one_of(st.integers(0, 10), st.integers(0, 10).map(Int64)),
})


@st.composite
def datasets(draw):
    tasks = draw(st.lists(raw_task, min_size=1, max_size=4))
    docs = {name: [] for name in COLLECTIONS}
    for index, task in enumerate(tasks):
        task_id = f"task-{index}"
        docs["tasks"].append({"_id": task_key(task["tenant"], task_id), **task})
        if draw(st.booleans()):
            parent = draw(st.one_of(st.none(), st.sampled_from([f"task-{i}" for i in range(len(tasks))])))
            docs["dialog_nodes"].append({"_id": task_key(task["tenant"], task_id), "tenant": task["tenant"], "owner": task["owner"],
                                         "parent_id": parent, "root_id": task_id,
                                         "ancestors": [] if parent is None else [parent],
                                         "extra": draw(values(8))})
        for number in range(draw(st.integers(0, 2))):
            docs["payloads"].append({"_id": f"p-{index}-{number}", "tenant": task["tenant"],
                                     "task_id": task_id, "message_id": "m", "path": "content.0",
                                     "data": draw(st.one_of(st.binary(max_size=64), values(8)))})
    return docs


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=datasets(), as_tar=st.booleans())
def test_any_stored_data_survives_backup_and_restore_unchanged(data, as_tar):
    async def scenario() -> None:
        source, target = await new_store(), await new_store()
        try:
            for name, docs in data.items():
                if docs:
                    await source.database[name].insert_many(docs)
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / ("b.tar" if as_tar else "b")
                manifest = await backup(source, path)
                assert manifest.counts == {name: len(docs) for name, docs in data.items()}
                await verify(path)
                report = await restore(target, path)
                assert report.totals["inserted"] == sum(len(d) for d in data.values())
            assert await raw_dump(target) == await raw_dump(source)
        finally:
            await source.close()
            await target.close()

    asyncio.run(scenario())


async def test_realistic_conversations_survive_backup_and_restore(tmp_path):
    source = await new_store(offload_threshold=64)  # small: some values go to payloads
    acme = source.scoped("acme")
    config = TaskConfigPart(model_name="openai/gpt-4o", tool_metadata=[ToolMetadata(
        name="search", parameters={"$schema": "https://json-schema.org/draft/2020-12/schema",
                                   "$ref": "#/$defs/q", "$defs": {"q": {"type": "string"}}})])
    task = await acme.tasks.create(owner="alice", title="Trip ✈", config=config,
                                   metadata={"$ref": "crm", "$id": 7, "n": Int64(2**40)})
    await acme.tasks.add_human_message(task.id, "Plan a trip to Lisbon " * 10, message_id="u1")
    await acme.tasks.add_assistant_message(task.id, message_id="a1")
    await acme.tasks.add_text_part(task.id, "a1", "Searching…")
    await acme.tasks.add_tool_call_part(task.id, "a1", ToolCallPart(
        tool_call_id="c1", tool_name="search", args={"$ref": "#/a", "q": "hotels"}))
    await acme.tasks.add_message(task.id, {"role": "critic", "id": "x1", "verdict": {"$gt": 3},
                                           "blob": Binary(b"\x00\x01", 0x80),
                                           "price": Decimal128("12.30"),
                                           "at": dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)})
    other = await source.scoped("beta").tasks.create(owner="carol", content="hello")
    await source.database["dialog_nodes"].insert_one(
        {"_id": task_key("acme", task.id), "tenant": "acme", "owner": "alice", "parent_id": None, "root_id": task.id,
         "ancestors": [], "depth": 0, "created_at": dt.datetime(2026, 1, 1, tzinfo=UTC)})
    assert await source.database["payloads"].count_documents({}) >= 1

    manifest = await backup(source, tmp_path / "all")
    assert manifest.tenants == ["acme", "beta"] and manifest.messages >= 4
    target = await new_store()
    await restore(target, tmp_path / "all")
    assert await raw_dump(target) == await raw_dump(source)
    # and the repository reads the restored task exactly as the original
    restored = target.scoped("acme")
    assert [m.model_dump() for m in await restored.tasks.messages(task.id)] == \
        [m.model_dump() for m in await acme.tasks.messages(task.id)]
    assert (await target.scoped("beta").tasks.get(other.id)).owner == "carol"
    await source.close()
    await target.close()


# ----------------------------------------------------------------------------- scopes


async def _two_tenants(store):
    ids = {}
    for tenant, owners in (("acme", ["alice", "bob"]), ("beta-secret", ["zed"])):
        for owner in owners:
            record = await store.scoped(tenant).tasks.create(owner=owner, title=f"{tenant}/{owner}")
            await store.scoped(tenant).tasks.add_human_message(record.id, f"hello from {owner}")
            await store.database["dialog_nodes"].insert_one(
                {"_id": task_key(tenant, record.id), "tenant": tenant, "owner": owner, "parent_id": None, "root_id": record.id})
            await store.database["payloads"].insert_one(
                {"_id": f"p-{record.id}", "tenant": tenant, "task_id": record.id, "data": b"x" * 10})
            ids[(tenant, owner)] = record.id
    return ids


def _plain_bytes(path: Path) -> bytes:
    return b"".join(gzip.decompress(f.read_bytes()) for f in sorted(path.glob("*.jsonl.gz")))


async def test_a_tenant_backup_holds_nothing_of_another_tenant(store, tmp_path):
    await _two_tenants(store)
    manifest = await backup(store, tmp_path / "acme", tenant="acme")
    assert manifest.counts == {"tasks": 2, "dialog_nodes": 2, "payloads": 2}
    assert manifest.tenants == ["acme"]
    for name in COLLECTIONS:
        assert {r["tenant"] for r in read_file_records(tmp_path / "acme" / f"{name}.jsonl.gz")} == {"acme"}
    assert b"beta-secret" not in _plain_bytes(tmp_path / "acme") and b"zed" not in _plain_bytes(tmp_path / "acme")
    assert b"beta-secret" not in (tmp_path / "acme" / "manifest.json").read_bytes()


async def test_owner_task_and_since_scopes(store, tmp_path):
    ids = await _two_tenants(store)
    owner = await backup(store, tmp_path / "bob", tenant="acme", owner="bob")
    assert owner.counts == {"tasks": 1, "dialog_nodes": 1, "payloads": 1}
    assert [r["_id"] for r in read_file_records(tmp_path / "bob" / "tasks.jsonl.gz")] == \
        [task_key("acme", ids[("acme", "bob")])]

    wanted = [task_key("acme", ids[("acme", "alice")]), task_key("beta-secret", ids[("beta-secret", "zed")])]
    chosen = await backup(store, tmp_path / "two", task_ids=wanted + ["acme/no-such-task"])
    assert sorted(r["_id"] for r in read_file_records(tmp_path / "two" / "tasks.jsonl.gz")) == sorted(wanted)
    assert chosen.missing_task_ids == ["acme/no-such-task"]
    with pytest.raises(ValidationError):  # a bare task id is ambiguous without its tenant
        await backup(store, tmp_path / "three", task_ids=[ids[("acme", "alice")]])
    by_tenant = await backup(store, tmp_path / "four", tenant="acme", task_ids=[ids[("acme", "alice")]])
    assert by_tenant.counts["tasks"] == 1
    assert chosen.tenants == ["acme", "beta-secret"]

    # incremental: only what changed since the previous backup started
    since = owner.created_at
    await store.database["tasks"].update_one(
        {"_id": task_key("acme", ids[("acme", "alice")])}, {"$set": {"updated_at": since + dt.timedelta(seconds=5)}})
    await store.database["tasks"].update_many(
        {"_id": {"$ne": task_key("acme", ids[("acme", "alice")])}},
        {"$set": {"updated_at": since - dt.timedelta(seconds=5)}})
    incremental = await backup(store, tmp_path / "inc", since=since.isoformat())
    assert incremental.counts == {"tasks": 1, "dialog_nodes": 1, "payloads": 1}
    assert incremental.scope.since == since
    assert (await verify(tmp_path / "inc")).counts["tasks"] == 1

    with pytest.raises(ValidationError):
        await backup(store, tmp_path / "x", owner="bob")  # an owner needs its tenant
    with pytest.raises(ValidationError):
        await backup(store, tmp_path / "x", tenant="acme", since="yesterday")
    with pytest.raises(BackupError):
        await backup(store, tmp_path / "bob")  # exists, not empty
    assert not (tmp_path / "x").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left


async def test_memory_is_bounded_by_chunks_not_by_data(store, tmp_path, monkeypatch):
    # many small chunks and pages: the streaming code paths, not one big batch
    from mindstore.backup import export

    monkeypatch.setattr(export, "PAGE_TASKS", 3)
    monkeypatch.setattr(export, "CHUNK_TASKS", 2)
    monkeypatch.setattr(export, "PAGE_PAYLOADS", 1)
    docs = [{"_id": f"t{i:03d}", "tenant": "acme", "owner": "o", "messages": [{"role": "user", "id": str(i)}]}
            for i in range(11)]
    await store.database["tasks"].insert_many(docs)
    await store.database["payloads"].insert_many(
        [{"_id": f"p{i:03d}-{j}", "tenant": "acme", "task_id": f"t{i:03d}"} for i in range(11) for j in range(2)])
    manifest = await backup(store, tmp_path / "b", tenant="acme")
    assert manifest.counts == {"tasks": 11, "dialog_nodes": 0, "payloads": 22}
    assert [r["_id"] for r in read_file_records(tmp_path / "b" / "tasks.jsonl.gz")] == [d["_id"] for d in docs]


# ----------------------------------------------------------------------------- restore


async def test_restore_is_idempotent_and_dry_run_reports_real_counts(store, tmp_path):
    await _two_tenants(store)
    await backup(store, tmp_path / "b")
    target = await new_store()
    planned = await restore(target, tmp_path / "b", dry_run=True)
    assert planned.totals == {"inserted": 9, "overwritten": 0, "skipped": 0, "unchanged": 0}
    assert await raw_dump(target) == {name: [] for name in COLLECTIONS}  # dry run wrote nothing
    first = await restore(target, tmp_path / "b")
    assert first.counts == planned.counts
    after_first = await raw_dump(target)
    for mode in ("skip", "overwrite", "fail"):
        again = await restore(target, tmp_path / "b", mode=mode)
        assert again.totals["inserted"] == again.totals["overwritten"] == 0
        assert await raw_dump(target) == after_first
    assert (await restore(target, tmp_path / "b", mode="overwrite")).totals["unchanged"] == 9
    await target.close()


async def test_conflict_modes(store, tmp_path):
    ids = await _two_tenants(store)
    await backup(store, tmp_path / "b", tenant="acme")
    alice = task_key("acme", ids[("acme", "alice")])
    tasks = store.database["tasks"]
    await tasks.update_one({"_id": alice}, {"$set": {"title": "changed"}})
    await tasks.delete_one({"_id": task_key("acme", ids[("acme", "bob")])})
    before = await raw_dump(store)

    with pytest.raises(RestoreConflict) as failed:
        await restore(store, tmp_path / "b", mode="fail")
    assert failed.value.exit_code == 14 and alice in str(failed.value)
    assert await raw_dump(store) == before  # refused before writing: bob's task not re-inserted

    dry = await restore(store, tmp_path / "b", mode="overwrite", dry_run=True)
    assert dry.counts["tasks"] == {"inserted": 1, "overwritten": 1, "skipped": 0, "unchanged": 0}
    skip = await restore(store, tmp_path / "b", mode="skip")
    assert skip.counts["tasks"] == {"inserted": 1, "overwritten": 0, "skipped": 1, "unchanged": 0}
    assert (await tasks.find_one({"_id": alice}))["title"] == "changed"
    over = await restore(store, tmp_path / "b", mode="overwrite")
    assert over.counts["tasks"] == {"inserted": 0, "overwritten": 1, "skipped": 0, "unchanged": 1}
    assert (await tasks.find_one({"_id": alice}))["title"] == "acme/alice"
    with pytest.raises(ValidationError):
        await restore(store, tmp_path / "b", mode="merge")


async def test_restore_as_another_tenant(store, tmp_path):
    ids = await _two_tenants(store)
    await backup(store, tmp_path / "acme", tenant="acme")
    await backup(store, tmp_path / "all")

    # same database, source tenant still there: task ids are per tenant, so the copy goes in
    # beside it and neither tenant sees the other's
    before = await raw_dump(store)
    copied = await restore(store, tmp_path / "acme", as_tenant="gamma")
    assert copied.totals["inserted"] == 6
    after = await raw_dump(store)
    for name, docs in before.items():  # acme's and beta's documents untouched, byte for byte
        assert set(docs) <= set(after[name])
    gamma_bob = await store.scoped("gamma").tasks.get(ids[("acme", "bob")])
    assert gamma_bob.title == "acme/bob" and gamma_bob.tenant == "gamma"
    assert (await store.scoped("acme").tasks.get(ids[("acme", "bob")])).tenant == "acme"
    with pytest.raises(BackupError):
        await restore(store, tmp_path / "all", as_tenant="gamma")  # several tenants

    # into another database: a copy under the new tenant, readable through its scope
    target = await new_store()
    report = await restore(target, tmp_path / "acme", as_tenant="gamma")
    assert report.totals["inserted"] == 6
    assert await target.database["tasks"].distinct("tenant") == ["gamma"]
    assert (await target.scoped("gamma").tasks.get(ids[("acme", "bob")])).title == "acme/bob"
    # idempotent under the new tenant too
    assert (await restore(target, tmp_path / "acme", as_tenant="gamma", mode="fail")).totals["unchanged"] == 6
    # and the original tenant restored next to it goes in beside it
    assert (await restore(target, tmp_path / "acme", mode="fail")).totals["inserted"] == 6
    assert sorted(await target.database["tasks"].distinct("tenant")) == ["acme", "gamma"]
    await target.close()


async def test_restore_after_erase_brings_a_tenant_back_byte_identical(store, tmp_path):
    from mindstore.backup import erase

    await _two_tenants(store)
    before = await raw_dump(store)
    await backup(store, tmp_path / "acme.tar", tenant="acme")
    receipt = await erase(store, "acme")
    assert receipt.counts == {"tasks": 2, "dialog_nodes": 2, "payloads": 2}
    assert await raw_dump(store) != before
    await restore(store, tmp_path / "acme.tar")
    assert await raw_dump(store) == before


def test_bson_bytes_compare_is_strict():
    # the comparison the tests rely on sees int32 vs int64 and key order
    assert bson.encode({"a": 1}) != bson.encode({"a": Int64(1)})
    assert bson.encode({"a": 1, "b": 2}) != bson.encode({"b": 2, "a": 1})
