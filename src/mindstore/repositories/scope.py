"""One tenant's view of the tasks collection: scope, keys, locks, finds and the header cache.

Scope is applied here, once, for every read and write: the stored key is
``task_key(tenant, task_id)`` and, on an owner-scoped view, every filter also names the
owner. Documents written before per-tenant keys (``_id`` = the bare task id) are adopted
the first time a read misses them (`adopt_legacy`).

A header read brings the header fields and, when the header's tail is needed (a write,
`tasks.header()`), the last message, from which the tail is derived
(`documents.header_from_document`). Only inclusion projections: the embedded backend
copies the whole document for an exclusion one.

`TaskScope` is the bottom of the task repository's composition (`port.TaskPort` holds it):
the collections are its attributes, read at each call, so a test can swap one for a proxy
(`tests/interleaving.py`) and every reader and writer sees the swap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pymongo.errors import DuplicateKeyError

from mindstore.collection_names import DIALOG_NODES, PAYLOADS, TASK_PAGES, TASKS
from mindstore.crypto.aead import holds_sealed
from mindstore.crypto.fields import ENCRYPTED, OWN_FIELDS
from mindstore.crypto.keyring import is_encrypted
from mindstore.errors import KeyringRequired, NotFound
from mindstore.header_codec import header_from_document
from mindstore.ids import check_key, legacy_key, task_key
from mindstore.model.header import STORED_HEADER_FIELDS, TaskHeader
from mindstore.model.paging import DEFAULT_POLICY, PagePolicy
from mindstore.model.storage_form import bson_size
from mindstore.operations import InDoubt, Resilience, RetryPolicy
from mindstore.payloads import Offloader
from mindstore.repositories.feed import Notifier
from mindstore.repositories.header_cache import CachedHeader, HeaderCache
from mindstore.repositories.locks import TaskLocks
from mindstore.validation import check_owner

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher

logger = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
PLAN_FIELDS: tuple[str, ...] = (
    "version", "updated_at", *STORED_HEADER_FIELDS, "tail", "pending", "pending_at",
    ENCRYPTED,
)  # fmt: skip
"""What a write plans from (with the last message); `tail` is an earlier version's field,
`pending` the changes to sealed messages not yet folded into their pages, `encrypted`
whether a store without a keyring must refuse to write (`require_keyring`)."""
READ_FIELDS: tuple[str, ...] = (
    "_id", "tenant", "owner", "title", "state", "created_at", "updated_at", "version",
    "metadata", *STORED_HEADER_FIELDS, ENCRYPTED,
)  # fmt: skip


class TaskScope:
    """Scope, collections, locks, finds and the header cache of one tenant's tasks (one
    owner's, on an owner-scoped view): what every reader and writer of a task shares."""

    cipher: TenantCipher | None = None
    """The tenant's encryption (`mindstore.crypto`), set by the store when it has a keyring."""

    def __init__(
        self,
        database: Any,
        tenant: str,
        *,
        owner: str | None = None,
        locks: TaskLocks | None = None,
        retry: RetryPolicy | None = None,
        offload_threshold: int = 256 * 1024,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        headers: HeaderCache | None = None,
        notifier: Notifier | None = None,
        page_policy: PagePolicy | None = DEFAULT_POLICY,
        in_doubt: InDoubt | None = None,
    ) -> None:
        self.tenant = check_key(tenant, "tenant")
        self.owner = check_owner(owner)
        self.database = database
        self.tasks = database[TASKS]
        self.payloads = database[PAYLOADS]
        self.pages = database[TASK_PAGES]
        self.nodes = database[DIALOG_NODES]
        self.locks = locks if locks is not None else TaskLocks()
        self.retry = retry or RetryPolicy()
        self.in_doubt = in_doubt if in_doubt is not None else InDoubt()
        """Calls whose write may have landed, for their retries (`mindstore.operations`)."""
        self.offload_threshold = offload_threshold
        self.max_document_bytes = max_document_bytes
        self.headers = headers if headers is not None else HeaderCache()
        self.notifier = notifier if notifier is not None else Notifier()
        self.page_policy = page_policy
        """How large sealed pages are (`model.paging`); None: never seal (every message
        stays in the task document, which then stops at 16 MiB)."""

    @property
    def resilience(self) -> Resilience:
        """This view's retry policy and its store's ledger of calls in doubt."""
        return Resilience(self.retry, self.in_doubt)

    def cached(self, task_id: str) -> CachedHeader | None:
        """The state this process last wrote to the task, if the header cache still has it."""
        return self.headers.get((self.tenant, task_id))

    # ------------------------------------------------------------------ scope
    def lock(self, task_id: str) -> asyncio.Lock:
        """The task's write queue in the running loop (`TaskLocks`: one lock per loop)."""
        return self.locks.lock((self.tenant, task_id))

    def key(self, task_id: Any) -> str:
        """The stored `_id` of one of this tenant's tasks (checks the id first)."""
        return task_key(self.tenant, check_key(task_id, "task id"))

    def filter(self, task_id: Any) -> dict[str, Any]:
        """The filter of one task in this view: its key, the tenant and (owner-scoped) the
        owner, so no query can reach outside the view."""
        query: dict[str, Any] = {"_id": self.key(task_id), "tenant": self.tenant}
        if self.owner is not None:
            query["owner"] = self.owner
        return query

    def not_found(self, task_id: str) -> NotFound:
        """The error for a task outside this view (missing, or another tenant's or owner's:
        the two are not told apart)."""
        return NotFound(f"no task {task_id!r} for tenant {self.tenant!r}")

    def offloader(self, task_id: str) -> Offloader:
        """A fresh offloader for one write (values past the threshold go to payloads;
        sealed first when the tenant is encrypted)."""
        if self.cipher is not None:
            return self.cipher.offloader(task_id, self.offload_threshold)
        return Offloader(task_id, self.offload_threshold, tenant=self.tenant)

    async def adopt_legacy(self, task_id: str) -> bool:
        """Re-key a task stored before per-tenant ids (``_id`` = bare id) to its tenant key.

        Copy first, then drop the old document, so a crash in between leaves both (the
        next adoption, or `mindstore migrate`, finishes) and never neither. Its dialog
        node moves the same way. True if this tenant had such a task.
        """
        old = {"_id": legacy_key(task_id), "tenant": self.tenant}
        moved = False
        for collection in (self.tasks, self.nodes):
            document = await collection.find_one(old)
            if document is None:
                continue
            document["_id"] = self.key(task_id)
            with contextlib.suppress(DuplicateKeyError):  # adopted by a concurrent reader
                await collection.insert_one(document)
            await collection.delete_one(old)
            moved = moved or collection is self.tasks
        if moved:
            logger.info("adopted legacy task %r of tenant %r", task_id, self.tenant)
        return moved

    async def find_task(
        self, task_id: str, projection: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One task document (projected); NotFound outside this view's scope."""
        query = self.filter(task_id)
        document: dict[str, Any] | None = await self.tasks.find_one(query, projection)
        if document is None and await self.adopt_legacy(task_id):
            document = await self.tasks.find_one(query, projection)
        if document is None:
            raise self.not_found(task_id)
        return document

    def require_keyring(self, documents: Iterable[Any], action: str = "read") -> None:
        """Without a keyring: `KeyringRequired` if any of `documents` holds a ciphertext
        (or is a task marked encrypted), so such a store neither hands ciphertexts to a
        caller nor writes content in the clear into an encrypted task. A store with a
        keyring passes."""
        if self.cipher is not None:
            return
        for document in documents:
            if (isinstance(document, dict) and document.get(ENCRYPTED) is True) or holds_sealed(
                document
            ):
                raise KeyringRequired(self.tenant, action)

    def require_keyring_to_read(self, task: dict[str, Any]) -> None:
        """Without a keyring: `KeyringRequired` if the task document a read fetched (its
        mark projected: `pages.PAGING_FIELDS`, `READ_FIELDS`) is marked encrypted. Its
        messages may still be in the clear (stored before the tenant was encrypted, not
        swept yet, its keys shredded since): a store without a keyring reads none of them,
        as a store with one could not. No round trip: the mark comes with the read."""
        if self.cipher is None and task.get(ENCRYPTED) is True:
            raise KeyringRequired(self.tenant, "read")

    async def require_unencrypted_tenant(self) -> None:
        """Without a keyring: `KeyringRequired` if the tenant has data keys (it is
        encrypted): a new task would hold its content in the clear (one read, on create)."""
        if self.cipher is None and await is_encrypted(self.database, self.tenant):
            raise KeyringRequired(self.tenant, "write to")

    async def opened_task(self, document: dict[str, Any], task_id: str) -> dict[str, Any]:
        """A task document with its title, metadata and content opened (`mindstore.crypto`;
        without a keyring the same document, or `KeyringRequired` if it holds sealed ones)."""
        if self.cipher is None:
            own = (*OWN_FIELDS, ENCRYPTED)
            self.require_keyring([{name: document.get(name) for name in own}])
            return document
        await self.cipher.ready()
        return self.cipher.open_task(document, task_id)

    async def aggregate_task(self, task_id: str, build: Callable[[dict[str, Any]], list[Any]],
                              length: int | None = 1) -> list[dict[str, Any]]:  # fmt: skip
        """Rows of a pipeline that starts by matching this task (filter from `_filter`).

        No rows means no such task in scope (the pipelines here always yield a row for an
        existing task), after adopting a legacy document if there is one.
        """
        query = self.filter(task_id)
        rows: list[dict[str, Any]] = await (await self.tasks.aggregate(build(query))).to_list(
            length=length
        )
        if not rows and await self.adopt_legacy(task_id):
            rows = await (await self.tasks.aggregate(build(query))).to_list(length=length)
        if not rows:
            raise self.not_found(task_id)
        return rows

    async def header_document(
        self, task_id: str, *, tail: bool = False, write: bool = False
    ) -> dict[str, Any]:
        """The task's fields without its messages; with `tail` (always for a `write`) also
        the last message, from which the header's tail is derived.

        For a write, only what a plan reads (`PLAN_FIELDS`), including a `tail` field stored
        by an earlier version, so the write can drop it. Inclusion projections only: the
        embedded backend copies the whole document for an exclusion one.
        """
        projection: dict[str, Any] = dict.fromkeys(PLAN_FIELDS if write else READ_FIELDS, 1)
        if tail or write:
            projection["messages"] = {"$slice": [-1, 1]}
        return await self.find_task(task_id, projection)

    async def scope_header(self, task_id: str) -> TaskHeader:
        """The header without its tail (None), for reads that need the level, the open
        calls or the configuration only: the last message, however large, stays on the
        server. Refused without a keyring for a task marked encrypted (the reads built on
        it hand out its messages)."""
        document = await self.header_document(task_id)
        self.require_keyring_to_read(document)
        return header_from_document(document)

    def remember(
        self,
        task_id: str,
        version: int,
        updated_at: datetime,
        header: TaskHeader,
        tail: dict[str, Any] | None = None,
    ) -> None:
        """Cache the state a committed write left (the next verb plans from it, no read)."""
        size = bson_size(tail) if tail is not None else 0
        entry = CachedHeader(version, updated_at, header, tail, size)
        self.headers.put((self.tenant, task_id), entry)

    def forget(self, task_id: str) -> None:
        """Drop the cached state: it may be stale (a failed or unknown write, a re-key)."""
        self.headers.forget((self.tenant, task_id))
