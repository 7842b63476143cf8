"""Drills an operator (and an attacker with the database) would run against encryption.

Set up exactly as docs/encryption.md shows it:
``Keyring(LocalKeyVault(vault_path, LocalMasterKey(key_bytes)))`` with
``mindstore.connect(uri, keyring=...)``, on the suite's backend (embedded, or
`MINDSTORE_TEST_URI`):

(a) the snapshot drill: a raw copy of every collection (`data_keys` included), a shred,
    the copy loaded into a fresh database: the shredded tenant reads `KeyShredded`
    everywhere, the other tenant as before;
(b) the disaster drill: a backup, the database dropped, the backup restored into a new one
    with the same vault: everything reads as before (content, analytics, LangGraph
    threads, ADK sessions, agent state); a shredded tenant's backup restores as
    `KeyShredded`;
(c) forged plaintext and a write without a keyring are refused, nothing changed;
(d) a provider that is down: a typed error, nothing written.
"""

from __future__ import annotations

import base64
import gzip
import uuid
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util

pytest.importorskip("langgraph")
pytest.importorskip("google.adk")

import mindstore
from conftest import TEST_URI
from mindstore.backup import backup, erase, restore
from mindstore.crypto import Keyring, LocalKeyVault, LocalMasterKey, VaultError
from mindstore.crypto.provider import KekState
from mindstore.errors import (
    CryptoError,
    KeyProviderUnavailable,
    KeyringRequired,
    KeyShredded,
)
from mindstore.formats.agent_state import AgentState
from mindstore.integrations.adk import MindstoreSessionService
from mindstore.integrations.langgraph import MindstoreSaver
from mindstore.model.messages import UserMessage
from mindstore.model.parts import TaskConfigPart
from mindstore.store import Store
from test_adk import APP, drive
from test_lifecycle_units import config_of, turn

SECRET = "Casa do Rio, room 12"
MASTER = bytes(range(32))


def keyring(vault: Path, master: bytes = MASTER) -> Keyring:
    return Keyring(LocalKeyVault(vault, LocalMasterKey(master)))


async def connect(keys: Keyring | None = None) -> tuple[Store, str]:
    """A store on a database of its own (the suite's backend)."""
    database = f"mindstore_test_{uuid.uuid4().hex[:12]}"
    store = await mindstore.connect(TEST_URI or "embedded", database=database, keyring=keys)
    return store, database


async def close(store: Store) -> None:
    if TEST_URI:
        await store.backend.client.drop_database(store.database.name)
    await store.close()


async def workload(store: Store, tenant: str) -> dict[str, Any]:
    """Every kind of content a tenant keeps: tasks with a payload and a sub-task, usage,
    agent state, a LangGraph thread and ADK sessions. Returns the ids to read them by."""
    view = store.scoped(tenant)
    config = TaskConfigPart(model_name="gpt-x", system_prompt=f"{SECRET} prompt")
    task = await view.tasks.create(owner="ann", title=f"{SECRET} trip", config=config,
                                   metadata={"note": SECRET})  # fmt: skip
    for i in range(4):
        await view.tasks.add_human_message(task.id, f"{SECRET} {i}", message_id=f"u{i}")
        reply = await view.tasks.add_assistant_message(task.id, message_id=f"a{i}")
        await view.tasks.add_text_part(task.id, reply.id, f"answer {i} about {SECRET}")
        await view.tasks.finish_assistant_message(task.id, reply.id, tokens_in=10 + i,
                                                  tokens_out=3, cost=0.001)  # fmt: skip
    await view.tasks.add_human_message(task.id, SECRET + " " + "x" * 300_000, message_id="big")
    state = AgentState(context_summary=f"{SECRET} summary")
    await view.tasks.save_agent_state(task.id, state)
    for i in range(2):
        await turn(view, SECRET, i)
    sessions = await drive(MindstoreSessionService(view))
    return {"task": task.id, "sessions": sessions}


async def read_back(store: Store, tenant: str, ids: dict[str, Any]) -> dict[str, Any]:
    """What the tenant's users and operators read: every read raises as the keys say."""
    view = store.scoped(tenant)
    task_id = ids["task"]
    saver = MindstoreSaver(view)
    adk = MindstoreSessionService(view)
    latest = await saver.aget_tuple(config_of(None))
    return {
        "records": [r.model_dump() for r in (await view.tasks.list()).items],
        "messages": [m.model_dump() for m in await view.tasks.messages(task_id)],
        "agent_state": (await view.tasks.agent_state(task_id)),
        "usage": [row.model_dump() for row in await view.analytics.usage(group_by="model")],
        "checkpoint": (latest.checkpoint, latest.metadata) if latest else None,
        "sessions": [
            (await adk.get_session(app_name=APP, user_id="alice", session_id=s))
            for s in ids["sessions"]
        ],
    }


async def content_reads(store: Store, tenant: str, ids: dict[str, Any]) -> list[BaseException]:
    """Each content read of the tenant on its own, and what it raised (None: it read)."""
    view = store.scoped(tenant)
    saver = MindstoreSaver(view)
    adk = MindstoreSessionService(view)
    reads = [
        view.tasks.list(), view.tasks.messages(ids["task"]), view.tasks.get(ids["task"]),
        view.tasks.agent_state(ids["task"]), saver.aget_tuple(config_of(None)),
        adk.get_session(app_name=APP, user_id="alice", session_id=ids["sessions"][0]),
    ]  # fmt: skip
    raised: list[BaseException] = []
    for read in reads:
        try:
            await read
        except Exception as exc:
            raised.append(exc)
        else:
            raised.append(AssertionError("read without an error"))
    return raised


async def raw_copy(source: Store, target: Store) -> None:
    """Every collection of `source`'s database, byte for byte, into `target`'s (what a
    server snapshot, `mongodump` / `mongorestore` or a delayed replica holds)."""
    for name in await source.database.list_collection_names():
        documents = await source.database[name].find({}).to_list(None)
        if documents:
            await target.database[name].insert_many(documents)


async def everything(store: Store) -> dict[str, list[bytes]]:
    return {name: sorted(bson.encode(d) for d in await store.database[name].find({}).to_list(None))
            for name in sorted(await store.database.list_collection_names())}  # fmt: skip


# ----------------------------------------------------------------------------- (a) snapshot


async def test_a_snapshot_taken_before_a_shred_reads_as_shredded(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    store, _ = await connect(keyring(vault))
    copy, _ = await connect()  # where the raw copy goes: a server snapshot, a dump
    try:
        ids = {tenant: await workload(store, tenant) for tenant in ("acme", "beta")}
        before = await read_back(store, "beta", ids["beta"])
        await raw_copy(store, copy)
        assert await copy.database["data_keys"].count_documents({"tenant": "acme"}) >= 1
        assert await store.keyring.shred("acme") >= 1  # type: ignore[union-attr]
        # the copy, opened by another process with the same vault and master key
        reopened = Store(copy.backend, keyring=keyring(vault))
        raised = await content_reads(reopened, "acme", ids["acme"])
        assert [type(e) for e in raised] == [KeyShredded] * len(raised), raised
        assert await read_back(reopened, "beta", ids["beta"]) == before
        # the live database, from a process that never held acme's keys
        live = Store(store.backend, keyring=keyring(vault))
        raised = await content_reads(live, "acme", ids["acme"])
        assert [type(e) for e in raised] == [KeyShredded] * len(raised), raised
        assert await read_back(live, "beta", ids["beta"]) == before
        # nothing makes new keys for the shredded tenant, in the copy or in the database
        with pytest.raises(KeyShredded):
            await reopened.scoped("acme").tasks.create(owner="ann")
        with pytest.raises(KeyShredded):
            await reopened.keyring.rotate("acme")  # type: ignore[union-attr]
    finally:
        await close(copy)
        await close(store)


# ----------------------------------------------------------------------------- (b) disaster


async def test_a_backup_restores_into_an_empty_database_after_the_database_is_lost(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    store, _ = await connect(keyring(vault))
    ids = {tenant: await workload(store, tenant) for tenant in ("acme", "beta")}
    before = {tenant: await read_back(store, tenant, ids[tenant]) for tenant in ids}
    await backup(store, tmp_path / "full")
    await close(store)  # the database is gone (dropped on a server; memory released)

    new, _ = await connect(keyring(vault))
    try:
        await restore(new, tmp_path / "full")
        for tenant in ids:
            assert await read_back(new, tenant, ids[tenant]) == before[tenant]
        # the restored tenant goes on: a write, a rotation, a read of both versions
        acme = new.scoped("acme")
        await acme.tasks.add_human_message(ids["acme"]["task"], "after the restore")
        await new.keyring.rotate("acme")  # type: ignore[union-attr]
        await acme.tasks.add_human_message(ids["acme"]["task"], "with key 2")
        texts = [m.content[0].text for m in await acme.tasks.messages(ids["acme"]["task"])
                 if isinstance(m, UserMessage)][-2:]  # fmt: skip
        assert texts == ["after the restore", "with key 2"]
        # a shred, then the same backup restored again: the tenant reads as shredded
        await new.keyring.shred("beta")  # type: ignore[union-attr]
    finally:
        await close(new)
    again, _ = await connect(keyring(vault))
    try:
        await restore(again, tmp_path / "full")
        raised = await content_reads(again, "beta", ids["beta"])
        assert [type(e) for e in raised] == [KeyShredded] * len(raised), raised
        assert await read_back(again, "acme", ids["acme"]) == before["acme"]
    finally:
        await close(again)


async def test_a_backup_holds_no_key_material_and_no_plaintext(tmp_path: Path) -> None:
    """The wrapped data keys travel; the data keys, the vault's keys and the master key
    do not, in any form a backup file could leak."""
    seen: list[bytes] = []

    class Recording(LocalMasterKey):
        async def wrap(self, data_key: bytes, context: bytes) -> bytes:
            seen.append(data_key)  # the vault's per-tenant keys
            return await super().wrap(data_key, context)

    vault = LocalKeyVault(tmp_path / "vault", Recording(MASTER))
    wrapped_by_vault: list[bytes] = []
    original = vault.wrap

    async def recording_wrap(tenant: str, data_key: bytes, context: bytes) -> bytes:
        seen.append(data_key)  # the data keys
        out = await original(tenant, data_key, context)
        wrapped_by_vault.append(out)
        return out

    vault.wrap = recording_wrap  # type: ignore[method-assign]
    store, _ = await connect(Keyring(vault))
    try:
        await workload(store, "acme")
        await backup(store, tmp_path / "b")
    finally:
        await close(store)
    files = [f for f in (tmp_path / "b").rglob("*") if f.is_file()]
    blobs = [gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
             for f in files]  # fmt: skip
    assert len(seen) >= 2 and wrapped_by_vault
    for blob in blobs:
        assert SECRET.encode() not in blob
        for key in [*seen, MASTER]:
            for form in (key, key.hex().encode(), base64.b64encode(key)):
                assert form not in blob
    keys_file = next(b for f, b in zip(files, blobs, strict=True) if f.name.startswith("data_keys"))
    travelled = [json_util.loads(line) for line in keys_file.splitlines() if line.strip()]
    assert travelled and all(doc["kek"] == "tenant" for doc in travelled)
    assert sorted(bytes(doc["wrapped"]) for doc in travelled) == sorted(wrapped_by_vault)


# ----------------------------------------------------------------------------- (c) tampering


async def test_forged_plaintext_and_a_write_without_a_keyring_are_refused(tmp_path: Path) -> None:
    store, _ = await connect(keyring(tmp_path / "vault"))
    try:
        acme = store.scoped("acme")
        task = await acme.tasks.create(owner="ann", title=SECRET)
        await acme.tasks.add_human_message(task.id, SECRET, message_id="m1")
        tasks = store.database["tasks"]
        forge = {"$set": {"messages.0.content.0.text": "FORGED"}}
        await tasks.update_one({"tenant": "acme"}, forge)
        with pytest.raises(CryptoError, match=r"content\.0\.text of message 'm1'") as forged:
            await acme.tasks.messages(task.id)
        assert not isinstance(forged.value, KeyShredded)
        await tasks.update_one({"tenant": "acme"}, {"$set": {"title": "FORGED"}})
        with pytest.raises(CryptoError, match=r"task\.title"):
            await acme.tasks.get(task.id)

        before = await everything(store)
        plain = Store(store.backend).scoped("acme")  # a process without a keyring
        for write in (
            plain.tasks.add_human_message(task.id, "in the clear"),
            plain.tasks.create(owner="bob", title="in the clear"),
            plain.tasks.set_title(task.id, "in the clear"),
        ):
            with pytest.raises(KeyringRequired, match="keyring"):
                await write
        with pytest.raises(KeyringRequired, match="cannot read"):
            await plain.tasks.list()
        with pytest.raises(KeyringRequired, match="cannot read"):
            await plain.tasks.get(task.id)
        assert await everything(store) == before
    finally:
        await close(store)


async def test_content_from_before_encryption_reads_until_the_sweep_seals_it(
    tmp_path: Path,
) -> None:
    plain, _ = await connect()
    try:
        acme = plain.scoped("acme")
        task = await acme.tasks.create(owner="ann", title="old")
        await acme.tasks.add_human_message(task.id, "written in the clear", message_id="m1")
        sealed = Store(plain.backend, keyring=keyring(tmp_path / "vault"))
        view = sealed.scoped("acme")
        assert [m.id for m in await view.tasks.messages(task.id)] == ["m1"]
        await sealed.keyring.rotate("acme")  # type: ignore[union-attr]  # acme is encrypted
        assert not (await sealed.keyring.status("acme")).sealed_only  # type: ignore[union-attr]
        # a process without a keyring still writes this task (nothing sealed in it yet)...
        await plain.scoped("acme").tasks.add_human_message(task.id, "late", message_id="m2")
        await view.tasks.add_human_message(task.id, "written sealed", message_id="m3")
        assert [m.id for m in await view.tasks.messages(task.id)] == ["m1", "m2", "m3"]
        await sealed.keyring.reencrypt("acme")  # type: ignore[union-attr]
        assert (await sealed.keyring.status("acme")).sealed_only  # type: ignore[union-attr]
        assert [m.id for m in await view.tasks.messages(task.id)] == ["m1", "m2", "m3"]
        # ...and refused once the sweep marked it
        with pytest.raises(KeyringRequired):
            await plain.scoped("acme").tasks.add_human_message(task.id, "later")
        await plain.database["tasks"].update_one(
            {"tenant": "acme"}, {"$set": {"messages.0.content.0.text": "FORGED"}}
        )
        fresh = Store(plain.backend, keyring=keyring(tmp_path / "vault")).scoped("acme")
        with pytest.raises(CryptoError, match="sealed-only"):
            await fresh.tasks.messages(task.id)
        # the flag cannot be taken off in the database: the key no longer unwraps
        await plain.database["data_keys"].update_many({}, {"$set": {"sealed_only": False}})
        again = Store(plain.backend, keyring=keyring(tmp_path / "vault")).scoped("acme")
        with pytest.raises(CryptoError, match="does not unwrap"):
            await again.tasks.messages(task.id)
    finally:
        await close(plain)


# ----------------------------------------------------------------------------- (d) down


class DownProvider:
    """A provider that does not answer (a KMS outage, a network partition)."""

    provider_id = "down"

    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        raise KeyProviderUnavailable("the key provider did not answer")

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        raise KeyProviderUnavailable("the key provider did not answer")

    async def destroy(self, tenant: str) -> None:
        raise KeyProviderUnavailable("the key provider did not answer")

    async def status(self, tenant: str) -> KekState:
        raise KeyProviderUnavailable("the key provider did not answer")


async def test_a_provider_that_is_down_is_a_typed_error_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    store, _ = await connect(keyring(tmp_path / "vault"))
    try:
        task = await store.scoped("acme").tasks.create(owner="ann", title=SECRET)
        before = await everything(store)
        down = Store(store.backend, keyring=Keyring(DownProvider())).scoped
        for call in (
            down("beta").tasks.create(owner="ann", title="x"),  # a new tenant's first key
            down("acme").tasks.add_human_message(task.id, "x"),  # an existing tenant's keys
            down("acme").tasks.messages(task.id),
        ):
            with pytest.raises(KeyProviderUnavailable):
                await call
        assert await everything(store) == before
        # the local vault gone (a lost volume): a typed error naming it, nothing written
        missing = Keyring(LocalKeyVault(tmp_path / "lost", LocalMasterKey(MASTER)))
        with pytest.raises(VaultError, match="does not exist"):
            await Store(store.backend, keyring=missing).scoped("acme").tasks.messages(task.id)
        # another vault (or a copy older than the tenant's first key)
        other = Keyring(LocalKeyVault(tmp_path / "other", LocalMasterKey(MASTER)))
        await Store(store.backend, keyring=other).scoped("gamma").tasks.create(owner="x")
        with pytest.raises(CryptoError, match="holds no key for tenant 'acme'"):
            await Store(store.backend, keyring=other).scoped("acme").tasks.messages(task.id)
        # the vault opened with another master key: refused before anything is read
        wrong = Keyring(LocalKeyVault(tmp_path / "vault", LocalMasterKey(bytes(32))))
        with pytest.raises(VaultError, match="was made with master key"):
            await Store(store.backend, keyring=wrong).scoped("acme").tasks.messages(task.id)
        tenants = sorted(d["tenant"] for d in await store.database["tasks"].find({}).to_list(None))
        assert tenants == ["acme", "gamma"]  # the refused reads wrote nothing
    finally:
        await close(store)


async def test_erasing_an_encrypted_tenant_takes_its_keys_and_backups_of_it_still_shred(
    tmp_path: Path,
) -> None:
    store, _ = await connect(keyring(tmp_path / "vault"))
    try:
        ids = await workload(store, "acme")
        await workload(store, "beta")
        await backup(store, tmp_path / "b", tenant="acme")
        await erase(store, "acme")
        assert await store.database["data_keys"].count_documents({"tenant": "acme"}) == 0
        assert await store.database["data_keys"].count_documents({"tenant": "beta"}) >= 1
        await restore(store, tmp_path / "b")
        assert (await read_back(store, "acme", ids))["messages"]
    finally:
        await close(store)


def _first_sealed_path(value: Any, path: str = "") -> str | None:
    from mindstore.crypto.aead import is_sealed

    if is_sealed(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()  # fmt: skip
    for key, item in items:
        found = _first_sealed_path(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


async def test_a_forged_langgraph_value_in_the_clear_is_refused(tmp_path: Path) -> None:
    store, _ = await connect(keyring(tmp_path / "vault"))
    try:
        view = store.scoped("acme")
        await turn(view, SECRET, 0)
        checkpoints = store.database["langgraph_checkpoints"]
        forged = 0
        for stored in await checkpoints.find({"tenant": "acme"}).to_list(None):
            path = _first_sealed_path({k: v for k, v in stored.items() if k != "_id"})
            if path is not None:
                await checkpoints.update_one({"_id": stored["_id"]}, {"$set": {path: b"FORGED"}})
                forged += 1
        assert forged
        saver = MindstoreSaver(Store(store.backend, keyring=keyring(tmp_path / "vault"))
                               .scoped("acme"))  # fmt: skip
        with pytest.raises(CryptoError, match="sealed-only"):
            [item async for item in saver.alist(config_of(None))]
    finally:
        await close(store)
