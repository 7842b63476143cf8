"""Beanie documents: the stored shape of tasks, dialog-tree nodes, offloaded payloads and
agents' dialog aliases.

Beanie owns the schema and the indexes. The hot write paths do not go through Beanie's
`save()`: repositories send atomic operators to `TaskDoc.get_pymongo_collection()`. The
message list is typed `list[dict]` here on purpose: validating 10,000 messages on every
Beanie read would dominate the cost of a read, so repositories parse exactly the messages
they return, with the role-discriminated adapter.

Every index leads with `tenant`, so each index serves one tenant's queries and `tenant`
can be the shard key prefix (`{tenant: 1, _id: 1}`) on a sharded cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pymongo
from beanie import Document
from pydantic import Field
from pymongo import IndexModel

from mindstore.ids import task_key
from mindstore.model.dialog import DialogNode
from mindstore.model.header import TaskHeader, header_from_stored, stored_header, tail_of
from mindstore.model.messages import UnknownMessage
from mindstore.model.planner import stored_doc
from mindstore.model.task import Task
from mindstore.payloads import read_value

TASKS = "tasks"
DIALOG_NODES = "dialog_nodes"
PAYLOADS = "payloads"
AGENTS = "agents"
LANGGRAPH_CHECKPOINTS = "langgraph_checkpoints"
LANGGRAPH_WRITES = "langgraph_writes"
LANGGRAPH_BLOBS = "langgraph_blobs"
POLICIES = "policies"
TASK_PAGES = "task_pages"


def utcnow() -> datetime:
    """Millisecond precision, because that is what BSON dates keep."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class TaskDoc(Document):
    """One task (conversation thread): header fields plus the append-only message array."""

    id: str  # type: ignore[assignment]  # task_key(tenant, task id), stored as _id
    tenant: str
    owner: str | None = None
    title: str | None = None
    content: list[dict[str, Any]] = Field(default_factory=list)
    state: str = "running"
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
    pending: list[dict[str, Any]] = Field(default_factory=list)
    pending_at: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)

    class Settings:
        name = TASKS
        use_state_management = False
        validate_on_save = False
        indexes = [
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("owner", pymongo.ASCENDING),
                    ("updated_at", pymongo.DESCENDING),
                    ("_id", pymongo.DESCENDING),
                ],
                name="tenant_owner_updated",
            ),
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("state", pymongo.ASCENDING),
                    ("updated_at", pymongo.DESCENDING),
                ],
                name="tenant_state_updated",
            ),
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("updated_at", pymongo.DESCENDING),
                    ("_id", pymongo.DESCENDING),
                ],
                name="tenant_updated",
            ),
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("created_at", pymongo.ASCENDING)],
                name="tenant_created",
            ),
        ]


class TaskPageDoc(Document):
    """A sealed page of a task's history: messages ``[start, end)`` in the same
    stored form as the task document's array (docs/data-model.md, "Paged messages").

    Written once by a seal, before the task document's `pages` mark counts it (a page at or
    past the mark is a half-done seal, invisible to readers); later changes to its messages
    are folded in from the task's `pending` list, and `version` (monotone) is the task
    version its content reflects."""

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
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("task", pymongo.ASCENDING),
                    ("start", pymongo.ASCENDING),
                ],
                name="tenant_task_start",
            ),
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("task", pymongo.ASCENDING),
                    ("messages.id", pymongo.ASCENDING),
                ],
                name="tenant_task_message",
            ),
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
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("parent_id", pymongo.ASCENDING)],
                name="tenant_parent",
            ),
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("ancestors", pymongo.ASCENDING)],
                name="tenant_ancestors",
            ),
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("root_id", pymongo.ASCENDING)], name="tenant_root"
            ),
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
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("task_id", pymongo.ASCENDING)], name="tenant_task"
            ),
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
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("owner", pymongo.ASCENDING)], name="tenant_owner"
            ),
        ]


class LangGraphCheckpointDoc(Document):
    """One LangGraph checkpoint (`mindstore.integrations.langgraph`), without its channel
    values: `_id` = "<tenant>/<thread>/<namespace>/<checkpoint id>" (see `langgraph_keys`);
    the `messages` channel is a count of a task's messages (`ms`), other channels are blobs."""

    id: str  # type: ignore[assignment]
    tenant: str
    o: str | None = None  # owner, on an owner-scoped view
    th: str | None = None  # the thread id, when the key holds a hash of it
    ns: str | None = None  # the namespace, when not the root
    p: str | None = None  # parent checkpoint id
    c: list[Any] = Field(default_factory=list)  # [serde type, bytes] of the checkpoint
    md: dict[str, Any] | None = None  # metadata (filterable), or
    mdb: list[Any] | None = None  # [serde type, bytes] when not storable as a document
    ms: dict[str, Any] | None = None  # messages: task, count, fingerprint chain
    b: dict[str, str] | None = None  # channel -> the checkpoint whose blob holds its value
    iv: dict[str, Any] | None = None  # small channel values, inline

    class Settings:
        name = LANGGRAPH_CHECKPOINTS
        use_state_management = False
        indexes = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_id"
            ),
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("md.run_id", pymongo.ASCENDING)], name="tenant_run"
            ),
        ]


class LangGraphWriteDoc(Document):
    """One task's pending writes on one checkpoint: `_id` = "<checkpoint key>/<task id>",
    `w` = [[index, channel, serde type, bytes], ...]."""

    id: str  # type: ignore[assignment]
    tenant: str
    p: str | None = None  # task path
    w: list[Any] = Field(default_factory=list)
    v: int | None = None  # change counter, set by the first change

    class Settings:
        name = LANGGRAPH_WRITES
        use_state_management = False
        indexes = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_id"
            ),
        ]


class LangGraphBlobDoc(Document):
    """One version of one channel's value, written once and shared by every checkpoint
    holding that version.

    `_id` = "<tenant>/<thread>/<namespace>/<writer checkpoint id>~<channel>".
    """

    id: str  # type: ignore[assignment]
    tenant: str
    t: str = ""  # serde type
    b: bytes = b""

    class Settings:
        name = LANGGRAPH_BLOBS
        use_state_management = False
        indexes = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_id"
            ),
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


DOCUMENT_MODELS: list[type[Document]] = [
    TaskDoc,
    TaskPageDoc,
    DialogNodeDoc,
    PayloadDoc,
    AgentDoc,
    PolicyDoc,
    LangGraphCheckpointDoc,
    LangGraphWriteDoc,
    LangGraphBlobDoc,
]


def header_to_fields(header: TaskHeader) -> dict[str, Any]:
    """The header as top-level task document fields (`stored_header`: no tail, compact)."""
    return stored_header(header)


TAIL_KEYS = ("id", "role", "started_ts", "finished_ts")
"""What the header's tail takes from the last stored message."""


def header_from_document(document: dict[str, Any]) -> TaskHeader:
    """The header of a task document read with (at least) its last message (`$slice: -1`);
    read without messages (a listing), its tail is None.

    The tail comes from the last message's stored fields, read as an unknown message reads
    them (escapes removed), so a malformed message elsewhere never fails a header read."""
    messages = document.get("messages")
    seq = document.get("seq", 0)
    tail = None
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        view = UnknownMessage.model_validate(
            {k: read_value(last[k], {}) for k in TAIL_KEYS if k in last}
        )
        if isinstance(seq, int) and seq > 0:
            tail = tail_of(seq - 1, view)
    return header_from_stored(document, tail)


def node_document(
    node: DialogNode, tenant: str, created_at: datetime | None = None
) -> dict[str, Any]:
    """The stored document of a dialog-tree node (forks, imports, generated workloads)."""
    return {
        "_id": task_key(tenant, node.dialog_id),
        "tenant": tenant,
        **node.model_dump(exclude={"dialog_id", "created_at"}),
        "created_at": created_at or utcnow(),
    }


def task_document(
    task: Task,
    tenant: str,
    owner: str | None = None,
    title: str | None = None,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The stored document of an in-memory task (imports, restores, test fixtures)."""
    created = created_at or utcnow()
    return {
        "_id": task_key(tenant, task.id),
        "tenant": tenant,
        "owner": owner,
        "title": title,
        "content": [part.to_dict() for part in task.content],
        "state": task.state if isinstance(task.state, str) else task.state.value,
        "created_at": created,
        "updated_at": updated_at or created,
        "version": 0,
        "metadata": metadata,
        **header_to_fields(task.header),
        "messages": [stored_doc(message, task.id) for message in task.messages],
    }
