"""Every collection mindstore writes, and how each is keyed: the one registry that backup,
verify, restore, erase, retention and redaction follow (docs/backup.md, "Collections").

A document belongs to a **unit** that the lifecycle handles whole:

* ``task``: a task (conversation) and what follows it, its sealed pages, its dialog-tree
  node and its offloaded payloads;
* ``thread``: a LangGraph thread of the saver (`mindstore.integrations.langgraph`), its
  checkpoints, pending writes and channel blobs, all keyed ``"<tenant>/<thread>/..."``;
  its messages live in tasks (unit ``task``);
* ``agent``: one agent's dialog aliases (the dialogs are tasks);
* ``tenant``: a tenant's settings (its retention policy) and its wrapped data keys;
* ``memory``: one long-term memory item (`mindstore.memory`, the LangGraph store's).

For each collection the registry says which field holds the tenant (always ``tenant``),
how a document's owner is known (a field, or derived from its task or thread), how it
names its task or thread, what a backup since a time selects it by, and the backup
format version that first holds it. A test fails when mindstore writes a collection this
registry does not list (tests/conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    DIALOG_NODES,
    LANGGRAPH_BLOBS,
    LANGGRAPH_CHECKPOINTS,
    LANGGRAPH_WRITES,
    MEMORY_ITEMS,
    PAYLOADS,
    POLICIES,
    SEARCH_ENTRIES,
    SEARCH_POSTINGS,
    SEARCH_TASKS,
    SEARCH_VECTORS,
    TASK_PAGES,
    TASKS,
)

__all__ = [
    "BEYOND_TASKS",
    "COLLECTIONS",
    "DATA_KEYS",
    "DERIVED",
    "KEY_STORE",
    "REGISTRY",
    "TENANT_FIELD",
    "Collection",
    "Unit",
    "first_holding",
]

TENANT_FIELD = "tenant"
"""Every document of every collection names its tenant in this field."""


class Unit(StrEnum):
    """What a document belongs to, and goes with (see the module doc)."""

    TASK = "task"
    THREAD = "thread"
    AGENT = "agent"
    TENANT = "tenant"
    MEMORY = "memory"


@dataclass(frozen=True)
class Collection:
    """One collection of the registry."""

    name: str
    unit: Unit
    owner: str
    """How a document's owner is known: ``"field <name>"``, or how it is derived."""
    key: str
    """How a document names its unit (its task, thread or agent)."""
    since: str
    """What an incremental backup (`since`) and retention select it by."""
    format_version: int
    """The first backup format that holds it (docs/backup.md, "Versions")."""
    owner_field: str | None = None
    """The field holding the owner, when there is one."""
    redaction: str = ""
    """What redaction does to it (docs/lifecycle.md)."""

    @property
    def file(self) -> str:
        """Its file in a backup."""
        return f"{self.name}.jsonl.gz"


REGISTRY: tuple[Collection, ...] = (
    Collection(
        TASK_PAGES, Unit.TASK, owner="its task's (`task`)", key="`task` = the task's key",
        since="its task's `updated_at`", format_version=2,
        redaction="a redacted message in a sealed page is patched in place, like one in "
        "the task document",
    ),
    Collection(
        TASKS, Unit.TASK, owner="field `owner`", key="`_id` = `tenant/task id`",
        since="`updated_at`", format_version=1, owner_field="owner",
        redaction="`tasks.redact` replaces a message's content by tombstones",
    ),
    Collection(
        DIALOG_NODES, Unit.TASK, owner="field `owner` (and its task's)",
        key="`_id` = its task's key", since="its task's `updated_at`", format_version=1,
        owner_field="owner", redaction="holds no content",
    ),
    Collection(
        PAYLOADS, Unit.TASK, owner="its task's (`task_id`)", key="`task_id` = its task",
        since="its task's `updated_at`", format_version=1,
        redaction="deleted when the content that referenced it is redacted",
    ),
    Collection(
        LANGGRAPH_CHECKPOINTS, Unit.THREAD,
        owner="field `o` (set by an owner-scoped saver; none: the tenant's)",
        key="`_id` = `tenant/<thread>/<namespace>/<checkpoint id>`",
        since="its thread's last activity", format_version=3, owner_field="o",
        redaction="the `messages` channel is tasks (redacted there); metadata and small "
        "values are erased with the thread, not redacted",
    ),
    Collection(
        LANGGRAPH_WRITES, Unit.THREAD, owner="its thread's (the checkpoints' `o`)",
        key="`_id` = `<checkpoint key>/<task>`", since="its thread's last activity",
        format_version=3,
        redaction="compacted message writes read the task (redacted there); other values "
        "are erased with the thread, not redacted",
    ),
    Collection(
        LANGGRAPH_BLOBS, Unit.THREAD, owner="its thread's (the checkpoints' `o`)",
        key="`_id` = `<tenant>/<thread>/<namespace>/<checkpoint id>~<channel>`",
        since="its thread's last activity", format_version=3,
        redaction="serialized channel values, opaque to mindstore: erased with the thread, "
        "not redacted",
    ),
    Collection(
        AGENTS, Unit.AGENT, owner="field `owner` (the agent's name)",
        key="`_id` = `tenant/<agent name>`; `dialogs` name its tasks",
        since="`updated_at`", format_version=3, owner_field="owner",
        redaction="holds aliases and dialog ids, no content",
    ),
    Collection(
        MEMORY_ITEMS, Unit.MEMORY,
        owner="field `owner` (an owner-scoped store's, or the namespace label it names as the "
        "owner's; none: the tenant's)",
        key="`_id` = `<tenant>/<hash of namespace and key>`", since="`updated_at` (its last write)",
        format_version=5, owner_field="owner",
        redaction="a JSON value the application wrote (sealed under a keyring): erased with "
        "its owner or tenant, expired by its TTL or retention, not redacted",
    ),
    Collection(
        POLICIES, Unit.TENANT, owner="none: the tenant's setting", key="`_id` = the tenant",
        since="`retention.updated_at`", format_version=3, redaction="holds no content",
    ),
    Collection(
        DATA_KEYS, Unit.TENANT, owner="none: the tenant's keys",
        key="`_id` = `tenant/v<version>` (the tombstone of a shred: `tenant/shredded`)",
        since="always whole: every backup holds the keys of its tenants", format_version=4,
        redaction="wrapped data keys (`mindstore.crypto`): those wrapped by the tenant's key "
        "in a key provider travel with every copy, so destroying that key (a shred) reaches "
        "every backup; those wrapped by a shared master key are never backed up",
    ),
)  # fmt: skip
"""Every collection, in the order a backup holds them and verify reads them: sealed pages
before their tasks, tasks before what refers to them, threads, agents and settings last."""

KEY_STORE = REGISTRY[-1]
"""The keyring's wrapped data keys (format 4 of a backup holds the tenant-wrapped ones)."""

DERIVED: tuple[Collection, ...] = (
    Collection(
        SEARCH_POSTINGS, Unit.TASK, owner="its task's (field `o` of the task's chunks)",
        key="`_id` = `<tenant>/<term>/<block>`; each group names its task by ordinal "
        "(`t`, the `r` of the task's mark and chunks)",
        since="never backed up: rebuilt from the tasks", format_version=0,
        redaction="a redacted message's postings are pulled with the redaction; deletes, "
        "erase and retention pull their tasks' postings (docs/search.md)",
    ),
    Collection(
        SEARCH_ENTRIES, Unit.TASK, owner="field `o` (its task's)",
        key="`task` = the task id; `_id` = `<task key>/<first index>`: one chunk of a "
        "task's indexed messages", since="never backed up: rebuilt from the tasks",
        format_version=0, owner_field="o",
        redaction="a redaction deletes every chunk of its task (the message's text is "
        "packed with its neighbours'; the next search packs the others anew); deletes, "
        "erase and retention remove their tasks' chunks; a shred makes them unreadable "
        "and the next search deletes them (docs/search.md)",
    ),
    Collection(
        SEARCH_TASKS, Unit.TASK, owner="its task's", key="`_id` = the task's key",
        since="never backed up: rebuilt from the tasks", format_version=0,
        redaction="holds counts and versions, no content",
    ),
    Collection(
        SEARCH_VECTORS, Unit.TASK, owner="field `o` (its task's)",
        key="`task` = the task id; `_id` = its entry's, `<task key>/<index>`",
        since="never backed up: rebuilt from the tasks", format_version=0, owner_field="o",
        redaction="a redacted message's vector is deleted with its entry; deletes, erase "
        "and retention remove their tasks' vectors; a shred makes them unreadable and "
        "drops them (docs/search.md)",
    ),
)  # fmt: skip
"""Collections derived from the others, never backed up (a restore rebuilds them): the
search index (`mindstore.search`). Erase, retention and deletes remove what they hold
for the tasks they remove."""

COLLECTIONS: dict[str, Collection] = {entry.name: entry for entry in (*REGISTRY, *DERIVED)}
BEYOND_TASKS: tuple[str, ...] = tuple(e.name for e in REGISTRY if e.unit is not Unit.TASK)
"""The collections of threads, agents and tenant settings (format 3 of a backup)."""


def first_holding(version: int) -> tuple[str, ...]:
    """The collections a backup of format `version` holds, in registry order."""
    return tuple(entry.name for entry in REGISTRY if entry.format_version <= version)
