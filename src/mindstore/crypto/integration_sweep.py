"""The re-encryption sweep over integration documents: every sealable value of a tenant's
LangGraph checkpoints, writes and blobs sealed with its newest data key.

`Keyring.reencrypt` runs it after the task sweep (`crypto.sweep`): after a rotation old
ciphertexts are re-sealed, and plaintext stored before the tenant was encrypted is sealed.
Collection by collection, in `_id` order, a page at a time; a document is rewritten only
when it holds a value that is not sealed with the newest key (`stale_values`), so the
sweep is idempotent and one cut short (a crash, a kill) finishes when run again.

Each rewrite is guarded by what the writers of that collection change, so a write made
between the sweep's read and its update is never lost (the sweep reads again): a
checkpoint by its `c` (every put rewrites it), a writes document by its change counter
`v` (as `langgraph_writes` replaces items, and bumped the same way), a blob by its type
and bytes (the writes compaction turns it into a reference map).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mindstore.collection_names import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.crypto.integration_fields import (
    COLLECTIONS,
    SEALED_FIELDS,
    open_fields,
    seal_fields,
    stale_values,
)
from mindstore.crypto.keys import TenantKeys
from mindstore.errors import Conflict

__all__ = ["reencrypt_integrations"]

PAGE = 200
ATTEMPTS = 20
GUARDS = {LANGGRAPH_CHECKPOINTS: ("c",), LANGGRAPH_BLOBS: ("t", "b")}
"""Fields a rewrite is pinned by (writes documents: their counter `v`, see the module doc)."""


def _tenant_range(tenant: str) -> dict[str, Any]:
    """All of a tenant's documents through the `_id` index (`<tenant>/...`)."""
    return {"$gt": f"{tenant}/", "$lt": f"{tenant}0"}


async def _reseal(database: Any, name: str, document: dict[str, Any], keys: TenantKeys) -> int:
    """Re-seal one document (read again while a writer gets there first); values sealed."""
    tenant, collection = keys.tenant, database[name]
    version = keys.current()[0]
    for _attempt in range(ATTEMPTS):
        stale = stale_values(name, document, version)
        if not stale:
            return 0
        doc_id = document["_id"]
        fresh = seal_fields(name, doc_id, open_fields(name, doc_id, document, keys, tenant),
                            keys, tenant)  # fmt: skip
        sets = {field: fresh[field] for field in SEALED_FIELDS[name] if field in fresh}
        query: dict[str, Any] = {"_id": doc_id, "tenant": tenant}
        if name == LANGGRAPH_WRITES:
            counter = document.get("v")
            query["v"] = counter if counter is not None else {"$exists": False}
            sets["v"] = int(counter or 0) + 1
        else:
            query.update({field: document.get(field) for field in GUARDS[name]})
        result = await collection.update_one(query, {"$set": sets})
        if result.matched_count:
            return stale
        await asyncio.sleep(0.01)
        again = await collection.find_one({"_id": doc_id, "tenant": tenant})
        if again is None:
            return 0  # deleted meanwhile
        document = again
    raise Conflict(f"{name} {document['_id']!r}: the re-encryption sweep kept losing to writers")


async def reencrypt_integrations(database: Any, keys: TenantKeys) -> int:
    """Seal every integration document of the tenant of `keys` with its newest data key
    (see the module doc); returns how many values were sealed."""
    sealed = 0
    for name in COLLECTIONS:
        after: str | None = None
        while True:
            query: dict[str, Any] = {"tenant": keys.tenant, "_id": _tenant_range(keys.tenant)}
            if after is not None:
                query["_id"] = {**query["_id"], "$gt": after}
            page = await database[name].find(query).sort("_id", 1).limit(PAGE).to_list(length=PAGE)
            for document in page:
                sealed += await _reseal(database, name, document, keys)
            if len(page) < PAGE:
                break
            after = page[-1]["_id"]
    return sealed
