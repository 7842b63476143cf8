"""Backup of the units that are not tasks: LangGraph threads, agents, memory items, tenant
policies.

What a scope holds of them (docs/backup.md, "Scope"):

* no scope, or `tenant`: every thread, agent and policy (of the tenant);
* `owner`: the owner's threads (an owner-scoped saver's), the agent named like the owner,
  the owner's memory items, no policy;
* `since`: every thread active since then (`threads`), whole; agents with
  ``updated_at >= since``; memory items written since; policies with
  ``retention.updated_at >= since``;
* `task_ids`: none of them;
* always: the wrapped data keys of the tenants in scope (`data_keys`) that a tenant's own
  key in a key provider wraps (and a shred's tombstone), so a backup restored into an
  empty database reads with the same provider, and a shred reaches it
  (docs/encryption.md). Keys wrapped by a shared master key are never written.

A thread is a unit: it is backed up whole (every checkpoint, write and blob under its key
prefix), so a restored thread resumes where it was. Documents are read by keyset pages on
`_id` (a page of at most `PAGE_DOCUMENTS`, fewer for blobs, which can be large) and handed
to the writer at once; memory holds one page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    MEMORY_ITEMS,
    POLICIES,
)
from mindstore.crypto.keyring import TENANT_KEK
from mindstore.integrations import langgraph_keys as keys

from .container import RecordWriter
from .keyset import keyset_pages
from .manifest import Scope
from .threads import THREAD_COLLECTIONS, find_threads

__all__ = ["UnitExporter"]

PAGE_DOCUMENTS = {
    LANGGRAPH_CHECKPOINTS: 200,
    LANGGRAPH_WRITES: 64,
    LANGGRAPH_BLOBS: 16,
    AGENTS: 500,
    MEMORY_ITEMS: 200,
    POLICIES: 500,
    DATA_KEYS: 500,
}


def _travels(document: dict[str, Any]) -> bool:
    """A data-key document a backup holds: a tenant-wrapped key, or a shred's tombstone."""
    kind = document.get("kind")
    return kind == "shredded" or (kind == "key" and document.get("kek") == TENANT_KEK)


class UnitExporter:
    """Writes the threads, agents and policies a scope holds (see the module doc)."""

    def __init__(
        self,
        db: Any,
        scope: Scope,
        writers: dict[str, RecordWriter],
        seen_tenant: Callable[[str], None],
    ) -> None:
        self.db = db
        self.scope = scope
        self.writers = writers
        self.seen_tenant = seen_tenant

    async def run(self) -> None:
        scope = self.scope
        base: dict[str, Any] = {} if scope.tenant is None else {"tenant": scope.tenant}
        await self._stream(DATA_KEYS, base, keep=_travels)
        if scope.task_ids is not None:
            return  # a backup of named tasks holds those tasks (and their keys) only
        await self._threads(base)
        agents = dict(base)
        if scope.owner is not None:
            agents["owner"] = scope.owner
        if scope.since is not None:
            agents["updated_at"] = {"$gte": scope.since}
        await self._stream(AGENTS, agents)
        memories = dict(base)
        if scope.owner is not None:
            memories["owner"] = scope.owner
        if scope.since is not None:
            memories["updated_at"] = {"$gte": scope.since}
        await self._stream(MEMORY_ITEMS, memories)
        if scope.owner is None:
            policies = dict(base)
            if scope.since is not None:
                policies["retention.updated_at"] = {"$gte": scope.since}
            await self._stream(POLICIES, policies)

    async def _threads(self, base: dict[str, Any]) -> None:
        scope = self.scope
        if scope.owner is None and scope.since is None:
            for name in THREAD_COLLECTIONS:
                await self._stream(name, base)
            return
        tenants = [scope.tenant] if scope.tenant is not None else sorted({
            tenant for name in THREAD_COLLECTIONS
            for tenant in await self.db[name].distinct("tenant") if isinstance(tenant, str)
        })  # fmt: skip
        for tenant in tenants:
            threads = await find_threads(self.db, tenant, scope.owner)
            for prefix, thread in sorted(threads.items()):
                since = scope.since
                if since is not None and thread.last_active is not None and \
                        thread.last_active < since:  # fmt: skip
                    continue  # not active since: the full backup holds it
                for name in THREAD_COLLECTIONS:
                    await self._stream(name, {"tenant": tenant, "_id": keys.prefix_range(prefix)})

    async def _stream(
        self,
        name: str,
        query: dict[str, Any],
        keep: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Every document matching `query` (and `keep`), in `_id` order, to the writer."""
        collection = self.db[name]
        writer = self.writers[name]
        async for documents in keyset_pages(collection, query, page=PAGE_DOCUMENTS[name]):
            for document in documents:
                if keep is not None and not keep(document):
                    continue
                if isinstance(document.get("tenant"), str):
                    self.seen_tenant(document["tenant"])
                writer.add(document)
