"""`MemoryItems`: one tenant's long-term memory items (and one owner's, on an owner scope),
read and written as documents of ``memory_items`` (`memory.rules` says what they hold).

Every write is one guarded statement naming the shard key (``tenant``, ``_id``): a put is
an upsert by `_id` that sets the item whole (value, embeddings, times) and keeps its
creation time, a delete removes it by `_id`, a TTL refresh moves its expiry forward only
while it is the expiry that was read. An owner scope adds ``owner`` to every filter: another
owner's item reads as absent and cannot be overwritten (`NotFound`).

On a store with a keyring the value and the embeddings are sealed with the tenant's data
key (bound to the tenant, the item's `_id` and the field), so a shred makes them
unreadable (`KeyShredded`) in the database and in every backup; namespaces, keys, owners
and times stay clear, as the saver's ids do (docs/encryption.md, "Integration data").
Without a keyring an encrypted tenant is refused (`KeyringRequired`).

Searches read every item under a namespace prefix (the ``(tenant, p)`` index gives the
range) and filter and rank them in the process: values are sealed, and LangGraph's
filters and cosine ranking run on opened values and vectors (docs/integrations.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from bson import Binary
from pymongo.errors import DuplicateKeyError

from mindstore.clock import as_utc, utcnow
from mindstore.collection_names import MEMORY_ITEMS
from mindstore.crypto.aead import is_sealed, open_value, seal_value
from mindstore.crypto.fields import clear_refused
from mindstore.crypto.keyring import DEFAULT_CACHE_SECONDS, Keyring, is_encrypted
from mindstore.crypto.keys import MissingKey, TenantKeys
from mindstore.crypto.memory_fields import SEALED_MARK, context
from mindstore.errors import KeyringRequired, NotFound, ValidationError

from . import rules

__all__ = ["MemoryItem", "MemoryItems", "StoredItem"]

Clock = Callable[[], datetime]


class HoldsDatabase(Protocol):
    """What `MemoryItems.of` reads of a `Store` (`mindstore.protocols.HasDatabase`, which
    sits above this layer): its database handle; its keyring, when it has one, is read
    as the LangGraph saver reads it (an attribute a view's store may lack)."""

    @property
    def database(self) -> Any: ...


@dataclass(frozen=True)
class MemoryItem:
    """An item as read: its namespace, key, value and times (`score`: a search's rank)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    score: float | None = None


@dataclass
class StoredItem:
    """An item and what a search ranks it by (its vectors, opened)."""

    item: MemoryItem
    doc_id: str
    ttl: float | None
    vectors: list[tuple[float, ...]] = field(default_factory=list)


class MemoryItems:
    """The memory items of one tenant (and owner) of a database (see the module doc).

    Args:
        database: The store's database.
        tenant: The tenant every read and write is scoped to.
        owner: An owner scope (its items only), or None (the tenant's, every owner's).
        keyring: The store's keyring: values sealed under it; None: stored as they are.
        owner_label: On a tenant scope, the namespace position that names the item's
            owner (``("memories", "<user>")``: 1); the owner's erase then reaches it.
        clock: What "now" is (the store's clock; tests move it).
    """

    def __init__(
        self,
        database: Any,
        tenant: str,
        *,
        owner: str | None = None,
        keyring: Keyring | None = None,
        owner_label: int | None = None,
        clock: Clock = utcnow,
    ) -> None:
        if owner_label is not None and (
            not isinstance(owner_label, int) or not 0 <= owner_label < rules.MAX_DEPTH
        ):
            raise ValidationError(f"owner_label must be a position 0..{rules.MAX_DEPTH - 1}")
        self.collection = database[MEMORY_ITEMS]
        self.database = database
        self.tenant = tenant
        self.owner = owner
        self.keyring = keyring
        self.owner_label = owner_label
        self.clock = clock
        self._clear_since: float | None = None

    @classmethod
    def of(
        cls,
        store: HoldsDatabase,
        tenant: str,
        *,
        owner: str | None = None,
        owner_label: int | None = None,
        clock: Clock = utcnow,
    ) -> MemoryItems:
        """The items of `tenant` (and `owner`) of a `Store`: its database, sealed under its
        keyring when it has one (what a reader outside LangGraph, such as an MCP tool over
        a namespace's memories, builds)."""
        keyring = getattr(store, "keyring", None)
        return cls(
            store.database,
            tenant,
            owner=owner,
            keyring=keyring if isinstance(keyring, Keyring) else None,
            owner_label=owner_label,
            clock=clock,
        )

    # ------------------------------------------------------------------ scope
    def scope(self) -> dict[str, Any]:
        """The filter every read starts from: the tenant, and the owner on an owner scope."""
        query: dict[str, Any] = {"tenant": self.tenant}
        if self.owner is not None:
            query["owner"] = self.owner
        return query

    def owner_of(self, namespace: Sequence[str]) -> str | None:
        """The owner an item in `namespace` belongs to (the module doc of `rules`)."""
        if self.owner is not None:
            return self.owner
        position = self.owner_label
        if position is None or position >= len(namespace):
            return None
        label = namespace[position]
        if not rules.is_owner_label(label):
            raise ValidationError(
                f"namespace label {position} names the item's owner and must be an owner id "
                f"({rules.OWNER_ALPHABET}), not {label[:60]!r}"
            )
        return label

    def doc_id(self, namespace: Sequence[str], key: str) -> str:
        return rules.item_id(self.tenant, namespace, key)

    # ------------------------------------------------------------------ keys
    async def _keys(self, *, write: bool) -> TenantKeys | None:
        if self.keyring is None:
            if write:
                checked = self._clear_since
                if checked is None or time.monotonic() - checked >= DEFAULT_CACHE_SECONDS:
                    if await is_encrypted(self.database, self.tenant):
                        raise KeyringRequired(self.tenant, "write to")
                    self._clear_since = time.monotonic()
            return None
        return await self.keyring.keys(self.tenant, create=write)

    def _seal(self, keys: TenantKeys | None, doc_id: str, name: str, data: bytes) -> Any:
        if keys is None:
            return Binary(data)
        version, key = keys.current()
        return seal_value(data, key, version, context(self.tenant, doc_id, name))

    def _open(self, keys: TenantKeys | None, doc_id: str, name: str, stored: Any) -> bytes:
        if not is_sealed(stored):
            if keys is not None and keys.sealed_only:
                raise clear_refused(f"{name} of memory item {doc_id!r}", self.tenant)
            return bytes(stored)
        if keys is None:
            raise KeyringRequired(self.tenant)
        opened = open_value(stored, keys.key, context(self.tenant, doc_id, name))
        return bytes(opened)

    async def _opened(
        self, documents: list[dict[str, Any]], *, vectors: bool = False
    ) -> list[StoredItem]:
        if not documents:
            return []
        keys = None if self.keyring is None else await self._keys(write=False)
        try:
            return [self._item(document, keys, vectors) for document in documents]
        except MissingKey:
            assert self.keyring is not None
            keys = await self.keyring.refresh(self.tenant)
            return [self._item(document, keys, vectors) for document in documents]

    def _item(self, document: dict[str, Any], keys: TenantKeys | None, vectors: bool) -> StoredItem:
        doc_id = str(document["_id"])
        value = rules.decode_value(self._open(keys, doc_id, "v", document["v"]))
        expires = document.get("x")
        item = MemoryItem(
            namespace=tuple(document["ns"]),
            key=str(document["k"]),
            value=value,
            created_at=as_utc(document["c"]),
            updated_at=as_utc(document["updated_at"]),
            expires_at=None if expires is None else as_utc(expires),
        )
        found: list[tuple[float, ...]] = []
        if vectors and document.get("e") is not None:
            data = self._open(keys, doc_id, "e", document["e"])
            found = rules.decode_vectors(data, int(document["d"]))
        ttl = document.get("t")
        return StoredItem(item, doc_id, None if ttl is None else float(ttl), found)

    # ------------------------------------------------------------------ writes
    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Any,
        *,
        vectors: Sequence[Sequence[float]] | None = None,
        dims: int | None = None,
        ttl_minutes: float | None = None,
    ) -> None:
        """Store an item whole (one upsert by `_id`). `vectors`: its embeddings (`dims`
        each; None: not indexed); `ttl_minutes`: it expires that long after its last
        write or refreshing read. Another owner's item: `NotFound`."""
        namespace = rules.check_namespace(namespace)
        key = rules.check_key(key)
        data = rules.encode_value(value)
        ttl = rules.check_ttl(ttl_minutes)
        encoded = None
        if vectors:
            if dims is None:
                raise ValidationError("vectors need dims")
            encoded = rules.encode_vectors(vectors, dims)
        owner = self.owner_of(namespace)
        doc_id = self.doc_id(namespace, key)
        keys = await self._keys(write=True)
        now = self.clock()
        sets: dict[str, Any] = {
            "ns": list(namespace),
            "p": rules.path_of(namespace),
            "k": key,
            "v": self._seal(keys, doc_id, "v", data),
            "updated_at": now,
        }
        unsets: dict[str, str] = {}
        if owner is not None:
            sets["owner"] = owner
        if encoded is not None:
            sets.update({"e": self._seal(keys, doc_id, "e", encoded), "d": dims})
        else:
            unsets.update({"e": "", "d": ""})
        if ttl is not None:
            sets.update({"t": ttl, "x": now + timedelta(minutes=ttl)})
        else:
            unsets.update({"t": "", "x": ""})
        if keys is not None:
            sets[SEALED_MARK] = True
        else:
            unsets[SEALED_MARK] = ""
        update: dict[str, Any] = {"$set": sets, "$setOnInsert": {"c": now}}
        if unsets:
            update["$unset"] = unsets
        query = {"_id": doc_id, **self.scope()}
        for attempt in range(2):
            try:
                await self.collection.update_one(query, update, upsert=True)
                return
            except DuplicateKeyError:
                # two upserts of a new item raced (a server inserts for one of them),
                # or the item is another owner's: once more, then it is not ours
                if attempt:
                    raise NotFound(
                        f"memory item {key!r} in namespace {namespace!r} is another owner's"
                    ) from None

    async def delete(self, namespace: Sequence[str], key: str) -> None:
        """Delete an item (absent: nothing happens)."""
        namespace = rules.check_namespace(namespace)
        key = rules.check_key(key)
        await self.collection.delete_one({"_id": self.doc_id(namespace, key), **self.scope()})

    async def refresh(self, stored: Sequence[StoredItem], *, live_only: bool) -> None:
        """Move the expiry of items read (those with a TTL) to now + their TTL, each only
        while it still holds the expiry that was read (`live_only`: and is not past)."""
        now = self.clock()
        for entry in stored:
            expires = entry.item.expires_at
            if entry.ttl is None or expires is None:
                continue
            if live_only and expires <= now:
                continue
            await self.collection.update_one(
                {"_id": entry.doc_id, **self.scope(), "x": expires},
                {"$set": {"x": now + timedelta(minutes=entry.ttl)}},
            )

    async def sweep(self) -> int:
        """Delete the items past their expiry; returns how many."""
        now = self.clock()
        query = {**self.scope(), "x": {"$lt": now}}
        ids = [d["_id"] async for d in self.collection.find(query, {"_id": 1})]
        deleted = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            result = await self.collection.delete_many(
                {"tenant": self.tenant, "_id": {"$in": chunk}, "x": {"$lt": now}}
            )
            deleted += int(result.deleted_count)
        return deleted

    # ------------------------------------------------------------------ reads
    async def get_many(
        self, wanted: Sequence[tuple[Sequence[str], str]], *, omit_expired: bool = False
    ) -> list[StoredItem | None]:
        """The items at (namespace, key) pairs, in order (None: absent, another owner's,
        or expired when `omit_expired`): one query."""
        checked = [(rules.check_namespace(ns), rules.check_key(key)) for ns, key in wanted]
        ids = [self.doc_id(ns, key) for ns, key in checked]
        if not ids:
            return []
        found = await self.collection.find(
            {"_id": {"$in": sorted(set(ids))}, **self.scope()}
        ).to_list(None)
        opened = {entry.doc_id: entry for entry in await self._opened(found)}
        now = self.clock()
        out: list[StoredItem | None] = []
        for doc_id in ids:
            entry = opened.get(doc_id)
            if entry is not None and omit_expired and _expired(entry.item, now):
                entry = None
            out.append(entry)
        return out

    async def get(self, namespace: Sequence[str], key: str) -> MemoryItem | None:
        """One item (None: absent)."""
        entry = (await self.get_many([(namespace, key)]))[0]
        return None if entry is None else entry.item

    async def under(
        self, prefix: Sequence[str], *, vectors: bool = False, omit_expired: bool = False
    ) -> list[StoredItem]:
        """Every item under a namespace prefix, newest write first (ties: by namespace
        and key), opened: what a search filters and ranks."""
        prefix = rules.check_prefix(prefix)
        query = self.scope()
        span = rules.prefix_range(prefix)
        if span is not None:
            query["p"] = span
        found = await self.collection.find(query).to_list(None)
        entries = await self._opened(found, vectors=vectors)
        if omit_expired:
            now = self.clock()
            entries = [e for e in entries if not _expired(e.item, now)]
        entries.sort(key=lambda e: (e.item.namespace, e.item.key))
        entries.sort(key=lambda e: e.item.updated_at, reverse=True)
        return entries

    async def search(
        self,
        prefix: Sequence[str] = (),
        *,
        filter: Any = None,
        query_vector: Sequence[float] | None = None,
        limit: int = 10,
        offset: int = 0,
        omit_expired: bool = False,
        distance: str = "cosine",
    ) -> list[StoredItem]:
        """Items under `prefix` that pass `filter` (LangGraph's, `rules.matches`), ranked
        by the best similarity of their vectors to `query_vector` under `distance`
        (`rules.SIMILARITIES`; None: newest first), the
        page [offset, offset + limit). Items with no vector follow the ranked ones when
        the page is not full."""
        conditions = rules.check_filter(filter)
        limit = rules.check_page(limit, "limit")
        offset = rules.check_page(offset, "offset")
        entries = await self.under(
            prefix, vectors=query_vector is not None, omit_expired=omit_expired
        )
        kept = [e for e in entries if rules.matches(e.item.value, conditions)]
        if query_vector is None:
            return kept[offset : offset + limit]
        page = rules.rank(
            [e.vectors for e in kept], query_vector, limit=limit, offset=offset, distance=distance
        )
        return [
            replace(kept[index], item=replace(kept[index].item, score=score))
            for index, score in page
        ]

    async def namespaces(self, *, omit_expired: bool = False) -> list[tuple[str, ...]]:
        """Every namespace that holds an item, sorted (the listing filters them)."""
        found = self.collection.find(self.scope(), {"p": 1, "x": 1})
        now = self.clock()
        paths = set()
        async for document in found:
            expires = document.get("x")
            if omit_expired and expires is not None and as_utc(expires) <= now:
                continue
            paths.add(str(document["p"]))
        return sorted(rules.namespace_of(path) for path in paths)


def _expired(item: MemoryItem, now: datetime) -> bool:
    return item.expires_at is not None and item.expires_at <= now
