"""A tenant's key lifecycle against an attacker who can write to the database, and against an
operator's mistakes: data keys deleted, a backup restored into another tenant, a shred of a
tenant that still holds content from before it was encrypted, a shred that does not reach
the tenant's key, and the guards that keep a shred complete (docs/encryption.md).

Each provider the keyring runs on (the local vault, and the fakes of AWS KMS, Google Cloud
KMS and Vault Transit in tests/kms_fakes.py) holds the same rule: a provider that holds an
active key for a tenant with no data keys is tampering, not a new tenant."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.backup import backup, restore
from mindstore.cli import app
from mindstore.crypto import KeyProvider, Keyring, LocalKeyVault, LocalMasterKey, VaultError
from mindstore.errors import (
    BackupError,
    ConfigurationError,
    CryptoError,
    KeyringRequired,
    KeyShredded,
)
from mindstore.store import Store
from test_crypto_providers import BUILDERS

MASTER = bytes(range(32))
SECRET = "Casa do Rio, room 12"
PROVIDERS = ["local-vault", *BUILDERS]


def provider_named(name: str, tmp_path: Path) -> KeyProvider:
    if name == "local-vault":
        return LocalKeyVault(tmp_path / "vault", LocalMasterKey(MASTER))
    provider: KeyProvider = BUILDERS[name]().provider
    return provider


async def snapshot(store: Store, *names: str) -> dict[str, list[Any]]:
    """Every document of `names` (every collection mindstore keeps content in by default)."""
    names = names or ("tasks", "task_pages", "payloads", "data_keys", "dialog_nodes")
    return {
        name: sorted(
            (d for d in await store.database[name].find({}).to_list(None)), key=lambda d: d["_id"]
        )
        for name in names
    }


# ------------------------------------------------------------------ deleted data keys


@pytest.mark.parametrize("name", PROVIDERS)
async def test_deleting_a_tenants_data_keys_does_not_turn_sealed_only_off(
    name: str, store_factory: Any, tmp_path: Path
) -> None:
    provider = provider_named(name, tmp_path)
    store = await store_factory(keyring=Keyring(provider))
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="ann", title=SECRET)
    await acme.tasks.add_human_message(task.id, SECRET, message_id="m1")
    assert (await store.keyring.status("acme")).sealed_only
    # the attacker: the keys deleted, a value and the title forged in the clear
    await store.database["data_keys"].delete_many({"tenant": "acme"})
    forged = {"messages.0.content.0.text": "FORGED", "title": "FORGED"}
    await store.database["tasks"].update_one({"tenant": "acme"}, {"$set": forged})
    before = await snapshot(store)
    fresh = Store(store.backend, keyring=Keyring(provider)).scoped("acme")
    for read in (fresh.tasks.messages(task.id), fresh.tasks.get(task.id)):
        with pytest.raises(CryptoError) as refused:
            await read
        assert not isinstance(refused.value, KeyShredded)
    # the next write makes no key (which would not be sealed-only): it is refused too
    for write in (
        fresh.tasks.add_human_message(task.id, "more"),
        fresh.tasks.create(owner="bob", title="new"),
    ):
        with pytest.raises(CryptoError, match=r"data keys .*missing"):
            await write
    assert await snapshot(store) == before
    # a tenant whose provider never held a key is a new tenant, as before
    beta = Store(store.backend, keyring=Keyring(provider)).scoped("beta")
    made = await beta.tasks.create(owner="bob", title="kept")
    assert (await beta.tasks.get(made.id)).title == "kept"


async def test_a_tenant_wiped_down_to_its_key_gets_a_sealed_only_key_again(
    store_factory: Any, tmp_path: Path
) -> None:
    """Keys and content deleted: nothing is left to downgrade, so the next write makes a
    key, and that key is sealed-only (forged clear values stay refused)."""
    provider = provider_named("local-vault", tmp_path)
    store = await store_factory(keyring=Keyring(provider))
    acme = store.scoped("acme")
    await acme.tasks.create(owner="ann", title=SECRET)
    for collection in ("data_keys", "tasks"):
        await store.database[collection].delete_many({"tenant": "acme"})
    fresh = Store(store.backend, keyring=Keyring(provider)).scoped("acme")
    assert (await fresh.tasks.list()).items == []
    task = await fresh.tasks.create(owner="ann", title="again")
    await fresh.tasks.add_human_message(task.id, "hello", message_id="m1")
    status = await Keyring(provider).bind(store.database).status("acme")
    assert status.versions == (1,) and status.sealed_only
    await store.database["tasks"].update_one(
        {"tenant": "acme"}, {"$set": {"messages.0.content.0.text": "FORGED"}}
    )
    again = Store(store.backend, keyring=Keyring(provider)).scoped("acme")
    with pytest.raises(CryptoError, match="sealed-only"):
        await again.tasks.messages(task.id)


async def test_a_first_key_interrupted_after_its_kek_is_made_by_the_same_keyring_completes(
    store_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first data key's insert fails after the provider made the tenant's KEK (the
    state deleted keys leave too): the same keyring, retrying, finishes it; a plaintext
    tenant keeps reading meanwhile."""
    plain = await store_factory()
    task = await plain.scoped("acme").tasks.create(owner="ann", title="old")
    await plain.scoped("acme").tasks.add_human_message(task.id, "clear", message_id="m1")
    sealed = Store(plain.backend, keyring=Keyring(provider_named("local-vault", tmp_path)))
    keyring = sealed.keyring
    assert keyring is not None
    stored = Keyring._keys

    class Lost:
        """`data_keys` whose inserts never reach the server."""

        def __init__(self, collection: Any) -> None:
            self.collection = collection

        def __getattr__(self, name: str) -> Any:
            return getattr(self.collection, name)

        async def insert_one(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("the insert never reached the server")

    monkeypatch.setattr(Keyring, "_keys", property(lambda k: Lost(stored.fget(k))))  # type: ignore[attr-defined]
    with pytest.raises(ConnectionError):
        await keyring.rotate("acme")
    monkeypatch.setattr(Keyring, "_keys", stored)
    assert await keyring.provider.status("acme") == "active"  # type: ignore[union-attr]
    view = sealed.scoped("acme")
    assert [m.text() for m in await view.tasks.messages(task.id)] == ["clear"]
    assert await keyring.rotate("acme") == 1
    status = await keyring.status("acme")
    assert status.versions == (1,) and not status.sealed_only  # it holds clear content


# ------------------------------------------------------------------ restore as another tenant


async def test_an_encrypted_backup_never_restores_into_another_tenant(
    store_factory: Any, tmp_path: Path
) -> None:
    store = await store_factory(keyring=Keyring(provider_named("local-vault", tmp_path)))
    ids = {}
    for tenant in ("acme", "beta"):
        task = await store.scoped(tenant).tasks.create(owner="ann", title=f"{tenant} trip")
        await store.scoped(tenant).tasks.add_human_message(task.id, f"{tenant} hotel")
        ids[tenant] = task.id
    await backup(store, tmp_path / "acme", tenant="acme")
    before = await snapshot(store)
    for mode in ("overwrite", "skip", "fail"):
        with pytest.raises(BackupError, match="its own tenant"):
            await restore(store, tmp_path / "acme", as_tenant="beta", mode=mode)
    assert await snapshot(store) == before
    # after a shred, acme's backup (its tombstone) cannot mark a live tenant shredded
    await store.keyring.shred("acme")
    await backup(store, tmp_path / "shredded", tenant="acme")
    with pytest.raises(BackupError, match="its own tenant"):
        await restore(store, tmp_path / "shredded", as_tenant="gamma")
    with pytest.raises(BackupError, match="its own tenant"):
        await restore(store, tmp_path / "shredded", as_tenant="beta", mode="overwrite")
    fresh = Store(store.backend, keyring=store.keyring.bind(store.database)).scoped("beta")
    assert [m.text() for m in await fresh.tasks.messages(ids["beta"])] == ["beta hotel"]
    assert not (await store.keyring.status("beta")).shredded_at
    # under its own name it restores (here: into an empty database, where it reads shredded)
    empty = await store_factory(keyring=Keyring(provider_named("local-vault", tmp_path)))
    await restore(empty, tmp_path / "shredded", as_tenant="acme")
    with pytest.raises(KeyShredded):
        await empty.scoped("acme").tasks.messages(ids["acme"])


# ------------------------------------------------------------------ after a shred


async def test_after_a_shred_content_from_before_encryption_is_neither_read_nor_written(
    store_factory: Any, tmp_path: Path
) -> None:
    plain = await store_factory()
    task = await plain.scoped("acme").tasks.create(owner="ann", title="old")
    await plain.scoped("acme").tasks.add_human_message(task.id, SECRET, message_id="m1")
    provider = provider_named("local-vault", tmp_path)
    sealed = Store(plain.backend, keyring=Keyring(provider))
    # a keyring bound to the database alone has no eraser: its shred marks the unswept task
    # (a store's erases it: test_crypto_shred_clear.py)
    alone = Keyring(provider).bind(plain.database)
    await alone.rotate("acme")  # acme is encrypted; the task is not swept yet
    await alone.shred("acme")
    before = await snapshot(plain)
    view = sealed.scoped("acme")
    for call in (
        view.tasks.messages(task.id),
        view.tasks.get(task.id),
        view.tasks.add_human_message(task.id, "more"),
        view.tasks.set_title(task.id, "new"),
    ):
        with pytest.raises(KeyShredded):
            await call
    blind = plain.scoped("acme")  # a process without a keyring (it wrote the task: cached)
    for call in (
        blind.tasks.get(task.id),
        blind.tasks.list(),
        blind.tasks.add_human_message(task.id, "more"),
    ):
        with pytest.raises(KeyringRequired):
            await call
    assert await snapshot(plain) == before
    assert before["tasks"][0]["encrypted"] is True  # the shred marked it


async def test_a_keyring_less_saver_stops_writing_once_the_tenant_is_encrypted(
    store_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saver without a keyring checks its tenant again after the keyring's cache period
    (here: every write), as any process sees another's first key or shred."""
    pytest.importorskip("langgraph")
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    from mindstore.crypto import sealed_collection
    from mindstore.integrations.langgraph import MindstoreSaver

    class Notes(TypedDict):
        notes: str

    def notes_only(checkpointer: Any) -> Any:
        builder = StateGraph(Notes)
        builder.add_node("more", lambda state: {"notes": state["notes"] + " and more"})
        builder.add_edge(START, "more")
        return builder.compile(checkpointer=checkpointer)

    monkeypatch.setattr(sealed_collection, "CLEAR_CHECK_SECONDS", 0.0, raising=False)

    plain = await store_factory()
    graph = notes_only(MindstoreSaver(plain.scoped("acme")))
    config = {"configurable": {"thread_id": "t1"}}
    await graph.ainvoke({"notes": "first"}, config)
    sealed = Store(plain.backend, keyring=Keyring(provider_named("local-vault", tmp_path)))
    await sealed.keyring.rotate("acme")
    names = ("langgraph_checkpoints", "langgraph_writes", "langgraph_blobs")
    before = await snapshot(plain, *names)
    with pytest.raises(KeyringRequired):
        await graph.ainvoke({"notes": "second"}, config)
    await sealed.keyring.shred("acme")
    with pytest.raises(KeyringRequired):
        await graph.ainvoke({"notes": "third"}, config)
    assert await snapshot(plain, *names) == before


# ------------------------------------------------------------------ a shred that misses the KEK


async def test_a_shred_without_the_tenants_provider_fails_and_destroys_nothing(
    store_factory: Any, tmp_path: Path
) -> None:
    vault = provider_named("local-vault", tmp_path)
    store = await store_factory(keyring=Keyring(vault))
    task = await store.scoped("acme").tasks.create(owner="ann", title=SECRET)
    before = await snapshot(store)
    for keyring in (
        Keyring(LocalMasterKey(MASTER)),  # no provider at all
        Keyring(LocalKeyVault(tmp_path / "typo", LocalMasterKey(MASTER))),  # no such vault
        Keyring(LocalKeyVault(tmp_path / "typo")),  # ... without the master key, as shred runs
    ):
        with pytest.raises(ConfigurationError, match="acme"):
            await keyring.bind(store.database).shred("acme")
    assert not (tmp_path / "typo").exists()
    other = LocalKeyVault(tmp_path / "other", LocalMasterKey(MASTER))  # a vault, not acme's
    await Store(store.backend, keyring=Keyring(other)).scoped("gamma").tasks.create(owner="x")
    before = await snapshot(store)
    with pytest.raises(ConfigurationError, match="holds no key for tenant 'acme'"):
        await Keyring(other).bind(store.database).shred("acme")
    assert await snapshot(store) == before
    assert await vault.status("acme") == "active"
    assert (await store.scoped("acme").tasks.get(task.id)).title == SECRET


async def test_a_missing_vault_is_never_created_by_destroy(tmp_path: Path) -> None:
    for master in (LocalMasterKey(MASTER), None):
        missing = LocalKeyVault(tmp_path / "missing", master)
        with pytest.raises(VaultError, match="does not exist"):
            await missing.destroy("acme")
        assert not (tmp_path / "missing").exists()


runner = CliRunner()


def test_the_cli_shred_fails_loudly_unless_the_kek_is_destroyed(tmp_path: Path) -> None:
    key_file, vault, data = tmp_path / "master.key", tmp_path / "vault", tmp_path / "s.gz"
    key_file.write_text(MASTER.hex())

    async def seed() -> None:
        opened = await mindstore.connect(
            "embedded", keyring=Keyring(LocalKeyVault(vault, LocalMasterKey(MASTER)))
        )
        await opened.scoped("acme").tasks.create(title="Trip", task_id="t1", owner="ann")
        await save_snapshot(opened.database, data)
        await opened.close()

    async def keys_left() -> int:
        opened = await mindstore.connect("embedded")
        await load_snapshot(opened.database, data)
        try:
            return int(await opened.database["data_keys"].count_documents({"tenant": "acme"}))
        finally:
            await opened.close()

    asyncio.run(seed())
    shred = ["--data", str(data), "keys", "shred", "--tenant", "acme", "--yes"]
    for extra in ([], ["--key-vault", str(tmp_path / "vualt")]):
        result = runner.invoke(app, [*shred, *extra])
        assert result.exit_code == ConfigurationError.exit_code, result.output
        assert "acme" in result.output
        assert asyncio.run(keys_left()) == 1
        assert not (tmp_path / "vualt").exists()
    status = runner.invoke(app, ["--data", str(data), "keys", "status", "--tenant", "acme",
                                 "--key-vault", str(vault)])  # fmt: skip
    assert json.loads(status.stdout)["kek"] == "active"
    done = runner.invoke(app, [*shred, "--key-vault", str(vault)])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["kek"] == "destroyed"
    assert asyncio.run(keys_left()) == 1  # the tombstone


# ------------------------------------------------------------------ reads make no key


async def test_a_search_through_a_keyring_store_never_encrypts_a_tenant(
    store_factory: Any, tmp_path: Path
) -> None:
    """A read (a search included) of a tenant stored in the clear makes no data key and no
    KEK; the tenant's first key, made by a write, turns its index blind (rebuilt)."""
    plain = await store_factory()
    task = await plain.scoped("acme").tasks.create(owner="ann", title="trip")
    await plain.scoped("acme").tasks.add_human_message(task.id, "a hotel in Lisbon")
    provider = provider_named("local-vault", tmp_path)
    keyed = Store(plain.backend, keyring=Keyring(provider)).scoped("acme")
    assert [h.message_id for h in (await keyed.search("lisbon")).hits]
    await keyed.tasks.messages(task.id)
    assert await plain.database["data_keys"].count_documents({}) == 0
    assert await provider.status("acme") == "absent"
    await plain.scoped("acme").tasks.add_human_message(task.id, "the application still writes")
    postings = plain.database["search_postings"]
    assert await postings.count_documents({"_id": {"$regex": "lisbon"}}) > 0  # in the clear
    await keyed.tasks.add_human_message(task.id, "Lisbon again, sealed")  # the first key
    assert len((await keyed.search("lisbon")).hits) == 2
    assert await postings.count_documents({"_id": {"$regex": "lisbon"}}) == 0  # blind now


# ------------------------------------------------------------------ guards of a complete shred


async def test_a_copy_holding_neither_keys_nor_tombstone_reads_shredded_by_the_kek(
    store_factory: Any, tmp_path: Path
) -> None:
    """A copy of a shredded tenant's content without its `data_keys` documents (a dump of
    the content collections alone): the provider's destroyed KEK says it was shredded."""
    provider = provider_named("local-vault", tmp_path)
    store = await store_factory(keyring=Keyring(provider))
    acme = store.scoped("acme")
    task = await acme.tasks.create(owner="ann", title=SECRET)
    await acme.tasks.add_human_message(task.id, SECRET, message_id="m1")
    await store.keyring.shred("acme")
    await store.database["data_keys"].delete_many({"tenant": "acme"})  # the tombstone too
    fresh = Store(store.backend, keyring=Keyring(provider)).scoped("acme")
    for call in (
        fresh.tasks.messages(task.id),
        fresh.tasks.get(task.id),
        fresh.tasks.add_human_message(task.id, "more"),
        fresh.search("casa"),
    ):
        with pytest.raises(KeyShredded):
            await call
    assert await store.database["data_keys"].count_documents({"tenant": "acme"}) == 0


async def test_a_backup_after_a_shred_carries_the_tombstone(
    store_factory: Any, tmp_path: Path
) -> None:
    """Restored into an empty database, a shredded tenant's backup says it was shredded
    even to a store that cannot ask the provider: no store without a keyring writes into
    it, and no keyring over a new vault (the old one lost) makes it a new key."""
    store = await store_factory(keyring=Keyring(provider_named("local-vault", tmp_path)))
    await store.scoped("acme").tasks.create(owner="ann", title=SECRET)
    await store.keyring.shred("acme")
    await backup(store, tmp_path / "b", tenant="acme")
    empty = await store_factory()
    await restore(empty, tmp_path / "b")
    with pytest.raises(KeyringRequired):
        await empty.scoped("acme").tasks.create(owner="bob", title="in the clear")
    other = LocalKeyVault(tmp_path / "new-vault", LocalMasterKey(MASTER))
    keyed = Store(empty.backend, keyring=Keyring(other))
    with pytest.raises(KeyShredded):
        await keyed.scoped("acme").tasks.create(owner="bob", title="new")
    assert (await keyed.keyring.status("acme")).shredded_at is not None
    assert await other.status("acme") == "absent"


async def test_a_restore_cut_short_after_its_data_keys_leaves_no_tenant_open_in_the_clear(
    store_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restore writes the data keys before any content: cut short anywhere, the tenant
    already reads as encrypted (a store without a keyring writes nothing into it)."""
    module = importlib.import_module("mindstore.backup.restore")  # the package's name is
    # the function
    store = await store_factory(keyring=Keyring(provider_named("local-vault", tmp_path)))
    task = await store.scoped("acme").tasks.create(owner="ann", title=SECRET)
    await store.scoped("acme").tasks.add_human_message(task.id, SECRET)
    await backup(store, tmp_path / "b", tenant="acme")
    written = module._Restorer.write_batch

    async def cut(self: Any, name: str, targets: list[dict[str, Any]]) -> None:
        if name == "tasks":
            raise ConnectionError("the restore's process died here")
        await written(self, name, targets)

    monkeypatch.setattr(module._Restorer, "write_batch", cut)
    empty = await store_factory()
    with pytest.raises(ConnectionError):
        await restore(empty, tmp_path / "b")
    with pytest.raises(KeyringRequired):
        await empty.scoped("acme").tasks.create(owner="bob", title="in the clear")
    assert await empty.database["tasks"].count_documents({}) == 0


async def test_reads_and_writes_racing_a_tenants_first_key_are_never_taken_for_tampering(
    store_factory: Any, tmp_path: Path
) -> None:
    """Concurrent coroutines of one store on a tenant stored in the clear: the first write
    makes its key (the provider makes the KEK before the key is stored), the others read
    and write meanwhile; none sees an active KEK without keys as deleted keys."""
    plain = await store_factory()
    tasks = []
    for n in range(3):
        task = await plain.scoped("acme").tasks.create(owner="ann", title=f"old {n}")
        await plain.scoped("acme").tasks.add_human_message(task.id, f"clear {n}")
        tasks.append(task.id)
    provider = provider_named("local-vault", tmp_path)
    sealed = Store(plain.backend, keyring=Keyring(provider, cache_seconds=0))  # every call loads
    view = sealed.scoped("acme")

    async def write(task_id: str, n: int) -> None:
        await view.tasks.add_human_message(task_id, f"sealed {n}")

    async def read(task_id: str) -> None:
        assert (await view.tasks.messages(task_id))[0].text().startswith("clear")

    await asyncio.gather(
        *(write(tasks[n % 3], n) for n in range(6)),
        *(read(tasks[n % 3]) for n in range(6)),
        view.search("clear"),
    )
    status = await sealed.keyring.status("acme")  # type: ignore[union-attr]
    assert status.versions == (1,) and not status.sealed_only and status.kek == "active"
    for task_id in tasks:
        assert len(await view.tasks.messages(task_id)) == 3
