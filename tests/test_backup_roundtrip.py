"""Backup -> restore is lossless; scopes hold exactly their data; restore modes and tenants."""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import importlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

import bson
import pytest
from bson import Binary, Decimal128, Int64
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindstore.backup import (
    BackupError,
    RestoreConflict,
    backup,
    restore,
    verify,
)
from mindstore.documents import task_document
from mindstore.errors import ValidationError
from mindstore.ids import is_name, task_id_of, task_key
from mindstore.model.messages import UnknownMessage
from mindstore.model.parts import TaskConfigPart, ToolCallPart, ToolMetadata
from mindstore.model.storage_form import escape_keys
from mindstore.model.task import Task
from mindstore.payloads import MARKER_PREFIX, find_markers
from test_backup_support import (
    COLLECTIONS,
    keyed,
    keys,
    new_store,
    payload_hex,
    raw_dump,
    read_file_records,
    values,
    writes_task_keys,
)

UTC = dt.UTC
RESTORE = importlib.import_module("mindstore.backup.restore")


@dataclass
class Form:
    keys: bool  # restore writes task_key(tenant, id) (else the legacy bare id)
    readable: bool  # ... which this version's repositories read


@pytest.fixture(params=[True, False], ids=["per-tenant-keys", "legacy-ids"])
async def form(request, monkeypatch) -> Form:
    """Run a restore test with either key form, whatever this version's repositories use;
    reading restored tasks back through the repository is checked where they match."""
    real = await writes_task_keys()
    monkeypatch.setattr(RESTORE, "_KEYED", request.param)
    return Form(request.param, request.param == real)


# ----------------------------------------------------------------------------- property


def _ms(moment: dt.datetime) -> dt.datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


_names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    is_name
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["plugin", "critic", "x-note"]), "id": _names},
    optional={"blob": values(8), "metadata": values(8), "n": st.integers(0, 2**40)},
)
raw_task = st.fixed_dictionaries(
    {
        "tenant": st.sampled_from(["acme", "beta"]),
        "owner": st.one_of(st.none(), st.sampled_from(["alice", "bob", "ünï-😀"])),
        "title": st.one_of(
            st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
        ),
        "updated_at": st.datetimes(
            min_value=dt.datetime(1970, 1, 1),
            max_value=dt.datetime(2100, 1, 1),
            timezones=st.just(UTC),
        ).map(_ms),
        "metadata": st.dictionaries(keys, values(10), max_size=3),
        "messages": st.lists(_message, max_size=4, unique_by=lambda m: m["id"]),
        "keyed": st.booleans(),  # the per-tenant `_id` or the legacy bare one
        "payloads": st.integers(0, 2),
    }
)


def _task_document(task_id: str, spec: dict) -> dict:
    """A task as mindstore stores it (header folded from the messages), arbitrary BSON in
    its metadata and messages, payload markers for its payloads. Metadata keys are escaped
    as `tasks.create` stores them (a raw `{"$ref": ..., "$id": ...}` would decode as a
    DBRef: the store never writes one)."""
    markers = [
        {"role": "plugin", "id": f"ref{n}", "blob": MARKER_PREFIX + payload_hex(f"{task_id}/{n}")}
        for n in range(spec["payloads"])
    ]
    messages = [UnknownMessage.model_validate(m) for m in [*spec["messages"], *markers]]
    document = task_document(
        Task(id=task_id, messages=messages),
        spec["tenant"],
        owner=spec["owner"],
        title=spec["title"],
        created_at=spec["updated_at"],
        metadata=escape_keys(spec["metadata"]),
    )  # as the store keeps it
    if spec["keyed"]:
        document["_id"] = task_key(spec["tenant"], task_id)
    return document


@st.composite
def datasets(draw):
    tasks = draw(st.lists(raw_task, min_size=1, max_size=4))
    docs = {name: [] for name in COLLECTIONS}
    for index, task in enumerate(tasks):
        task_id = f"task-{index}"
        document = _task_document(task_id, task)
        docs["tasks"].append(document)
        if draw(st.booleans()):
            parent = draw(
                st.one_of(
                    st.none(),
                    st.sampled_from([f"task-{i}" for i in range(len(tasks))]).filter(
                        lambda p, me=task_id: p != me
                    ),
                )
            )
            docs["dialog_nodes"].append(
                {
                    "_id": document["_id"],
                    "tenant": task["tenant"],
                    "owner": task["owner"],
                    "parent_id": parent,
                    "root_id": parent or task_id,
                    "ancestors": [] if parent is None else [parent],
                    "depth": 0 if parent is None else 1,
                    "extra": draw(values(8)),
                }
            )
        for number in range(task["payloads"]):
            docs["payloads"].append(
                {
                    "_id": payload_hex(f"{task_id}/{number}"),
                    "tenant": task["tenant"],
                    "task_id": task_id,
                    "message_id": f"ref{number}",
                    "path": "blob",
                    "data": draw(st.one_of(st.binary(max_size=64), values(8))),
                }
            )
    return docs


def _target_form(data: dict, keys: bool) -> dict:
    """What restore writes: task and node `_id`s in the form the repositories use (the
    per-tenant key, or the legacy bare id), all else as is."""

    def key(doc: dict) -> str:
        bare = task_id_of(doc["_id"])
        return task_key(doc["tenant"], bare) if keys else bare

    out = {}
    for name, docs in data.items():
        out[name] = [
            doc
            if name == "payloads"
            else {k: (key(doc) if k == "_id" else v) for k, v in doc.items()}
            for doc in docs
        ]
    return out


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=datasets(), as_tar=st.booleans(), keys=st.booleans())
def test_any_stored_data_survives_backup_and_restore_unchanged(data, as_tar, keys):
    async def scenario() -> None:
        source, target, expected = await new_store(), await new_store(), await new_store()
        saved, RESTORE._KEYED = RESTORE._KEYED, keys
        try:
            for name, docs in data.items():
                if docs:
                    await source.database[name].insert_many(docs)
            for name, docs in _target_form(data, keys).items():
                if docs:
                    await expected.database[name].insert_many(docs)
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / ("b.tar" if as_tar else "b")
                manifest = await backup(source, path)
                assert manifest.counts == {name: len(docs) for name, docs in data.items()}
                await verify(path)
                report = await restore(target, path)
                assert report.totals["inserted"] == sum(len(d) for d in data.values())
                # every byte of every document, task keys in the form the repositories read
                assert await raw_dump(target) == await raw_dump(expected)
                # and restoring over the source itself recognises every document
                again = await restore(source, path, mode="fail")
                assert again.totals["inserted"] == 0
        finally:
            RESTORE._KEYED = saved
            for opened in (source, target, expected):
                await opened.close()

    asyncio.run(scenario())


async def test_realistic_conversations_survive_backup_and_restore(tmp_path, form):
    source = await new_store(offload_threshold=64)  # small: some values go to payloads
    acme = source.scoped("acme")
    config = TaskConfigPart(
        model_name="openai/gpt-4o",
        tool_metadata=[
            ToolMetadata(
                name="search",
                parameters={
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "$ref": "#/$defs/q",
                    "$defs": {"q": {"type": "string"}},
                },
            )
        ],
    )
    task = await acme.tasks.create(
        owner="alice",
        title="Trip ✈",
        config=config,
        metadata={"$ref": "crm", "$id": 7, "n": Int64(2**40)},
    )
    await acme.tasks.add_human_message(task.id, "Plan a trip to Lisbon " * 10, message_id="u1")
    await acme.tasks.add_assistant_message(task.id, message_id="a1")
    await acme.tasks.add_text_part(task.id, "a1", "Searching…")
    await acme.tasks.add_tool_call_part(
        task.id,
        "a1",
        ToolCallPart(tool_call_id="c1", tool_name="search", args={"$ref": "#/a", "q": "hotels"}),
    )
    await acme.tasks.add_message(
        task.id,
        {
            "role": "critic",
            "id": "x1",
            "verdict": {"$gt": 3},
            "blob": Binary(b"\x00\x01", 0x80),
            "price": Decimal128("12.30"),
            "at": dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        },
    )
    other = await source.scoped("beta").tasks.create(owner="carol", content="hello")
    await source.database["dialog_nodes"].insert_one(
        {
            "_id": task_key("acme", task.id),
            "tenant": "acme",
            "owner": "alice",
            "parent_id": None,
            "root_id": task.id,
            "ancestors": [],
            "depth": 0,
            "created_at": dt.datetime(2026, 1, 1, tzinfo=UTC),
        }
    )
    assert await source.database["payloads"].count_documents({}) >= 1

    manifest = await backup(source, tmp_path / "all")
    assert manifest.tenants == ["acme", "beta"] and manifest.messages >= 4
    target = await new_store()
    await restore(target, tmp_path / "all")
    assert keyed(await raw_dump(target)) == keyed(await raw_dump(source))
    if form.readable:  # the same form as the source: the same bytes
        assert await raw_dump(target) == await raw_dump(source)
        # and the repository reads the restored task exactly as the original
        restored = target.scoped("acme")
        assert [m.model_dump() for m in await restored.tasks.messages(task.id)] == [
            m.model_dump() for m in await acme.tasks.messages(task.id)
        ]
        assert (await target.scoped("beta").tasks.get(other.id)).owner == "carol"
    await source.close()
    await target.close()


# ----------------------------------------------------------------------------- scopes


async def _two_tenants(store):
    """Per (tenant, owner): one dialog (task + tree node) whose last message is a payload."""
    store.offload_threshold = 64
    ids = {}
    for tenant, owners in (("acme", ["alice", "bob"]), ("beta-secret", ["zed"])):
        for owner in owners:
            record = await store.scoped(tenant).dialogs.create(owner, title=f"{tenant}/{owner}")
            await store.scoped(tenant).tasks.add_human_message(record.id, f"hello from {owner}")
            await store.scoped(tenant).tasks.add_human_message(record.id, f"{owner}: " + "x" * 100)
            ids[(tenant, owner)] = record.id
    return ids


def by_id(tenant: str, task_id: str) -> dict:
    """A raw filter for a task (or its node) in either stored form."""
    return {"tenant": tenant, "_id": {"$in": [task_id, task_key(tenant, task_id)]}}


def _plain_bytes(path: Path) -> bytes:
    return b"".join(gzip.decompress(f.read_bytes()) for f in sorted(path.glob("*.jsonl.gz")))


async def test_a_tenant_backup_holds_nothing_of_another_tenant(store, tmp_path):
    await _two_tenants(store)
    manifest = await backup(store, tmp_path / "acme", tenant="acme")
    assert manifest.counts == {"tasks": 2, "dialog_nodes": 2, "payloads": 2}
    assert manifest.tenants == ["acme"]
    for name in COLLECTIONS:
        assert {r["tenant"] for r in read_file_records(tmp_path / "acme" / f"{name}.jsonl.gz")} == {
            "acme"
        }
    assert b"beta-secret" not in _plain_bytes(tmp_path / "acme") and b"zed" not in _plain_bytes(
        tmp_path / "acme"
    )
    assert b"beta-secret" not in (tmp_path / "acme" / "manifest.json").read_bytes()


async def test_owner_task_and_since_scopes(store, tmp_path):
    ids = await _two_tenants(store)
    owner = await backup(store, tmp_path / "bob", tenant="acme", owner="bob")
    assert owner.counts == {"tasks": 1, "dialog_nodes": 1, "payloads": 1}
    assert [
        task_id_of(r["_id"]) for r in read_file_records(tmp_path / "bob" / "tasks.jsonl.gz")
    ] == [ids[("acme", "bob")]]

    # tasks across tenants are named by their per-tenant key ...
    wanted = [
        task_key("acme", ids[("acme", "alice")]),
        task_key("beta-secret", ids[("beta-secret", "zed")]),
    ]
    chosen = await backup(store, tmp_path / "two", task_ids=[*wanted, "acme/no-such-task"])
    assert sorted(
        task_key(r["tenant"], task_id_of(r["_id"]))
        for r in read_file_records(tmp_path / "two" / "tasks.jsonl.gz")
    ) == sorted(wanted)
    assert chosen.counts == {"tasks": 2, "dialog_nodes": 2, "payloads": 2}
    assert chosen.missing_task_ids == ["acme/no-such-task"]
    assert chosen.tenants == ["acme", "beta-secret"]
    await verify(tmp_path / "two")
    # ... a bare id is ambiguous without its tenant, and is resolved within the one given
    with pytest.raises(ValidationError, match="needs its tenant"):
        await backup(store, tmp_path / "three", task_ids=[ids[("acme", "alice")]])
    with pytest.raises(ValidationError, match="not in tenant"):
        await backup(store, tmp_path / "three", tenant="acme", task_ids=[wanted[1]])
    assert not (tmp_path / "three").exists()
    by_tenant = await backup(
        store, tmp_path / "four", tenant="acme", task_ids=[ids[("acme", "alice")]]
    )
    assert by_tenant.counts == {"tasks": 1, "dialog_nodes": 1, "payloads": 1}
    assert by_tenant.scope.task_ids == (wanted[0],)
    assert (await verify(tmp_path / "four")).counts["tasks"] == 1

    # incremental: only what changed since the previous backup started
    since = owner.created_at
    tasks = store.database["tasks"]
    await tasks.update_one(
        by_id("acme", ids[("acme", "alice")]),
        {"$set": {"updated_at": since + dt.timedelta(seconds=5)}},
    )
    for (tenant, name), task_id in ids.items():
        if name != "alice":
            await tasks.update_one(
                by_id(tenant, task_id), {"$set": {"updated_at": since - dt.timedelta(seconds=5)}}
            )
    incremental = await backup(store, tmp_path / "inc", since=since.isoformat())
    assert incremental.counts == {"tasks": 1, "dialog_nodes": 1, "payloads": 1}
    assert incremental.scope.since == since
    assert (await verify(tmp_path / "inc")).counts["tasks"] == 1

    with pytest.raises(ValidationError):
        await backup(store, tmp_path / "x", owner="bob")  # an owner needs its tenant
    with pytest.raises(ValidationError):
        await backup(store, tmp_path / "x", tenant="acme", since="yesterday")
    with pytest.raises(ValidationError, match="owner"):
        await backup(store, tmp_path / "x", tenant="acme", owner="$where")
    with pytest.raises(ValidationError, match="task id"):
        await backup(store, tmp_path / "x", task_ids=[{"$gt": ""}])
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
    docs = [
        {
            "_id": f"t{i:03d}",
            "tenant": "acme",
            "owner": "o",
            "messages": [{"role": "user", "id": str(i)}],
        }
        for i in range(11)
    ]
    await store.database["tasks"].insert_many(docs)
    await store.database["payloads"].insert_many(
        [
            {"_id": f"p{i:03d}-{j}", "tenant": "acme", "task_id": f"t{i:03d}"}
            for i in range(11)
            for j in range(2)
        ]
    )
    manifest = await backup(store, tmp_path / "b", tenant="acme")
    assert manifest.counts == {"tasks": 11, "dialog_nodes": 0, "payloads": 22}
    assert [r["_id"] for r in read_file_records(tmp_path / "b" / "tasks.jsonl.gz")] == [
        d["_id"] for d in docs
    ]


# ----------------------------------------------------------------------------- restore


async def test_restore_is_idempotent_and_dry_run_reports_real_counts(store, tmp_path, form):
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
    # restoring over the source (legacy or per-tenant form alike) finds every document
    before = await raw_dump(store)
    assert (await restore(store, tmp_path / "b", mode="fail")).totals["unchanged"] == 9
    assert await raw_dump(store) == before
    await target.close()


async def test_conflict_modes(store, tmp_path, form):
    ids = await _two_tenants(store)
    await backup(store, tmp_path / "b", tenant="acme")
    alice = ids[("acme", "alice")]
    tasks = store.database["tasks"]
    await tasks.update_one(by_id("acme", alice), {"$set": {"title": "changed"}})
    await tasks.delete_one(by_id("acme", ids[("acme", "bob")]))
    before = await raw_dump(store)

    with pytest.raises(RestoreConflict) as failed:
        await restore(store, tmp_path / "b", mode="fail")
    assert failed.value.exit_code == 14 and alice in str(failed.value)
    assert await raw_dump(store) == before  # refused before writing: bob's task not re-inserted

    dry = await restore(store, tmp_path / "b", mode="overwrite", dry_run=True)
    assert dry.counts["tasks"] == {"inserted": 1, "overwritten": 1, "skipped": 0, "unchanged": 0}
    skip = await restore(store, tmp_path / "b", mode="skip")
    assert skip.counts["tasks"] == {"inserted": 1, "overwritten": 0, "skipped": 1, "unchanged": 0}
    assert (await tasks.find_one(by_id("acme", alice)))["title"] == "changed"
    over = await restore(store, tmp_path / "b", mode="overwrite")
    assert over.counts["tasks"] == {"inserted": 0, "overwritten": 1, "skipped": 0, "unchanged": 1}
    assert (await tasks.find_one(by_id("acme", alice)))["title"] == "acme/alice"
    assert await tasks.count_documents({"tenant": "acme"}) == 2  # overwritten in place, no copy
    with pytest.raises(ValidationError):
        await restore(store, tmp_path / "b", mode="merge")


async def test_restore_as_another_tenant_next_to_the_source(store, tmp_path, form):
    ids = await _two_tenants(store)
    await backup(store, tmp_path / "acme", tenant="acme")
    await backup(store, tmp_path / "all")
    acme_before = {
        name: [d for d in docs if bson.decode(d)["tenant"] == "acme"]
        for name, docs in (await raw_dump(store)).items()
    }
    with pytest.raises(BackupError):
        await restore(store, tmp_path / "all", as_tenant="gamma")  # several tenants
    with pytest.raises(ValidationError, match="tenant"):
        await restore(store, tmp_path / "acme", as_tenant="$gamma")

    if not form.keys:
        # the legacy form: bare task ids are global, so a second copy (into another
        # tenant) collides with the first and is refused, nothing written
        assert (await restore(store, tmp_path / "acme", as_tenant="gamma")).totals["inserted"] == 6
        before = await raw_dump(store)
        with pytest.raises(RestoreConflict, match="another tenant"):
            await restore(store, tmp_path / "acme", as_tenant="delta")
        assert await raw_dump(store) == before
        assert await store.database["tasks"].count_documents({"tenant": "delta"}) == 0
        return
    # the same database, the source tenant still there: a copy under the new tenant
    report = await restore(store, tmp_path / "acme", as_tenant="gamma")
    assert report.totals["inserted"] == 6
    after = await raw_dump(store)
    assert {
        name: [d for d in docs if bson.decode(d)["tenant"] == "acme"]
        for name, docs in after.items()
    } == acme_before  # the source is untouched
    gamma = {
        name: [bson.decode(d) for d in docs if bson.decode(d)["tenant"] == "gamma"]
        for name, docs in after.items()
    }
    assert sorted(d["_id"] for d in gamma["tasks"]) == sorted(
        task_key("gamma", ids[("acme", owner)]) for owner in ("alice", "bob")
    )
    assert sorted(d["_id"] for d in gamma["dialog_nodes"]) == sorted(
        d["_id"] for d in gamma["tasks"]
    )
    # payloads got new ids, and the messages' markers point at them, task by task
    acme_payload_ids = {bson.decode(d)["_id"] for d in acme_before["payloads"]}
    for task in gamma["tasks"]:
        found: set[str] = set()
        find_markers(task["messages"], found)
        owned = {p["_id"] for p in gamma["payloads"] if p["task_id"] == task_id_of(task["_id"])}
        assert found == owned and len(found) == 1 and found.isdisjoint(acme_payload_ids)
    # idempotent under the new tenant too
    again = await restore(store, tmp_path / "acme", as_tenant="gamma", mode="fail")
    assert again.totals["unchanged"] == 6
    if not form.readable:
        return
    # and the copy reads back through the repository, payloads resolved
    bob = ids[("acme", "bob")]
    copied = await store.scoped("gamma").tasks.messages(bob)
    original = await store.scoped("acme").tasks.messages(bob)
    assert [m.model_dump() for m in copied] == [m.model_dump() for m in original]


async def test_moving_a_tenant_into_another_database(store, tmp_path):
    ids = await _two_tenants(store)
    await backup(store, tmp_path / "acme", tenant="acme")
    target = await new_store()
    report = await restore(target, tmp_path / "acme", as_tenant="gamma")
    assert report.totals["inserted"] == 6
    assert await target.database["tasks"].distinct("tenant") == ["gamma"]
    bob = ids[("acme", "bob")]
    assert (await target.scoped("gamma").tasks.get(bob)).title == "acme/bob"
    copied = await target.scoped("gamma").tasks.messages(bob)  # the payload resolves
    assert [m.model_dump() for m in copied] == [
        m.model_dump() for m in await store.scoped("acme").tasks.messages(bob)
    ]
    assert (await restore(target, tmp_path / "acme", as_tenant="gamma", mode="fail")).totals[
        "unchanged"
    ] == 6
    await target.close()


async def test_restore_never_touches_a_document_of_another_tenant(store, tmp_path, form):
    ids = await _two_tenants(store)
    await backup(store, tmp_path / "acme", tenant="acme")
    bob = ids[("acme", "bob")]
    written, other_form = (
        (task_key("acme", bob), bob) if form.keys else (bob, task_key("acme", bob))
    )
    target = await new_store()
    # a target where the key restore would write for bob is (wrongly) held by another tenant
    await target.database["tasks"].insert_one(
        {"_id": written, "tenant": "evil", "title": "not yours"}
    )
    before = await raw_dump(target)
    for mode in ("skip", "overwrite", "fail"):
        with pytest.raises(RestoreConflict, match="another tenant") as refused:
            await restore(target, tmp_path / "acme", mode=mode)
        assert refused.value.exit_code == 14
        assert await raw_dump(target) == before
    # the other form of the key, held by another tenant, is another tenant's task: no
    # collision, and it is left alone
    await target.database["tasks"].delete_many({})
    await target.database["tasks"].insert_one({"_id": other_form, "tenant": "evil"})
    evil = await raw_dump(target)
    report = await restore(target, tmp_path / "acme")
    assert report.totals["inserted"] == 6
    assert [
        d for d in (await raw_dump(target))["tasks"] if bson.decode(d)["tenant"] == "evil"
    ] == evil["tasks"]
    await target.close()


async def test_restore_after_erase_brings_a_tenant_back_byte_identical(store, tmp_path, form):
    from mindstore.backup import erase

    await _two_tenants(store)
    before = await raw_dump(store)
    await backup(store, tmp_path / "acme.tar", tenant="acme")
    receipt = await erase(store, "acme")
    assert receipt.counts == {"tasks": 2, "dialog_nodes": 2, "payloads": 2}
    assert await raw_dump(store) != before
    await restore(store, tmp_path / "acme.tar")
    # every byte back; task and node keys in the per-tenant form restore writes
    assert keyed(await raw_dump(store)) == keyed(before)
    restored = await store.database["tasks"].find({"tenant": "acme"}).to_list()
    assert all(doc["_id"].startswith("acme/") == form.keys for doc in restored)
    assert len(restored) == 2


def test_bson_bytes_compare_is_strict():
    # the comparison the tests rely on sees int32 vs int64 and key order
    assert bson.encode({"a": 1}) != bson.encode({"a": Int64(1)})
    assert bson.encode({"a": 1, "b": 2}) != bson.encode({"b": 2, "a": 1})
