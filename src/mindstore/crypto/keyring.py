"""The keyring: per-tenant data keys, wrapped by the master key, stored in the database.

Each tenant has data keys numbered 1, 2, ... (`rotate` adds one; new ciphertexts use the
highest). A data key is 32 random bytes, stored only wrapped by the master key, in the
`data_keys` collection (`mindstore.registry.KEY_STORE`), which backups never hold. So
`shred` (delete the tenant's wrapped keys, leave a tombstone) makes every ciphertext of
the tenant unreadable everywhere it was copied: the database, its replicas, every backup.

A process keeps the unwrapped keys of the tenants it touched for `cache_seconds`; a
rotation or shred made by another process is seen when that expires (docs/encryption.md,
"Several processes"). A process's own rotate and shred take effect at once.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bson.binary import Binary
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pymongo.errors import DuplicateKeyError

from mindstore.collection_names import DATA_KEYS
from mindstore.crypto.aead import KEY_BYTES, context_bytes
from mindstore.crypto.integration_sweep import reencrypt_integrations
from mindstore.crypto.keys import MissingKey, TenantKeys
from mindstore.crypto.master import MasterKey
from mindstore.crypto.sweep import ProgressFn, SweepProgress, reencrypt
from mindstore.errors import ConfigurationError, KeyShredded, ValidationError
from mindstore.ids import check_key

__all__ = ["KeyStatus", "Keyring", "MissingKey", "TenantKeys"]

DEFAULT_CACHE_SECONDS = 30.0


@dataclass(frozen=True)
class KeyStatus:
    """What `Keyring.status` reports (no key material)."""

    tenant: str
    versions: tuple[int, ...]
    current: int | None
    shredded_at: datetime | None
    master_key_id: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "versions": list(self.versions),
            "current": self.current,
            "shredded": self.shredded_at is not None,
            "shredded_at": self.shredded_at.isoformat() if self.shredded_at else None,
            "master_key_id": self.master_key_id,
        }


def _key_id(tenant: str, version: int) -> str:
    return f"{tenant}/v{version}"


def _tenant_filter(tenant: str) -> dict[str, Any]:
    """All of a tenant's documents, found through the `_id` index (`tenant/...`; the
    character after ``/`` is ``0``, and no tenant id holds ``/``)."""
    return {"_id": {"$gte": f"{tenant}/", "$lt": f"{tenant}0"}, "tenant": tenant}


def _tombstone_id(tenant: str) -> str:
    return f"{tenant}/shredded"


def _wrap_context(tenant: str, version: int) -> bytes:
    return context_bytes(("mindstore data key", tenant, str(version), ""))


class Keyring:
    """Data keys per tenant under one master key. `mindstore.connect(..., keyring=k)`
    binds it to the store's database (`store.keyring`)."""

    def __init__(
        self,
        master: MasterKey,
        *,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        database: Any = None,
    ) -> None:
        if not isinstance(master, MasterKey):
            raise ValidationError("master must implement mindstore.crypto.MasterKey")
        if cache_seconds < 0:
            raise ValidationError("cache_seconds must be >= 0")
        self.master = master
        self.cache_seconds = cache_seconds
        self._database = database
        self._tenants: dict[str, TenantKeys] = {}

    def bind(self, database: Any) -> Keyring:
        """This keyring over `database` (a fresh key cache; the master key is shared)."""
        return Keyring(self.master, cache_seconds=self.cache_seconds, database=database)

    @property
    def _keys(self) -> Any:
        if self._database is None:
            raise ConfigurationError(
                "the keyring is not bound to a store: mindstore.connect(keyring=...)"
            )
        return self._database[DATA_KEYS]

    # ------------------------------------------------------------------ loading
    def cached(self, tenant: str) -> TenantKeys | None:
        """The tenant's keys as this process holds them now (no I/O; may be stale)."""
        return self._tenants.get(tenant)

    async def keys(self, tenant: str, *, create: bool = False) -> TenantKeys:
        """The tenant's keys, read again when older than `cache_seconds`; `create`: make
        its first data key if it has none (a tenant encrypted from this write on)."""
        check_key(tenant, "tenant")
        held = self._tenants.get(tenant)
        fresh = held is not None and time.monotonic() - held.loaded_at < self.cache_seconds
        if not fresh or held is None:
            held = await self._load(tenant)
        if create and not held.keys and not held.shredded:
            await self._add_version(tenant, 1)
            held = await self._load(tenant)
        return held

    async def refresh(self, tenant: str) -> TenantKeys:
        """Read the tenant's keys again now (a ciphertext names a version not held)."""
        return await self._load(tenant)

    async def _load(self, tenant: str) -> TenantKeys:
        loaded = TenantKeys(tenant, loaded_at=time.monotonic())
        async for document in self._keys.find(_tenant_filter(tenant)):
            if document.get("kind") == "shredded":
                loaded.shredded = True
            elif document.get("kind") == "key":
                version = int(document["version"])
                raw = await self.master.unwrap(
                    bytes(document["wrapped"]), _wrap_context(tenant, version)
                )
                loaded.keys[version] = AESGCM(raw)
        if loaded.shredded:
            loaded.keys.clear()
        self._tenants[tenant] = loaded
        return loaded

    async def _add_version(self, tenant: str, version: int) -> bool:
        """Store data key `version` of `tenant`; False if another writer stored it first."""
        wrapped = await self.master.wrap(os.urandom(KEY_BYTES), _wrap_context(tenant, version))
        try:
            await self._keys.insert_one({
                "_id": _key_id(tenant, version), "tenant": tenant, "kind": "key",
                "version": version, "wrapped": Binary(wrapped), "master_key_id": self.master.key_id,
                "created_at": datetime.now(UTC),
            })  # fmt: skip
        except DuplicateKeyError:
            return False
        return True

    # ------------------------------------------------------------------ verbs
    async def rotate(self, tenant: str) -> int:
        """Add a data key version: new writes (in this process at once, in others when
        their cache expires) seal with it; content sealed before stays readable.

        Args:
            tenant: The tenant.

        Returns:
            The new version (1 for a tenant that had no key).

        Raises:
            ValidationError: A tenant outside the id alphabet.
            KeyShredded: The tenant's keys were shredded.
            CryptoError: The master key cannot unwrap the tenant's keys.
        """
        while True:
            held = await self._load(check_key(tenant, "tenant"))
            if held.shredded:
                raise KeyShredded(tenant)
            version = max(held.keys, default=0) + 1
            if await self._add_version(tenant, version):
                await self._load(tenant)
                return version

    async def shred(self, tenant: str) -> int:
        """Destroy the tenant's data keys. Irreversible: its content, in the database and
        in every backup, can no longer be read (`KeyShredded`). A tombstone is written
        first, so a crash in between still refuses reads; running it again finishes.
        Needs no master key.

        Args:
            tenant: The tenant.

        Returns:
            How many data keys were destroyed.

        Raises:
            ValidationError: A tenant outside the id alphabet.
        """
        check_key(tenant, "tenant")
        await self._keys.update_one(
            {"_id": _tombstone_id(tenant), "tenant": tenant},
            {"$setOnInsert": {"kind": "shredded", "shredded_at": datetime.now(UTC)}},
            upsert=True,
        )
        result = await self._keys.delete_many({**_tenant_filter(tenant), "kind": "key"})
        self._tenants[tenant] = TenantKeys(tenant, shredded=True, loaded_at=time.monotonic())
        return int(result.deleted_count)

    async def reencrypt(
        self, tenant: str, *, progress: ProgressFn | None = None, restart: bool = False
    ) -> SweepProgress:
        """Seal all of the tenant's stored content with its newest data key: after a
        rotation, or to encrypt what was stored before the tenant was (resumable: a sweep
        cut short goes on after the last task it finished; `crypto.sweep`), then the
        LangGraph saver's documents (`crypto.integration_sweep`).

        Args:
            tenant: The tenant.
            progress: Called with a `SweepProgress` after each task.
            restart: Start over instead of resuming.

        Returns:
            The sweep's `SweepProgress` (tasks done, values sealed, where it resumed).

        Raises:
            ValidationError: A tenant outside the id alphabet.
            KeyShredded: The tenant's keys were shredded.
            CryptoError: Stored content that does not open (moved or changed), or keys
                the master key cannot unwrap.
            Conflict: A task kept changing under the sweep.
        """
        keys = await self.keys(check_key(tenant, "tenant"), create=True)
        swept = await reencrypt(self._database, keys, progress=progress, restart=restart)
        swept.values_sealed += await reencrypt_integrations(self._database, keys)
        return swept

    async def status(self, tenant: str) -> KeyStatus:
        """The tenant's key versions and whether they were shredded (no key material;
        needs no master key).

        Args:
            tenant: The tenant.

        Returns:
            A `KeyStatus`.

        Raises:
            ValidationError: A tenant outside the id alphabet.
        """
        check_key(tenant, "tenant")
        versions: list[int] = []
        shredded_at = None
        async for document in self._keys.find(_tenant_filter(tenant), {"wrapped": 0}):
            if document.get("kind") == "key":
                versions.append(int(document["version"]))
            elif document.get("kind") == "shredded":
                shredded_at = document.get("shredded_at")
        versions.sort()
        return KeyStatus(
            tenant=tenant, versions=tuple(versions), current=versions[-1] if versions else None,
            shredded_at=shredded_at, master_key_id=self.master.key_id,
        )  # fmt: skip
