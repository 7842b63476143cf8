"""Beanie documents: the stored shape of tasks, their sealed pages, dialog-tree nodes,
offloaded payloads, agents' dialog aliases and tenant policies; their indexes; and the
typed query surface for an application's own reads (docs/data-model.md, "Reading with
Beanie").

The models own the schema and the indexes: `bind_documents` (run by `mindstore.connect`)
creates every index and binds the models to the store's database, so
``await TaskDoc.find(TaskDoc.tenant == "acme").to_list()`` works on both backends. This
module is imported at connect, not at ``import mindstore``: loading Beanie is a good part of
the package's import time, and code that only needs a collection's name takes it from
`mindstore.collection_names`.

The hot write paths do not go through Beanie's `save()`: repositories send atomic guarded
updates to the collections (docs/design.md). A task's message list is typed `list[dict]`
here on purpose: it holds messages in the lean stored form (defaults left out, unsafe keys
escaped, large values as payload markers), and validating 10,000 messages on every Beanie
read would dominate its cost; `TaskDoc.read_messages()` and `read_history()` decode them
into typed messages, as the task repository does.

Every index leads with `tenant`, so each index serves one tenant's queries and `tenant`
can be the shard key prefix (`{tenant: 1, _id: 1}`) on a sharded cluster. Beanie binds a
model class to one database per process: the one of the most recent `connect()`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pymongo
from beanie import Document, init_beanie
from beanie.operators import In
from pydantic import Field
from pymongo import IndexModel

from mindstore.clock import utcnow
from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    DIALOG_NODES,
    PAYLOADS,
    POLICIES,
    TASK_PAGES,
    TASKS,
)
from mindstore.header_codec import header_from_document
from mindstore.ids import task_id_of
from mindstore.memory.documents import MemoryItemDoc
from mindstore.model.dialog import FORK_MARKER
from mindstore.model.header import STORED_HEADER_FIELDS, TaskHeader, TaskState
from mindstore.model.lean_form import fill_task_ids
from mindstore.model.messages import AnyMessage
from mindstore.model.storage_form import unescape_keys
from mindstore.model.stored_read import parse_read, read_stored
from mindstore.paged_history import apply_pending
from mindstore.search.documents import (
    SearchEntryDoc,
    SearchPostingsDoc,
    SearchTaskDoc,
    SearchVectorDoc,
)

__all__ = [
    "DOCUMENT_MODELS",
    "RETIRED_INDEXES",
    "AgentDoc",
    "DialogNodeDoc",
    "PayloadDoc",
    "PolicyDoc",
    "TaskDoc",
    "TaskPageDoc",
    "bind_documents",
    "document_models",
    "register_documents",
    "retire_indexes",
]


def _index(name: str, *fields: str, partial: dict[str, Any] | None = None) -> IndexModel:
    """The index `name` on `fields` in order, each ascending or, written ``"-field"``,
    descending (the order of the reads it serves); `partial` covers only the documents
    that match it."""
    keys = [(f[1:], pymongo.DESCENDING) if f.startswith("-") else (f, pymongo.ASCENDING)
            for f in fields]  # fmt: skip
    options = {} if partial is None else {"partialFilterExpression": partial}
    return IndexModel(keys, name=name, **options)


TENANT_ID = _index("tenant_1__id_1", "tenant", "_id")
"""`(tenant, _id)`: a tenant's documents in `_id` order (backup and erase page by it) and
the shard key's index; named as MongoDB names the index `shardCollection` creates, so a
collection sharded before mindstore first connects already has it."""


class TaskDoc(Document):
    """One task (conversation thread): header fields plus the append-only message array.

    Read with Beanie (``TaskDoc.find(TaskDoc.tenant == "acme", ...)``), the plain fields
    are typed values as they are (`owner`, `title`, `state`, the times, `version`, `seq`,
    `size_bytes`). The others hold the stored form: the header's compact fields
    (`usage`, `scope_stack`, `open_tool_calls`; typed by `header()`), `metadata` with
    escaped keys (`caller_metadata()`), `messages`, the open page only, in the lean
    stored form (`read_messages()`, `read_history()`), and `content` (the task's own
    parts, as stored: escaped keys, markers of large values; `acme.tasks.load()`
    reads it typed).
    """

    id: str  # type: ignore[assignment]  # task_key(tenant, task id), stored as _id
    tenant: str
    owner: str | None = None
    title: str | None = None
    content: list[dict[str, Any]] = Field(default_factory=list)
    state: TaskState = TaskState.running
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    version: int = 0
    metadata: dict[str, Any] | None = None
    # header (see mindstore.model.header.TaskHeader)
    seq: int = 0
    size_bytes: int = 0
    scope_stack: list[dict[str, Any]] = Field(default_factory=list)
    open_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    root_config_index: int | None = None
    root_model_name: str | None = None
    root_entry_tools: list[str] = Field(default_factory=list)
    last_config_index: int | None = None
    last_model_name: str | None = None
    tail: dict[str, Any] | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    # paging (absent on a task that was never paged; docs/data-model.md "Paged messages")
    sealed: int = 0
    pages: int = 0
    sealed_bytes: int = 0
    id_filter_words: int = 0
    id_filter: list[int] | None = None  # sealed ids: a Bloom filter (model/id_filter.py)
    patched: int = 0
    pending: list[dict[str, Any]] = Field(default_factory=list)
    pending_at: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The open page: ``messages[i]`` is message ``sealed + i`` of the history."""

    @property
    def task_id(self) -> str:
        """The caller's task id (`id` is the stored key, ``"<tenant>/<task id>"``)."""
        return task_id_of(self.id)

    def header(self) -> TaskHeader:
        """The typed header (usage totals, open sub-tasks and tool calls, paging counters)
        from the compact stored fields; its tail from the last message of `messages`, as
        the task repository reads it."""
        fields: dict[str, Any] = {name: getattr(self, name) for name in STORED_HEADER_FIELDS}
        fields["messages"] = self.messages[-1:]
        return header_from_document(fields)

    def caller_metadata(self) -> dict[str, Any] | None:
        """`metadata` as the caller gave it (keys like ``$ref`` or ``a.b`` are stored
        escaped), as `acme.tasks.get()` returns it."""
        metadata = unescape_keys(self.metadata)
        return metadata if isinstance(metadata, dict) else None

    async def read_messages(self) -> list[AnyMessage]:
        """The open page (`messages`) as typed messages, as `acme.tasks` returns them:
        lean defaults filled back, escapes removed, large values fetched from `payloads`.
        On a paged task these are messages ``sealed ..`` only: see `read_history`."""
        return await _decode(self.messages, self.tenant, self.task_id)

    async def read_history(self) -> list[AnyMessage]:
        """Every message of the task, typed: its visible sealed pages (`TaskPageDoc`
        numbered below `pages`, with the task's pending changes applied) then the open
        page (docs/data-model.md, "Paged messages"). For a long task prefer the
        repository's range reads (`acme.tasks.messages(task, start, limit)`), which read
        only the pages a range needs."""
        stored: list[dict[str, Any]] = []
        if self.pages > 0:
            pages = (
                await TaskPageDoc.find(
                    TaskPageDoc.tenant == self.tenant,
                    TaskPageDoc.task == self.id,
                    TaskPageDoc.page < self.pages,
                )
                .sort("page")
                .to_list()
            )
            pending = {"pending": self.pending}
            for page in pages:
                stored.extend(apply_pending(page.messages, page.start, pending)[0])
        stored.extend(self.messages)
        return await _decode(stored, self.tenant, self.task_id)

    class Settings:
        name = TASKS
        use_state_management = False
        validate_on_save = False
        indexes = [
            _index("tenant_owner_updated", "tenant", "owner", "-updated_at", "-_id"),
            _index("tenant_state_updated_id", "tenant", "state", "-updated_at", "-_id"),
            _index("tenant_updated", "tenant", "-updated_at", "-_id"),
            _index("tenant_created", "tenant", "created_at"),
            TENANT_ID,
            _index("tenant_owner_id", "tenant", "owner", "_id"),
            _index("tenant_paged", "tenant", "pages", partial={"pages": {"$gt": 0}}),
            _index(
                "tenant_forks",
                "tenant",
                "owner",
                partial={f"metadata.{FORK_MARKER}": {"$exists": True}},
            ),
            _index(
                "tenant_integration_thread",
                "tenant",
                "metadata.integration",
                "owner",
                "metadata.thread_id",
                "_id",
                partial={"metadata.integration": {"$exists": True}},
            ),
        ]


class TaskPageDoc(Document):
    """A sealed page of a task's history: messages ``[start, end)`` in the same
    stored form as the task document's array (docs/data-model.md, "Paged messages").

    Written once by a seal, before the task document's `pages` mark counts it (a page at or
    past the mark is a half-done seal, invisible to readers); later changes to its messages
    are folded in from the task's `pending` list, and `version` (monotone) is the task
    version its content reflects. So a page read alone may miss changes still pending,
    and a page numbered at or past its task's `pages` is not part of the history:
    `TaskDoc.read_history()` reads pages the way the store does."""

    id: str  # type: ignore[assignment]  # page_key(task key, page)
    tenant: str
    task: str  # the task's stored key (its _id)
    page: int
    start: int
    end: int
    size_bytes: int = 0
    version: int = 0
    born: datetime | None = None  # the task's created_at: pages of a deleted namesake differ
    messages: list[dict[str, Any]] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow)

    class Settings:
        name = TASK_PAGES
        use_state_management = False
        validate_on_save = False
        indexes = [
            _index("tenant_task_page", "tenant", "task", "page", "start", "end"),
            _index("tenant_task_message", "tenant", "task", "messages.id"),
            _index("tenant_task_call", "tenant", "task", "messages.content.tool_call_id", "page"),
            TENANT_ID,
        ]


class DialogNodeDoc(Document):
    """A dialog's place in its fork tree, linked to its task by id (`_id` = the task's key,
    `task_key(tenant, task id)`; `parent_id`, `root_id` and `ancestors` hold plain task ids)."""

    id: str  # type: ignore[assignment]
    tenant: str
    owner: str | None = None
    parent_id: str | None = None
    root_id: str
    ancestors: list[str] = Field(default_factory=list)
    depth: int = 0
    split_point: int | None = None
    first_k: int | None = None
    last_n: int | None = None
    at_message_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)

    class Settings:
        name = DIALOG_NODES
        use_state_management = False
        indexes = [
            _index("tenant_parent_id", "tenant", "parent_id", "_id"),
            _index("tenant_ancestors", "tenant", "ancestors"),
            _index("tenant_root", "tenant", "root_id"),
            _index("tenant_owner_id", "tenant", "owner", "_id"),
            TENANT_ID,
        ]


class PayloadDoc(Document):
    """A large value moved out of a message so the task document stays far from 16 MiB."""

    id: str  # type: ignore[assignment]
    tenant: str
    task_id: str
    message_id: str
    path: str
    sha256: str
    size: int
    data: Any = None
    created_at: datetime = Field(default_factory=utcnow)

    class Settings:
        name = PAYLOADS
        use_state_management = False
        indexes = [
            _index("tenant_task_id", "tenant", "task_id", "_id"),
            TENANT_ID,
        ]


class AgentDoc(Document):
    """An agent's dialog aliases (`_id` = "<tenant>/<agent name>"): a few small fields,
    changed only by version-guarded updates (repositories/agents.py)."""

    id: str  # type: ignore[assignment]
    tenant: str
    owner: str  # the agent's name: the owner of every dialog it opens
    dialogs: list[dict[str, Any]] = Field(default_factory=list)
    active_alias: str | None = None
    version: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    class Settings:
        name = AGENTS
        use_state_management = False
        indexes = [
            _index("tenant_owner_id", "tenant", "owner", "_id"),
            _index("tenant_updated", "tenant", "updated_at"),
            TENANT_ID,
        ]


class PolicyDoc(Document):
    """A tenant's stored policies (`_id` = the tenant): retention, applied by
    `mindstore erase --apply-policy` (docs/operations.md)."""

    id: str  # type: ignore[assignment]
    tenant: str
    retention: dict[str, Any] | None = None

    class Settings:
        name = POLICIES
        use_state_management = False
        indexes = [TENANT_ID]


class DataKeyDoc(Document):
    """A tenant's wrapped data key (`_id` = `tenant/v<version>`), a shred's tombstone
    (`tenant/shredded`) or a re-encryption sweep's cursor (`tenant/sweep`), written by the
    keyring (`mindstore.crypto.keyring`, docs/encryption.md). Read by `_id` range."""

    id: str  # type: ignore[assignment]
    tenant: str
    kind: str
    version: int | None = None
    wrapped: bytes | None = None
    kek: str | None = None
    sealed_only: bool = False
    master_key_id: str | None = None

    class Settings:
        name = DATA_KEYS
        use_state_management = False


async def _decode(stored: list[dict[str, Any]], tenant: str, task_id: str) -> list[AnyMessage]:
    """Stored message documents of one task -> messages as the caller wrote them: keys and
    strings unescaped, payload markers resolved against this task's own payloads (tenant
    and task id in the query, as the task repository does), lean defaults and task ids
    filled back."""
    read = read_stored(stored, strings=True, copy=True)
    if read.markers:
        found = await PayloadDoc.find(
            In(PayloadDoc.id, sorted(read.markers)),
            PayloadDoc.tenant == tenant,
            PayloadDoc.task_id == task_id,
        ).to_list()
        read.resolve({payload.id: payload.data for payload in found})
    messages = parse_read(read)
    fill_task_ids(messages, task_id)
    return messages


DOCUMENT_MODELS: list[type[Document]] = [
    TaskDoc,
    TaskPageDoc,
    DialogNodeDoc,
    PayloadDoc,
    AgentDoc,
    PolicyDoc,
    DataKeyDoc,
    MemoryItemDoc,
    SearchPostingsDoc,
    SearchEntryDoc,
    SearchTaskDoc,
    SearchVectorDoc,
]
"""The core's document models: the collections every store has."""

_REGISTERED: list[type[Document]] = []


def register_documents(*models: type[Document]) -> None:
    """Add document models of an integration (its module calls this when imported), so
    that `bind_documents` creates their indexes too. The core never imports an integration:
    an integration brings its own documents (`integrations/langgraph_documents.py`)."""
    for model in models:
        if model not in DOCUMENT_MODELS and model not in _REGISTERED:
            _REGISTERED.append(model)


def document_models() -> list[type[Document]]:
    """The core's models and every registered one, in that order."""
    return [*DOCUMENT_MODELS, *_REGISTERED]


RETIRED_INDEXES: dict[str, dict[str, tuple[tuple[str, int], ...]]] = {
    TASKS: {"tenant_state_updated": (("tenant", 1), ("state", 1), ("updated_at", -1))},
    TASK_PAGES: {"tenant_task_start": (("tenant", 1), ("task", 1), ("start", 1))},
    DIALOG_NODES: {"tenant_parent": (("tenant", 1), ("parent_id", 1))},
    PAYLOADS: {"tenant_task": (("tenant", 1), ("task_id", 1))},
    AGENTS: {"tenant_owner": (("tenant", 1), ("owner", 1))},
}
"""Indexes earlier versions created that a declared one replaces (collection -> name ->
keys): `tenant_state_updated` by `tenant_state_updated_id`, `tenant_task_start` by
`tenant_task_page`, `tenant_parent` by `tenant_parent_id`, `tenant_task` by
`tenant_task_id`, `tenant_owner` by `tenant_owner_id`; every query they served, the new
one serves. `bind_documents` drops them once the new ones exist, so an existing database
does not keep paying for both on every write."""


async def bind_documents(database: Any) -> None:
    """Beanie's init over `database` (an `AsyncDatabase` or the embedded backend's): the
    indexes of every document model are created (an existing one is left as it is), the
    ones they replace are dropped (`RETIRED_INDEXES`), and `TaskDoc.find(...)` and the
    other models' queries go to this database. Idempotent: on a database that has them, it
    creates and drops nothing."""
    await init_beanie(database=database, document_models=document_models())
    await retire_indexes(database)


async def retire_indexes(database: Any) -> list[tuple[str, str]]:
    """Drop the `RETIRED_INDEXES` present in `database` with their old keys (an index of
    that name and other keys is someone else's, and is left alone); return (collection,
    name) of each dropped. After the declared indexes are created, so every query keeps
    an index throughout."""
    dropped: list[tuple[str, str]] = []
    for collection, retired in RETIRED_INDEXES.items():
        present = await database[collection].index_information()
        for name, keys in retired.items():
            found = present.get(name)
            if found is None or _keys(found.get("key")) != keys:
                continue
            await database[collection].drop_index(name)
            dropped.append((collection, name))
    return dropped


def _keys(key: Any) -> tuple[tuple[str, int], ...] | None:
    """An index's key as listed by the server, ``((field, direction), ...)``."""
    pairs = key.items() if isinstance(key, dict) else key
    try:
        return tuple((str(field), int(direction)) for field, direction in pairs)
    except (TypeError, ValueError):
        return None  # a text, hashed or otherwise special index: not one of ours
