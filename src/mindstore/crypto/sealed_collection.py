"""A collection of integration documents as seen through one tenant's keys: what a write
sets is sealed, what a read returns is opened (`crypto.integration_fields` says which fields).

The LangGraph saver, its writes and its admin operations work on plain documents; on a
store with a keyring the saver hands them this wrapper instead of the raw collection
(`sealed_collection`), so every path that reads or writes its documents (puts, reads,
writes compaction, copy, prune, delete) goes through one seam. Without a keyring the saver
keeps the raw collection: what it stores is byte for byte what it stored before.

Key loading is async and happens in each method, so it works from the saver's async
methods and from its sync forms (which run them in a loop of their own). A write loads the
tenant's keys with `create` (a tenant is encrypted from its first write on); a read that
meets a key version this process does not hold yet (rotated by another process) reads the
keys again once. Only the operations the saver uses are offered.

Without a keyring the saver gets `ClearCollection`: the raw collection's documents as
they are, except that it refuses an encrypted tenant (`KeyringRequired`): a write when the
tenant has data keys or was shredded (one indexed read of `data_keys`, again at a write
once `CLEAR_CHECK_SECONDS` have passed: a saver that started before its tenant was
encrypted stops writing in the clear within the keyring's cache period, as any process
sees another's rotation or shred), a read that meets a ciphertext.
"""

from __future__ import annotations

import time
from typing import Any

from mindstore.crypto.aead import holds_sealed
from mindstore.crypto.integration_fields import open_fields, seal_fields
from mindstore.crypto.keyring import DEFAULT_CACHE_SECONDS, Keyring, is_encrypted
from mindstore.crypto.keys import MissingKey, TenantKeys
from mindstore.errors import CryptoError, KeyringRequired

__all__ = ["ClearCollection", "SealedCollection", "SealedCursor", "sealed_collection"]

SEALING_OPERATORS = ("$set", "$setOnInsert")
CLEAR_CHECK_SECONDS = DEFAULT_CACHE_SECONDS
"""How long a saver without a keyring trusts that its tenant is not encrypted."""


class _TenantCollection:
    """What both views of an integration collection share: deletes as they are, reads
    through `opened` (which each view defines)."""

    collection: Any

    async def opened(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def delete_many(self, filter: dict[str, Any]) -> Any:
        return await self.collection.delete_many(filter)

    async def find_one(
        self, filter: dict[str, Any], projection: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        document = await self.collection.find_one(filter, projection)
        return None if document is None else (await self.opened([document]))[0]

    def find(
        self, filter: dict[str, Any], projection: dict[str, Any] | None = None
    ) -> SealedCursor:
        return SealedCursor(self, self.collection.find(filter, projection))


class SealedCollection(_TenantCollection):
    """One integration collection of one tenant, sealed on write and opened on read."""

    def __init__(self, collection: Any, name: str, keyring: Keyring, tenant: str) -> None:
        self.collection = collection
        self.name = name
        self.keyring = keyring
        self.tenant = tenant

    async def _keys(self, *, write: bool = False) -> TenantKeys:
        return await self.keyring.keys(self.tenant, create=write)

    async def opened(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Stored documents with their ciphertexts opened (see the module doc)."""
        if not documents:
            return documents
        keys = await self._keys()
        try:
            return [self._open(document, keys) for document in documents]
        except MissingKey:
            keys = await self.keyring.refresh(self.tenant)
            return [self._open(document, keys) for document in documents]

    def _open(self, document: dict[str, Any], keys: TenantKeys) -> dict[str, Any]:
        return open_fields(self.name, str(document.get("_id")), document, keys, self.tenant)

    async def update_one(
        self, filter: dict[str, Any], update: dict[str, Any], upsert: bool = False
    ) -> Any:
        """`update_one` with the values of `$set` / `$setOnInsert` sealed for the document
        the filter names by `_id` (every write of the saver does)."""
        doc_id = filter.get("_id")
        if not isinstance(doc_id, str):
            raise CryptoError(f"{self.name}: a sealed write must name its document's _id")
        if any(operator in update for operator in SEALING_OPERATORS):
            keys = await self._keys(write=True)
            update = {
                operator: seal_fields(self.name, doc_id, value, keys, self.tenant)
                if operator in SEALING_OPERATORS
                else value
                for operator, value in update.items()
            }
        return await self.collection.update_one(filter, update, upsert=upsert)


class ClearCollection(_TenantCollection):
    """One integration collection of one tenant on a store without a keyring: documents
    as stored, an encrypted tenant refused (see the module doc)."""

    def __init__(self, collection: Any, database: Any, tenant: str) -> None:
        self.collection = collection
        self.database = database
        self.tenant = tenant
        self._clear_since: float | None = None
        """When the tenant was last seen without data keys (None: not yet)."""

    async def opened(self, documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if any(holds_sealed(document) for document in documents):
            raise KeyringRequired(self.tenant)
        return documents

    async def update_one(
        self, filter: dict[str, Any], update: dict[str, Any], upsert: bool = False
    ) -> Any:
        checked = self._clear_since
        stale = checked is None or time.monotonic() - checked >= CLEAR_CHECK_SECONDS
        if stale and any(operator in update for operator in SEALING_OPERATORS):
            if await is_encrypted(self.database, self.tenant):
                raise KeyringRequired(self.tenant, "write to")
            self._clear_since = time.monotonic()
        return await self.collection.update_one(filter, update, upsert=upsert)


class SealedCursor:
    """A cursor whose documents come back opened (`sort`, `limit`, `to_list`)."""

    def __init__(self, owner: _TenantCollection, cursor: Any) -> None:
        self._owner = owner
        self._cursor = cursor

    def sort(self, key: str, direction: int = 1) -> SealedCursor:
        self._cursor = self._cursor.sort(key, direction)
        return self

    def limit(self, count: int) -> SealedCursor:
        self._cursor = self._cursor.limit(count)
        return self

    async def to_list(self, length: int | None = None) -> list[dict[str, Any]]:
        return await self._owner.opened(await self._cursor.to_list(length=length))


def sealed_collection(
    collection: Any, name: str, keyring: Keyring | None, tenant: str, database: Any
) -> SealedCollection | ClearCollection:
    """The collection as an integration should use it: sealed under `keyring`, or as
    stored, with encrypted tenants refused, when the store has none."""
    if keyring is None:
        return ClearCollection(collection, database, tenant)
    return SealedCollection(collection, name, keyring, tenant)
