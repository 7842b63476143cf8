"""The keyring: per-tenant data keys, wrapped by the tenant's own key, stored in the database.

Each tenant has data keys numbered 1, 2, ... (`rotate` adds one; new ciphertexts use the
highest). A data key is 32 random bytes, stored in the `data_keys` collection
(`mindstore.registry`) only wrapped, by one of:

* the tenant's key-encryption key in a key provider (`crypto.provider.KeyProvider`: the
  local vault, a KMS): the document says ``kek: "tenant"``. These documents travel with
  every copy of the data, mindstore backups included, and `shred` destroys the tenant's
  key in the provider, which makes every copy unreadable (`KeyShredded`);
* a shared master key (`Keyring(LocalMasterKey(...))`, the format before per-tenant
  keys): no ``kek`` field. Such documents are never backed up, and `shred` deletes them,
  which cannot reach a copy made before (docs/encryption.md, "Migrating to per-tenant
  keys": `migrate` re-wraps them for a provider without re-encrypting any content).

The wrap is bound (as associated data) to the tenant, the version and the document's
flags (which key wraps it; whether the tenant is sealed-only), so a wrapped key copied to
another tenant or version, or a flag removed, does not unwrap.

A tenant with no data keys in the database is asked about in the provider: its KEK active
means the keys were deleted (`OrphanedKeys`: read as sealed-only, no new key made over its
content), destroyed means shredded. Only a write makes a tenant's first key; a read never
does. A shred refuses a keyring whose provider does not hold the tenant's KEK.

A process keeps the unwrapped keys of the tenants it touched for `cache_seconds`; a
rotation or shred made by another process is seen when that expires (docs/encryption.md,
"Several processes"). A process's own rotate and shred take effect at once. The provider
is called once per tenant and key version per load, never per message.

The stored form of a data key's document (ids, flags, what its wrap is bound to) is
`crypto.key_documents`; this module is what reads and writes it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bson.binary import Binary
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pymongo.errors import DuplicateKeyError

from mindstore.collection_names import DATA_KEYS, LANGGRAPH_CHECKPOINTS, MEMORY_ITEMS, TASKS
from mindstore.crypto.aead import KEY_BYTES
from mindstore.crypto.fields import ENCRYPTED
from mindstore.crypto.integration_sweep import reencrypt_integrations
from mindstore.crypto.key_documents import (
    BINDINGS,
    key_id,
    tenant_filter,
    tombstone_id,
    wrap_context,
    wrap_flags,
)
from mindstore.crypto.key_documents import TENANT_KEK as TENANT_KEK  # re-export: backup's import
from mindstore.crypto.keys import MissingKey, OrphanedKeys, TenantKeys
from mindstore.crypto.master import MasterKey
from mindstore.crypto.memory_fields import reencrypt_memories
from mindstore.crypto.provider import KekState, KeyProvider
from mindstore.crypto.sweep import ProgressFn, SweepProgress, reencrypt
from mindstore.draws import current_tape
from mindstore.errors import ConfigurationError, CryptoError, KeyShredded, ValidationError
from mindstore.ids import check_key
from mindstore.model.base import new_id
from mindstore.operations import Resilience, current, operation

__all__ = [
    "KeyStatus", "Keyring", "MigrationReport", "MissingKey", "OrphanedKeys", "TenantKeys",
    "is_encrypted",
]  # fmt: skip

UNNAMED_ROTATION = (
    "a rotation draws its own marker: retried from this process it is exactly-once (the "
    "store keeps the marker, and the retry finds the key it added), retried from another "
    "one it may add two versions (new writes seal with the newer; nothing is lost)"
)
"""What `Unavailable` says of a rotation."""

DEFAULT_CACHE_SECONDS = 30.0


@dataclass(frozen=True)
class KeyStatus:
    """What `Keyring.status` reports (no key material)."""

    tenant: str
    versions: tuple[int, ...]
    current: int | None
    shredded_at: datetime | None
    master_key_id: str
    """What wraps the data keys: the provider's id, or the shared master key's."""
    kek: KekState | None = None
    """The tenant's key in the provider (None: keys wrapped by a shared master key)."""
    sealed_only: bool = False
    legacy_versions: tuple[int, ...] = ()
    """Versions still wrapped by a shared master key (`migrate` re-wraps them)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "versions": list(self.versions),
            "current": self.current,
            "shredded": self.shredded_at is not None or self.kek == "destroyed",
            "shredded_at": self.shredded_at.isoformat() if self.shredded_at else None,
            "master_key_id": self.master_key_id,
            "kek": self.kek,
            "sealed_only": self.sealed_only,
            "legacy_versions": list(self.legacy_versions),
        }


@dataclass
class MigrationReport:
    """What `Keyring.migrate` did: data keys re-wrapped per tenant."""

    rewrapped: dict[str, int]
    already: int = 0


ClearEraser = Callable[[str], Awaitable[int]]
"""(tenant) -> how many tasks it erased: what a shred erases the tenant's content in the
clear with (`Keyring.clear_eraser`)."""


async def is_encrypted(database: Any, tenant: str) -> bool:
    """Whether the tenant has data keys (or a shred's tombstone): one indexed read, for a
    store without a keyring to refuse the tenant (`KeyringRequired`)."""
    return await database[DATA_KEYS].find_one(tenant_filter(tenant), {"_id": 1}) is not None


class Keyring:
    """Data keys per tenant, wrapped by each tenant's key in a `KeyProvider` (or, in the
    format before per-tenant keys, by one shared `MasterKey`).
    `mindstore.connect(..., keyring=k)` binds it to the store's database (`store.keyring`).

    Args:
        provider: A `KeyProvider` (`LocalKeyVault(path, LocalMasterKey(...))`, a KMS), or a
            `MasterKey` alone for the shared-master format.
        cache_seconds: How long a process keeps a tenant's unwrapped keys.
        legacy: The shared master key of a database not migrated yet: data keys it
            wrapped still open, and `migrate` re-wraps them for `provider`.
        clear_eraser: What a shred runs to erase the tenant's content stored in the clear
            (`backup.shred_clear`; a store binds it, `bind`): (tenant) -> tasks erased.
    """

    def __init__(
        self,
        provider: KeyProvider | MasterKey,
        *,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
        legacy: MasterKey | None = None,
        database: Any = None,
        resilience: Resilience | None = None,
        clear_eraser: ClearEraser | None = None,
    ) -> None:
        if isinstance(provider, KeyProvider):
            self.provider: KeyProvider | None = provider
            self.legacy = legacy
        elif isinstance(provider, MasterKey):
            self.provider, self.legacy = None, provider
        else:
            raise ValidationError(
                "provider must implement mindstore.crypto.KeyProvider (or MasterKey)"
            )
        if legacy is not None and not isinstance(legacy, MasterKey):
            raise ValidationError("legacy must implement mindstore.crypto.MasterKey")
        if not cache_seconds >= 0:
            raise ValidationError("cache_seconds must be >= 0")
        self.cache_seconds = cache_seconds
        self._database = database
        self.clear_eraser = clear_eraser
        """What `shred` erases the tenant's content in the clear with (a layer above this
        one: the store's `backup.shred_clear`); None: a keyring bound to a database alone,
        whose shred only marks such content (a store without a keyring refuses it)."""
        self.resilience = resilience
        """The bound store's retry policy and ledger: its verbs are operations
        (`mindstore.operations`) that retry a transient failure themselves."""
        self._tenants: dict[str, TenantKeys] = {}
        self._unwrapped: dict[tuple[str, int, bytes, str], tuple[AESGCM, float]] = {}
        """Unwrapped keys by (tenant, version, wrapped bytes, flags), with when they were
        unwrapped: a reload within `cache_seconds` (after a rotation, say) asks the
        provider only for versions it has not unwrapped yet."""
        self._making: set[str] = set()
        """Tenants whose first data key this keyring began to make (the provider may hold
        their KEK already) and has not seen stored: their active KEK without data keys is
        this keyring's own first key in the making, not keys deleted (`OrphanedKeys`)."""
        self._first_keys: dict[str, int] = {}
        """How many first data keys this keyring began to make, per tenant: a load that
        saw the count change meanwhile met this keyring's own KEK (`_own_first_key`)."""

    @property
    def master(self) -> MasterKey | None:
        """The shared master key (the format before per-tenant keys), if any."""
        return self.legacy

    @property
    def wrapper_id(self) -> str:
        """What wraps new data keys: the provider's id, or the shared master key's."""
        if self.provider is not None:
            return self.provider.provider_id
        assert self.legacy is not None
        return self.legacy.key_id

    def bind(
        self, database: Any, resilience: Resilience | None = None,
        clear_eraser: ClearEraser | None = None,
    ) -> Keyring:  # fmt: skip
        """This keyring over `database` (a fresh key cache; the provider is shared), its
        verbs retried under `resilience` (a store's), its shreds erasing the tenant's
        content in the clear with `clear_eraser` (a store's)."""
        wrapper: KeyProvider | MasterKey = self.provider or self.legacy  # type: ignore[assignment]
        return Keyring(wrapper, cache_seconds=self.cache_seconds,
                       legacy=self.legacy if self.provider is not None else None,
                       database=database, resilience=resilience,
                       clear_eraser=clear_eraser)  # fmt: skip

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
        its first data key if it has none (a tenant encrypted from this write on; sealed-
        only at once when it holds no content yet). Only a write may `create`: a read
        never changes a tenant's encryption state.

        Raises:
            OrphanedKeys: `create` on a tenant whose provider holds an active KEK but
                whose data keys are gone, while it holds content (a key made now would
                not be sealed-only, and would read forged values in the clear).
        """
        check_key(tenant, "tenant")
        held = self._tenants.get(tenant)
        fresh = held is not None and time.monotonic() - held.loaded_at < self.cache_seconds
        if not fresh or held is None:
            held = await self._load(tenant)
        if create and not held.keys and not held.shredded:
            has_content = await self._has_content(tenant)
            if held.orphaned and has_content:
                raise OrphanedKeys(tenant)
            await self._add_version(tenant, 1, sealed_only=not has_content, bindings=True)
            held = await self._load(tenant)
        return held

    async def refresh(self, tenant: str) -> TenantKeys:
        """Read the tenant's keys again now (a ciphertext names a version not held)."""
        return await self._load(tenant)

    async def _has_content(self, tenant: str) -> bool:
        for name in (TASKS, LANGGRAPH_CHECKPOINTS, MEMORY_ITEMS):
            if await self._database[name].find_one({"tenant": tenant}, {"_id": 1}) is not None:
                return True
        return False

    async def _unwrap(self, tenant: str, document: dict[str, Any]) -> bytes:
        version = int(document["version"])
        wrapped = bytes(document["wrapped"])
        context = wrap_context(tenant, version, wrap_flags(document))
        if document.get("kek") == TENANT_KEK:
            if self.provider is None:
                raise CryptoError(
                    f"data key {version} of tenant {tenant!r} is wrapped by the tenant's key "
                    "in a key provider: open the keyring with that provider"
                )
            return await self.provider.unwrap(tenant, wrapped, context)
        if self.legacy is None:
            raise CryptoError(
                f"data key {version} of tenant {tenant!r} is wrapped by a shared master key "
                "(the format before per-tenant keys): give it as Keyring(..., legacy=...) "
                "and re-wrap with `mindstore keys migrate`"
            )
        return await self.legacy.unwrap(wrapped, context)

    async def _load(self, tenant: str) -> TenantKeys:
        """The tenant's keys as stored. A tenant without data keys in the database is
        asked about in the provider (one `status` call): its KEK destroyed, it is shredded
        (a copy of the data that holds neither keys nor a tombstone); its KEK active, its
        keys were deleted, so it is read as sealed-only and `orphaned`, never as a new
        tenant whose values are in the clear; unless the KEK is this keyring's own first
        key in the making, or another writer's first key landed since the keys were read
        (read again once). Without a provider (a shared master key) nothing is asked."""
        attempts = self._first_keys.get(tenant, 0)
        loaded = await self._read(tenant)
        if not (loaded.keys or loaded.shredded or self.provider is None):
            state = await self.provider.status(tenant)
            if state == "destroyed":
                loaded.shredded = True
            elif state == "active" and not self._own_first_key(tenant, attempts):
                loaded = await self._read(tenant)
                if not (loaded.keys or loaded.shredded or self._own_first_key(tenant, attempts)):
                    loaded.orphaned = loaded.sealed_only = True
        if loaded.keys:
            self._making.discard(tenant)
        if loaded.shredded:
            loaded.keys.clear()
            self._forget_unwrapped(tenant)
        self._tenants[tenant] = loaded
        return loaded

    def _own_first_key(self, tenant: str, attempts: int) -> bool:
        """Did this keyring begin the tenant's first key (still unstored, or since a load
        counted `attempts`)? Then the provider's KEK is that key's, not deleted keys'."""
        return tenant in self._making or self._first_keys.get(tenant, 0) != attempts

    async def _read(self, tenant: str) -> TenantKeys:
        """The tenant's data-key documents, unwrapped (a destroyed KEK: shredded)."""
        now = time.monotonic()
        loaded = TenantKeys(tenant, loaded_at=now)
        documents = await self._keys.find(tenant_filter(tenant)).to_list(None)
        loaded.shredded = any(d.get("kind") == "shredded" for d in documents)
        try:
            for document in documents:
                if loaded.shredded or document.get("kind") != "key":
                    continue
                version = int(document["version"])
                held = (tenant, version, bytes(document["wrapped"]), wrap_flags(document))
                hit = self._unwrapped.get(held)
                if hit is None or now - hit[1] >= self.cache_seconds:
                    hit = (AESGCM(await self._unwrap(tenant, document)), now)
                    self._unwrapped[held] = hit
                loaded.keys[version] = hit[0]
                loaded.sealed_only = loaded.sealed_only or document.get("sealed_only") is True
                if document.get("bindings") == BINDINGS:  # its sweep re-sealed format 1
                    loaded.legacy_bindings = False
        except KeyShredded:  # the provider's key is destroyed: a copy made before the shred
            loaded.shredded = True
        return loaded

    def _forget_unwrapped(self, tenant: str) -> None:
        for held in [held for held in self._unwrapped if held[0] == tenant]:
            del self._unwrapped[held]

    async def _wrap(self, tenant: str, data_key: bytes, document: dict[str, Any]) -> bytes:
        context = wrap_context(tenant, int(document["version"]), wrap_flags(document))
        if document.get("kek") == TENANT_KEK:
            assert self.provider is not None
            return await self.provider.wrap(tenant, data_key, context)
        assert self.legacy is not None
        return await self.legacy.wrap(data_key, context)

    def _new_document(
        self,
        tenant: str,
        version: int,
        *,
        sealed_only: bool,
        bindings: bool = False,
        rotation: str | None = None,
    ) -> dict[str, Any]:
        document: dict[str, Any] = {
            "_id": key_id(tenant, version), "tenant": tenant, "kind": "key",
            "version": version, "master_key_id": self.wrapper_id,
            "sealed_only": sealed_only, "created_at": datetime.now(UTC),
        }  # fmt: skip
        if self.provider is not None:
            document["kek"] = TENANT_KEK
        if bindings:  # a tenant's first key, or one whose sweep re-sealed format 1
            document["bindings"] = BINDINGS
        if rotation is not None:
            document["rotation"] = rotation
        return document

    async def _add_version(
        self,
        tenant: str,
        version: int,
        *,
        sealed_only: bool,
        bindings: bool = False,
        rotation: str | None = None,
    ) -> bool:
        """Store data key `version` of `tenant`; False if another writer stored it first.
        A first key is noted in `_making` until it is stored: the provider makes the KEK
        when it wraps, before the insert, and a retry after a lost insert must not take
        that KEK for deleted keys. `bindings`: no format-1 ciphertext can exist under the
        tenant's keys (`BINDINGS`)."""
        document = self._new_document(
            tenant, version, sealed_only=sealed_only, bindings=bindings, rotation=rotation
        )
        if version == 1:
            self._making.add(tenant)
            self._first_keys[tenant] = self._first_keys.get(tenant, 0) + 1
        document["wrapped"] = Binary(await self._wrap(tenant, os.urandom(KEY_BYTES), document))
        try:
            await self._keys.insert_one(document)
        except DuplicateKeyError:
            self._making.discard(tenant)
            return False
        self._making.discard(tenant)
        return True

    async def _rewrap(
        self, tenant: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> int:
        """Re-wrap each of the tenant's data keys that `change` gives new fields for (the
        key itself unchanged: no content is re-encrypted). Each update is pinned to the
        wrapped bytes it read, so a concurrent re-wrap or shred is never overwritten; a
        lost pin is read again. Returns how many documents were re-wrapped."""
        done = 0
        for _attempt in range(5):
            lost = False
            documents = await self._keys.find({**tenant_filter(tenant), "kind": "key"}).to_list(
                None
            )
            for document in documents:
                fields = change(document)
                if fields is None:
                    continue
                raw = await self._unwrap(tenant, document)
                fresh = {**document, **fields}
                fields["wrapped"] = Binary(await self._wrap(tenant, raw, fresh))
                result = await self._keys.update_one(
                    {"_id": document["_id"], "tenant": tenant, "wrapped": document["wrapped"]},
                    {"$set": fields},
                )
                if result.matched_count:
                    done += 1
                else:
                    lost = True
            if not lost:
                self._tenants.pop(tenant, None)
                return done
        raise CryptoError(f"the data keys of tenant {tenant!r} kept changing during a re-wrap")

    # ------------------------------------------------------------------ verbs
    @operation("keys.rotate")
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
            CryptoError: The provider cannot unwrap the tenant's keys.
            KeyProviderUnavailable: The provider did not answer (nothing was written).
        """
        check_key(tenant, "tenant")
        running = current()
        if running is not None:
            running.note = UNNAMED_ROTATION
        rotation = new_id()  # the same in a retry of this call: its key, if it landed
        tape = current_tape()
        if tape is not None and tape.replaying:  # an earlier attempt's reply was lost
            documents = await self._keys.find(tenant_filter(tenant)).to_list(None)
            for landed in documents:
                if landed.get("kind") == "key" and landed.get("rotation") == rotation:
                    await self._load(tenant)
                    return int(landed["version"])
        while True:
            held = await self._load(tenant)
            if held.shredded:
                raise KeyShredded(tenant)
            if held.orphaned and await self._has_content(tenant):
                raise OrphanedKeys(tenant)
            version = max(held.keys, default=0) + 1
            sealed_only = held.sealed_only or (version == 1 and not await self._has_content(tenant))
            bindings = version == 1 or not held.legacy_bindings  # no format-1 ciphertext
            if await self._add_version(tenant, version, sealed_only=sealed_only,
                                       bindings=bindings, rotation=rotation):  # fmt: skip
                await self._load(tenant)
                return version

    @operation("keys.shred")
    async def shred(self, tenant: str) -> int:
        """Destroy the tenant's keys. Irreversible: its content can no longer be read
        (`KeyShredded`) in the database, and, with a key provider, in every copy ever made
        (snapshots, dumps, replicas, mindstore backups), because the tenant's key in the
        provider is what unwraps their data keys. A tombstone is written first, so reads
        refuse at once and a crash (or a provider that did not answer) before the end is
        finished by running it again. Needs no master key.

        Its content stored in the clear (tasks stored before the tenant was encrypted, not
        swept yet: no key reaches them) is erased, those tasks whole, with its search index
        (`clear_eraser`, which a store binds: `backup.shred_clear`); then its other tasks
        are all marked encrypted, so a store without a keyring refuses them too.

        A shred reaches the tenant's KEK or fails loudly: a tenant whose data keys a
        provider's KEK wraps is shredded only by a keyring over that provider, which must
        hold the KEK; checked before anything is written, and the KEK's state after.

        Args:
            tenant: The tenant.

        Returns:
            How many data keys were deleted from the database.

        Raises:
            ValidationError: A tenant outside the id alphabet.
            ConfigurationError: The tenant's data keys are wrapped by a KEK that this
                keyring's provider does not hold (no provider, another vault or KMS):
                nothing was destroyed.
            CryptoError: The provider still reports the KEK active after destroying it.
            KeyProviderUnavailable: The provider did not answer (run it again).
        """
        check_key(tenant, "tenant")
        wrapped_by = {
            str(document.get("master_key_id"))
            async for document in self._keys.find(tenant_filter(tenant), {"wrapped": 0})
            if document.get("kind") == "key" and document.get("kek") == TENANT_KEK
        }
        if wrapped_by:
            await self._require_kek(tenant, wrapped_by)
        await self._keys.update_one(
            {"_id": tombstone_id(tenant), "tenant": tenant},
            {"$setOnInsert": {"kind": "shredded", "shredded_at": datetime.now(UTC)}},
            upsert=True,
        )
        self._tenants[tenant] = TenantKeys(tenant, shredded=True, loaded_at=time.monotonic())
        self._forget_unwrapped(tenant)
        if self.clear_eraser is not None:  # before the mark: a run cut short finds the rest
            await self.clear_eraser(tenant)
        await self._database[TASKS].update_many(  # the version bump drops writers' caches
            {"tenant": tenant}, {"$set": {ENCRYPTED: True}, "$inc": {"version": 1}}
        )
        if self.provider is not None:
            await self.provider.destroy(tenant)
            if wrapped_by and (state := await self.provider.status(tenant)) != "destroyed":
                raise CryptoError(
                    f"the key provider {self.provider.provider_id!r} reports the key of tenant "
                    f"{tenant!r} {state} after destroying it: the shred is not complete"
                )
        result = await self._keys.delete_many({**tenant_filter(tenant), "kind": "key"})
        return int(result.deleted_count)

    async def _require_kek(self, tenant: str, wrapped_by: set[str]) -> None:
        """ConfigurationError unless this keyring's provider holds the tenant's KEK (active,
        or destroyed by a shred cut short), before a shred writes anything."""
        named = ", ".join(sorted(repr(name) for name in wrapped_by))
        if self.provider is None:
            raise ConfigurationError(
                f"the data keys of tenant {tenant!r} are wrapped by its key in a key provider "
                f"({named}): shred it with that provider (--key-vault DIR, or the KMS), else "
                "its key lives on and every copy of its data stays readable; nothing was "
                "destroyed"
            )
        if await self.provider.status(tenant) == "absent":
            raise ConfigurationError(
                f"the key provider {self.provider.provider_id!r} holds no key for tenant "
                f"{tenant!r}, whose data keys name {named}: not the provider that wraps them "
                "(another vault, a mistyped path?); nothing was destroyed"
            )

    @operation("keys.reencrypt")
    async def reencrypt(
        self, tenant: str, *, progress: ProgressFn | None = None, restart: bool = False
    ) -> SweepProgress:
        """Seal all of the tenant's stored content with its newest data key: after a
        rotation, or to encrypt what was stored before the tenant was (resumable: a sweep
        cut short goes on after the last task it finished; `crypto.sweep`), then the
        LangGraph saver's documents (`crypto.integration_sweep`) and the memory items
        (`crypto.memory_fields`). When it finishes, the
        tenant is sealed-only: a value in the clear is refused as tampering from then on.

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
                the provider cannot unwrap.
            Conflict: A task kept changing under the sweep.
        """
        keys = await self.keys(check_key(tenant, "tenant"), create=True)
        swept = await reencrypt(self._database, keys, progress=progress, restart=restart)
        swept.values_sealed += await reencrypt_integrations(self._database, keys)
        swept.values_sealed += await reencrypt_memories(self._database, keys)
        await self.seal_only(tenant)
        return swept

    @operation("keys.seal_only")
    async def seal_only(self, tenant: str) -> int:
        """Mark the tenant sealed-only (its sweep has sealed everything, in the current
        ciphertext format: `BINDINGS`, so an older format is refused from then on): every
        data key is re-wrapped with the flags bound in, so removing one in the database
        makes the key unwrap no more. Returns how many keys were re-wrapped."""
        done = {"sealed_only": True, "bindings": BINDINGS}
        return await self._rewrap(
            tenant, lambda d: None if all(d.get(k) == v for k, v in done.items()) else dict(done)
        )

    @operation("keys.migrate")
    async def migrate(self, tenant: str | None = None) -> MigrationReport:
        """Re-wrap data keys wrapped by the shared master key (`legacy`) with each tenant's
        own key in the provider: no content is re-encrypted (the data keys stay the same),
        so the store keeps serving reads and writes meanwhile (open its keyrings with
        `legacy=` until this is done). Resumable: a key already re-wrapped is skipped.

        Args:
            tenant: One tenant; None for every tenant that has keys.

        Returns:
            A `MigrationReport`.

        Raises:
            ConfigurationError: The keyring has no provider or no legacy master key.
            KeyProviderUnavailable: The provider did not answer (run it again).
        """
        if self.provider is None or self.legacy is None:
            raise ConfigurationError(
                "migrate needs a key provider and the shared master key: "
                "Keyring(provider, legacy=master)"
            )
        if tenant is not None:
            tenants = [check_key(tenant, "tenant")]
        else:
            found = await self._keys.distinct("tenant", {"kind": "key"})
            tenants = sorted(t for t in found if isinstance(t, str))
        report = MigrationReport(rewrapped={})
        provider_id = self.provider.provider_id

        def change(document: dict[str, Any]) -> dict[str, Any] | None:
            if document.get("kek") == TENANT_KEK:
                report.already += 1
                return None
            return {"kek": TENANT_KEK, "master_key_id": provider_id}

        for name in tenants:
            if (await self._load(name)).shredded:
                continue
            report.rewrapped[name] = await self._rewrap(name, change)
        return report

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
        legacy: list[int] = []
        sealed_only = False
        shredded_at = None
        async for document in self._keys.find(tenant_filter(tenant), {"wrapped": 0}):
            if document.get("kind") == "key":
                versions.append(int(document["version"]))
                if document.get("kek") != TENANT_KEK:
                    legacy.append(int(document["version"]))
                sealed_only = sealed_only or document.get("sealed_only") is True
            elif document.get("kind") == "shredded":
                shredded_at = document.get("shredded_at")
        versions.sort()
        kek = await self.provider.status(tenant) if self.provider is not None else None
        return KeyStatus(
            tenant=tenant, versions=tuple(versions), current=versions[-1] if versions else None,
            shredded_at=shredded_at, master_key_id=self.wrapper_id, kek=kek,
            sealed_only=sealed_only, legacy_versions=tuple(sorted(legacy)),
        )  # fmt: skip
