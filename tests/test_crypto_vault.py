"""The local key vault, the keyring over a provider, migration from a shared master key,
and the CLI on encrypted tenants (`--master-key`, `--key-vault`)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import mindstore
from mindstore.backends.snapshot import load_snapshot, save_snapshot
from mindstore.cli import app
from mindstore.crypto import (
    KekState,
    Keyring,
    LocalKeyVault,
    LocalMasterKey,
    VaultError,
)
from mindstore.crypto.aead import context_bytes
from mindstore.errors import CryptoError, KeyringRequired, KeyShredded
from mindstore.store import Store

MASTER = LocalMasterKey(bytes(range(32)))
CONTEXT = context_bytes(("mindstore data key", "acme", "1", "tenant-kek"))


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# ----------------------------------------------------------------------------- the vault


async def test_a_vault_wraps_per_tenant_and_destroys_one_tenant(tmp_path: Path) -> None:
    vault = LocalKeyVault(tmp_path / "v", MASTER)
    key = os.urandom(32)
    wrapped = await vault.wrap("acme", key, CONTEXT)
    assert await vault.wrap("acme", key, CONTEXT) != wrapped  # a fresh nonce each time
    assert await vault.unwrap("acme", wrapped, CONTEXT) == key
    beta = await vault.wrap("beta", key, CONTEXT)
    for tenant, blob, context in (
        ("beta", wrapped, CONTEXT),  # another tenant's key
        ("acme", beta, CONTEXT),
        ("acme", wrapped, context_bytes(("mindstore data key", "acme", "2", "tenant-kek"))),
        ("acme", wrapped[:-1] + bytes([wrapped[-1] ^ 1]), CONTEXT),
    ):
        with pytest.raises(CryptoError) as refused:
            await vault.unwrap(tenant, blob, context)
        assert not isinstance(refused.value, KeyShredded)
    assert await vault.status("acme") == "active" and await vault.status("gamma") == "absent"
    await vault.destroy("acme")
    await vault.destroy("acme")  # idempotent
    with pytest.raises(KeyShredded):
        await vault.unwrap("acme", wrapped, CONTEXT)
    with pytest.raises(KeyShredded):  # no new key for a shredded tenant
        await vault.wrap("acme", key, CONTEXT)
    assert await vault.unwrap("beta", beta, CONTEXT) == key
    await vault.destroy("gamma")  # never had a key: marked, so none is made later
    with pytest.raises(KeyShredded):
        await vault.wrap("gamma", key, CONTEXT)
    states: dict[str, KekState] = vault.tenants()
    assert states == {"acme": "destroyed", "beta": "active", "gamma": "destroyed"}
    # the tombstone holds no key material
    files = [f.read_bytes() for f in (tmp_path / "v").iterdir()]
    assert not any(b"wrapped" in f and b"destroyed" in f for f in files)


async def test_the_vault_is_owner_only_and_a_bad_one_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "v"
    vault = LocalKeyVault(path, MASTER)
    wrapped = await vault.wrap("acme", b"k" * 32, CONTEXT)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in path.iterdir())
    assert not list(path.glob(".tmp-*"))  # no temporary file left behind
    entry = next(path.glob("*.kek"))
    good = entry.read_bytes()
    entry.write_bytes(b"{not json")
    with pytest.raises(VaultError, match="corrupt"):
        await vault.unwrap("acme", wrapped, CONTEXT)
    entry.write_bytes(json.dumps({"tenant": "other", "state": "active"}).encode())
    with pytest.raises(VaultError, match="corrupt"):
        await vault.unwrap("acme", wrapped, CONTEXT)
    entry.write_bytes(good)
    path.chmod(0o755)
    with pytest.raises(VaultError, match="open to other users"):
        await vault.unwrap("acme", wrapped, CONTEXT)
    path.chmod(0o700)
    with pytest.raises(VaultError, match="was made with master key"):
        await LocalKeyVault(path, LocalMasterKey(bytes(32))).unwrap("acme", wrapped, CONTEXT)
    with pytest.raises(VaultError, match="does not exist"):
        await LocalKeyVault(tmp_path / "nowhere", MASTER).unwrap("acme", wrapped, CONTEXT)
    (tmp_path / "file").write_text("x")
    with pytest.raises(VaultError, match="not a directory"):
        await LocalKeyVault(tmp_path / "file", MASTER).wrap("acme", b"k" * 32, CONTEXT)
    assert await vault.unwrap("acme", wrapped, CONTEXT) == b"k" * 32
    # without its master key a vault still shreds (a lost master key must not stop it)
    await LocalKeyVault(path).destroy("acme")
    with pytest.raises(KeyShredded):
        await vault.unwrap("acme", wrapped, CONTEXT)


async def test_racing_first_keys_agree_on_one(tmp_path: Path) -> None:
    """Many processes making a tenant's first key at once: one lands, all use it."""
    vaults = [LocalKeyVault(tmp_path / "v", MASTER) for _ in range(8)]
    blobs = await asyncio.gather(*(v.wrap("acme", b"k" * 32, CONTEXT) for v in vaults))
    for vault in vaults:
        for blob in blobs:
            assert await vault.unwrap("acme", blob, CONTEXT) == b"k" * 32
    assert len(list((tmp_path / "v").glob("*.kek"))) == 1


@settings(max_examples=25, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9_.:-]{1,128}", fullmatch=True))
def test_every_tenant_id_has_its_own_entry(tmp_path_factory: Any, tenant: str) -> None:
    path = tmp_path_factory.mktemp("v")
    vault = LocalKeyVault(path, MASTER)
    blob = run(vault.wrap(tenant, b"k" * 32, CONTEXT))
    assert vault.tenants() == {tenant: "active"}
    assert run(vault.unwrap(tenant, blob, CONTEXT)) == b"k" * 32


# ----------------------------------------------------------------------------- the keyring


class Counting:
    """A provider that counts its calls (the cache bound: once per tenant and version)."""

    def __init__(self, inner: LocalKeyVault) -> None:
        self.inner, self.calls = inner, {"wrap": 0, "unwrap": 0}
        self.provider_id = inner.provider_id

    async def wrap(self, tenant: str, data_key: bytes, context: bytes) -> bytes:
        self.calls["wrap"] += 1
        return await self.inner.wrap(tenant, data_key, context)

    async def unwrap(self, tenant: str, wrapped: bytes, context: bytes) -> bytes:
        self.calls["unwrap"] += 1
        return await self.inner.unwrap(tenant, wrapped, context)

    async def destroy(self, tenant: str) -> None:
        await self.inner.destroy(tenant)

    async def status(self, tenant: str) -> KekState:
        return await self.inner.status(tenant)


async def test_the_provider_is_called_once_per_tenant_and_version_per_cache_period(
    tmp_path: Path, store: Store
) -> None:
    counting = Counting(LocalKeyVault(tmp_path / "v", MASTER))
    sealed = Store(store.backend, keyring=Keyring(counting, cache_seconds=3600))
    acme = sealed.scoped("acme")
    task = await acme.tasks.create(owner="ann", title="t")
    for i in range(20):
        await acme.tasks.add_human_message(task.id, f"m{i}")
        await acme.tasks.messages(task.id)
    assert counting.calls == {"wrap": 1, "unwrap": 1}  # the first key: made, read once
    await sealed.keyring.rotate("acme")  # type: ignore[union-attr]
    for i in range(20):
        await acme.tasks.add_human_message(task.id, f"n{i}")
    await acme.tasks.messages(task.id)
    # the rotation wraps version 2 and unwraps it once; version 1 is not asked for again
    assert counting.calls == {"wrap": 2, "unwrap": 2}
    other = Store(store.backend, keyring=Keyring(counting, cache_seconds=0))
    await other.scoped("acme").tasks.messages(task.id)
    await other.scoped("acme").tasks.messages(task.id)
    assert counting.calls["unwrap"] == 2 + 4  # no cache: each read unwraps both versions


async def test_a_shared_master_key_store_migrates_to_the_vault_while_serving(
    tmp_path: Path, store: Store
) -> None:
    legacy = Store(store.backend, keyring=Keyring(MASTER))
    acme = legacy.scoped("acme")
    task = await acme.tasks.create(owner="ann", title="before")
    await acme.tasks.add_human_message(task.id, "sealed by the shared master key")
    await legacy.keyring.rotate("acme")  # type: ignore[union-attr]
    await acme.tasks.add_human_message(task.id, "with key 2")
    await legacy.scoped("beta").tasks.create(owner="bob", title="beta's")
    raw_before = {d["_id"]: d for d in await store.database["tasks"].find({}).to_list(None)}

    vault = LocalKeyVault(tmp_path / "v", MASTER)
    # a vault store that does not have the master key as legacy cannot open old keys
    with pytest.raises(CryptoError, match="keys migrate"):
        await Store(store.backend, keyring=Keyring(vault)).scoped("acme").tasks.messages(task.id)
    serving = Store(store.backend, keyring=Keyring(vault, legacy=MASTER))
    status = await serving.keyring.status("acme")  # type: ignore[union-attr]
    assert status.legacy_versions == (1, 2)
    migrating = Keyring(vault, legacy=MASTER).bind(store.database)

    async def writes() -> None:
        for i in range(10):
            await serving.scoped("acme").tasks.add_human_message(task.id, f"during {i}")

    report, _ = await asyncio.gather(migrating.migrate(), writes())
    assert report.rewrapped == {"acme": 2, "beta": 1}
    assert (await migrating.migrate()).rewrapped == {"acme": 0, "beta": 0}  # resumable
    # content was not re-encrypted: the tasks' ciphertexts are the same bytes
    after = {d["_id"]: d for d in await store.database["tasks"].find({}).to_list(None)}
    assert (
        after[f"beta/{(await legacy.scoped('beta').tasks.list()).items[0].id}"]["title"]
        == raw_before[f"beta/{(await legacy.scoped('beta').tasks.list()).items[0].id}"]["title"]
    )
    migrated = Store(store.backend, keyring=Keyring(vault))  # no legacy key needed now
    texts = [m.text() for m in await migrated.scoped("acme").tasks.messages(task.id)]
    assert texts[:2] == ["sealed by the shared master key", "with key 2"] and len(texts) == 12
    assert (await migrated.keyring.status("acme")).legacy_versions == ()  # type: ignore[union-attr]
    # and now a shred reaches every copy: the vault entry is what unwraps them
    copy = await store.database["data_keys"].find({"tenant": "acme"}).to_list(None)
    await migrated.keyring.shred("acme")  # type: ignore[union-attr]
    await store.database["data_keys"].insert_many(copy)  # an old copy put back
    with pytest.raises(KeyShredded):
        await Store(store.backend, keyring=Keyring(vault)).scoped("acme").tasks.messages(task.id)


# ----------------------------------------------------------------------------- the CLI

runner = CliRunner()


@pytest.fixture
def encrypted(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An embedded data file with an encrypted tenant, its vault and master key file."""
    key_file, vault, data = tmp_path / "master.key", tmp_path / "vault", tmp_path / "s.gz"
    key_file.write_text(bytes(range(32)).hex())

    async def seed() -> None:
        keyring = Keyring(LocalKeyVault(vault, LocalMasterKey.from_file(key_file)))
        opened = await mindstore.connect("embedded", keyring=keyring)
        task = await opened.scoped("acme").tasks.create(title="Trip", task_id="t1", owner="ann")
        await opened.scoped("acme").tasks.add_human_message(task.id, "hotel in Lisbon")
        await save_snapshot(opened.database, data)
        await opened.close()

    run(seed())
    return key_file, vault, data


def test_the_cli_reads_an_encrypted_tenant_with_its_keys(
    encrypted: tuple[Path, Path, Path],
) -> None:
    key_file, vault, data = encrypted
    keys = ["--master-key", str(key_file), "--key-vault", str(vault)]
    listed = runner.invoke(app, ["--data", str(data), *keys, "tasks", "list", "--tenant",
                                 "acme", "-f", "json"])  # fmt: skip
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)[0]["title"] == "Trip"
    shown = runner.invoke(app, ["--data", str(data), *keys, "tasks", "messages", "t1",
                                "--tenant", "acme", "-f", "json"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "hotel in Lisbon" in shown.stdout
    env = {"MINDSTORE_MASTER_KEY_FILE": str(key_file), "MINDSTORE_KEY_VAULT": str(vault)}
    from_env = runner.invoke(app, ["--data", str(data), "tasks", "show", "t1", "--tenant",
                                   "acme", "-f", "json"], env=env)  # fmt: skip
    assert from_env.exit_code == 0 and "Trip" in from_env.stdout


def test_the_cli_without_keys_names_the_keyring_never_corruption(
    encrypted: tuple[Path, Path, Path],
) -> None:
    _, vault, data = encrypted
    for args in (["tasks", "list"], ["tasks", "show", "t1"], ["tasks", "messages", "t1"]):
        result = runner.invoke(app, ["--data", str(data), *args, "--tenant", "acme"])
        assert result.exit_code == KeyringRequired.exit_code, result.output
        assert "keyring" in result.output and "--master-key" in result.output
        assert "shape mindstore writes" not in result.output
    # a vault without its master key: the error names the master key
    result = runner.invoke(app, ["--data", str(data), "--key-vault", str(vault), "tasks",
                                 "list", "--tenant", "acme"])  # fmt: skip
    assert result.exit_code != 0 and "master key" in result.output


def test_keys_shred_status_and_migrate_from_the_cli(encrypted: tuple[Path, Path, Path],
                                                     tmp_path: Path) -> None:  # fmt: skip
    key_file, vault, data = encrypted
    status = runner.invoke(app, ["--data", str(data), "keys", "status", "--tenant", "acme",
                                 "--key-vault", str(vault)])  # fmt: skip
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["kek"] == "active"
    shred = runner.invoke(
        app,
        [
            "--data",
            str(data),
            "keys",
            "shred",
            "--tenant",
            "acme",
            "--key-vault",
            str(vault),
            "--yes",
        ],
    )  # no master key needed
    assert shred.exit_code == 0, shred.output
    assert json.loads(shred.stdout)["kek"] == "destroyed"
    read = runner.invoke(
        app,
        [
            "--data",
            str(data),
            "--master-key",
            str(key_file),
            "--key-vault",
            str(vault),
            "tasks",
            "list",
            "--tenant",
            "acme",
        ],
    )
    assert read.exit_code == KeyShredded.exit_code, read.output

    # migrate: a store whose keys a shared master key wraps
    old = tmp_path / "old.gz"

    async def seed() -> None:
        opened = await mindstore.connect(
            "embedded", keyring=Keyring(LocalMasterKey.from_file(key_file))
        )
        await opened.scoped("beta").tasks.create(title="old", task_id="t1")
        await save_snapshot(opened.database, old)
        await opened.close()

    run(seed())
    fresh = tmp_path / "vault2"
    migrated = runner.invoke(app, ["--data", str(old), "keys", "migrate", "--master-key",
                                   str(key_file), "--key-vault", str(fresh)])  # fmt: skip
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(migrated.stdout)["rewrapped"] == {"beta": 1}
    assert "migrated: beta" in migrated.stderr

    async def check() -> str | None:
        opened = await mindstore.connect(
            "embedded", keyring=Keyring(LocalKeyVault(fresh, LocalMasterKey.from_file(key_file)))
        )
        await load_snapshot(opened.database, old)
        try:
            return (await opened.scoped("beta").tasks.get("t1")).title
        finally:
            await opened.close()

    assert run(check()) == "old"


# ----------------------------------------------------------------------------- guards


async def test_a_vault_entry_renamed_to_another_tenant_does_not_unwrap(tmp_path: Path) -> None:
    vault = LocalKeyVault(tmp_path / "v", MASTER)
    await vault.wrap("acme", b"k" * 32, CONTEXT)
    beta_blob = await vault.wrap("beta", b"k" * 32, CONTEXT)
    entries = {json.loads(f.read_bytes())["tenant"]: f for f in (tmp_path / "v").glob("*.kek")}
    stolen = json.loads(entries["acme"].read_bytes())
    stolen["tenant"] = "beta"  # acme's KEK put in beta's place
    entries["beta"].write_text(json.dumps(stolen))
    with pytest.raises(CryptoError, match="does not unwrap with this master key"):
        await vault.unwrap("beta", beta_blob, CONTEXT)


async def test_a_forged_payload_in_the_clear_is_refused(tmp_path: Path, store: Store) -> None:
    sealed = Store(store.backend, keyring=Keyring(LocalKeyVault(tmp_path / "v", MASTER)),
                   offload_threshold=1024)  # fmt: skip
    acme = sealed.scoped("acme")
    task = await acme.tasks.create(owner="ann")
    await acme.tasks.add_human_message(task.id, "x" * 5000, message_id="big")
    assert await store.database["payloads"].count_documents({}) == 1
    await store.database["payloads"].update_one({}, {"$set": {"data": "FORGED"}})
    with pytest.raises(CryptoError, match=r"payload .* is stored in the clear"):
        await acme.tasks.messages(task.id)


async def test_a_streamed_delta_over_the_payload_threshold_is_sealed(
    tmp_path: Path, store: Store
) -> None:
    """The planner transforms a streamed part twice; each payload it registers is sealed
    (a payload was stored in the clear when sealing went by payload id)."""
    from mindstore.crypto.aead import is_sealed
    from mindstore.model.parts import TaskConfigPart

    sealed = Store(store.backend, keyring=Keyring(LocalKeyVault(tmp_path / "v", MASTER)),
                   offload_threshold=1024)  # fmt: skip
    acme = sealed.scoped("acme")
    task = await acme.tasks.create(owner="ann", config=TaskConfigPart(model_name="m"))
    await acme.tasks.add_human_message(task.id, "q")
    async with acme.tasks.stream(task.id, flush_bytes=1, flush_ms=3_600_000) as stream:
        await stream.text("é" * 3000)
    payloads = await store.database["payloads"].find({}).to_list(None)
    assert payloads and all(is_sealed(p["data"]) for p in payloads)
    assert [m.text() for m in await acme.tasks.messages(task.id)][-1] == "é" * 3000


async def test_a_rewrap_racing_a_migration_never_breaks_a_key(store: Store, tmp_path: Path) -> None:
    """`seal_only` re-wraps a shared-master key while `migrate` re-wraps the same key for
    the vault: each update is pinned to the wrapped bytes it read, so the loser reads again
    and the key still unwraps (without the pin, a wrap made for the old flags lands under
    the new ones, and the tenant's content is lost)."""
    paused, go = asyncio.Event(), asyncio.Event()

    class Pausing(LocalMasterKey):
        pause = False

        async def wrap(self, data_key: bytes, context: bytes) -> bytes:
            out = await super().wrap(data_key, context)
            if Pausing.pause and b"sealed-only" in context:
                Pausing.pause = False
                paused.set()
                await go.wait()
            return out

    master = Pausing(bytes(range(32)))
    legacy = Store(store.backend, keyring=Keyring(master))
    task = await legacy.scoped("acme").tasks.create(owner="ann", title="kept")
    vault = LocalKeyVault(tmp_path / "v", master)
    ring = Keyring(vault, legacy=master).bind(store.database)
    # (a legacy key made before sealed-only and bindings existed: re-wrapped with them off)
    made = await store.database["data_keys"].find_one({"kind": "key"})
    raw = await Keyring(master).bind(store.database)._unwrap("acme", made)
    await store.database["data_keys"].update_many(
        {}, {"$set": {"sealed_only": False}, "$unset": {"bindings": ""}}
    )
    rewrapped = await master.wrap(raw, context_bytes(("mindstore data key", "acme", "1", "")))
    await store.database["data_keys"].update_one({"kind": "key"}, {"$set": {"wrapped": rewrapped}})
    Pausing.pause = True
    sealing = asyncio.create_task(ring.seal_only("acme"))
    pausing = asyncio.create_task(paused.wait())
    await asyncio.wait([sealing, pausing], return_when=asyncio.FIRST_COMPLETED)
    assert paused.is_set(), "the re-wrap never reached its wrap"  # (never a hang)
    await Keyring(vault, legacy=master).bind(store.database).migrate("acme")
    go.set()
    await sealing
    fresh = Store(store.backend, keyring=Keyring(vault)).scoped("acme")
    assert (await fresh.tasks.get(task.id)).title == "kept"
    assert (await Keyring(vault).bind(store.database).status("acme")).sealed_only
