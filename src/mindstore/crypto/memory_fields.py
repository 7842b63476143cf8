"""Which fields of a long-term memory item are sealed, their binding, and the re-encryption
sweep over them (docs/encryption.md, "Integration data").

A memory item (`mindstore.memory`) holds two sealable values, both bytes: its value `v`
(JSON) and its embeddings `e` (float32). Each is sealed whole with the tenant's data key,
bound to (tenant, ``memory_items/<_id>``, the field name): moved to another item or field
it does not open. `z` marks an item whose values are sealed (what a shred leaves alone).

`reencrypt_memories` is the part of `Keyring.reencrypt` for these items: every item of the
tenant whose values are not sealed with the newest key (older key, or stored in the clear
before the tenant was encrypted) is re-sealed, in `_id` order a page at a time, each
rewrite pinned by the stored values it replaces, so a put made meanwhile (which writes
fresh ciphertexts) is never overwritten: the item is read again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mindstore.collection_names import MEMORY_ITEMS
from mindstore.crypto.aead import Context, is_current, is_sealed, open_value, seal_value
from mindstore.crypto.keys import TenantKeys
from mindstore.errors import Conflict

__all__ = ["SEALED", "SEALED_MARK", "context", "reencrypt_memories"]

SEALED = ("v", "e")
"""The fields of a memory item that hold ciphertexts under a keyring."""
SEALED_MARK = "z"
"""Set (True) on an item whose values are ciphertexts."""
PAGE = 200
ATTEMPTS = 20


def context(tenant: str, doc_id: str, field: str) -> Context:
    """What a memory item's sealed field is bound to."""
    return (tenant, f"{MEMORY_ITEMS}/{doc_id}", "", field)


def _resealed(document: dict[str, Any], keys: TenantKeys) -> dict[str, Any]:
    tenant, doc_id = keys.tenant, str(document["_id"])
    version, key = keys.current()
    sets: dict[str, Any] = {SEALED_MARK: True}
    for field in SEALED:
        stored = document.get(field)
        if stored is None or is_current(stored, version):
            continue
        plain = (
            open_value(stored, keys.key, context(tenant, doc_id, field))
            if is_sealed(stored)
            else bytes(stored)
        )
        sets[field] = seal_value(bytes(plain), key, version, context(tenant, doc_id, field))
    return sets


def _stale(document: dict[str, Any], version: int) -> bool:
    if document.get(SEALED_MARK) is not True:
        return True
    return any(
        document.get(field) is not None and not is_current(document[field], version)
        for field in SEALED
    )


async def reencrypt_memories(database: Any, keys: TenantKeys) -> int:
    """Seal every memory item of the tenant of `keys` with its newest data key (see the
    module doc); returns how many items were rewritten."""
    collection = database[MEMORY_ITEMS]
    version = keys.current()[0]
    rewritten = 0
    after: str | None = None
    while True:
        query: dict[str, Any] = {"tenant": keys.tenant}
        if after is not None:
            query["_id"] = {"$gt": after}
        page = await collection.find(query).sort("_id", 1).limit(PAGE).to_list(length=PAGE)
        for document in page:
            for _attempt in range(ATTEMPTS):
                if not _stale(document, version):
                    break
                guard = {"_id": document["_id"], "tenant": keys.tenant}
                guard.update({field: document.get(field) for field in SEALED})
                result = await collection.update_one(guard, {"$set": _resealed(document, keys)})
                if result.matched_count:
                    rewritten += 1
                    break
                await asyncio.sleep(0.01)
                again = await collection.find_one({"_id": document["_id"], "tenant": keys.tenant})
                if again is None:
                    break  # deleted meanwhile
                document = again
            else:
                raise Conflict(f"memory item {document['_id']!r}: the sweep kept losing to writers")
        if len(page) < PAGE:
            return rewritten
        after = page[-1]["_id"]
