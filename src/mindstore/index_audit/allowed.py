"""The query shapes that may read more than they select, each with why and how much.

The index audit fails a query no declared index serves (`mindstore.index_audit.plan`)
unless its shape is covered here. Each entry says why the shape is not worth an index of
its own and what bounds the read (one task's pages, one owner's tasks, an operator's
whole-database job). docs/operations.md ("Queries and their indexes") lists every entry;
a test checks that it does. Add an entry only with the code that needs it.

Pure data and a matcher: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mindstore.collection_names import (
    AGENTS,
    DATA_KEYS,
    DIALOG_NODES,
    LANGGRAPH_CHECKPOINTS,
    POLICIES,
    TASK_PAGES,
    TASKS,
)

from .shapes import POSITION, QueryShape, SortKey

__all__ = ["BOUNDED_SCANS", "BoundedScan", "allowed_by", "matches"]

WILDCARD = ".*"
"""A field pattern ending so (``md.*``) matches every field under that prefix."""


def matches(pattern: str, field_name: str) -> bool:
    """Does `field_name` match `pattern` (a field, or ``prefix.*`` for every field under it)?"""
    if pattern.endswith(WILDCARD):
        return field_name.startswith(pattern[: -len(WILDCARD) + 1])
    return field_name == pattern


def _all_match(patterns: Iterable[str], fields: Iterable[str]) -> bool:
    wanted = tuple(patterns)
    return all(any(matches(p, f) for p in wanted) for f in fields)


@dataclass(frozen=True)
class BoundedScan:
    """A family of query shapes allowed to scan, with its reason and its bound.

    A shape is covered when it is on `collection` (None: any), its equality fields are
    `equality` plus any of `optional`, every range or residual field is in `filters`,
    the fields of `needs` are among its ranges, and its sort is one of `sorts`. Fields may
    be patterns (``md.*``).
    """

    name: str
    collection: str | None
    equality: frozenset[str]
    reason: str
    bound: str
    optional: frozenset[str] = frozenset()
    filters: frozenset[str] = frozenset()
    needs: frozenset[str] = frozenset()
    sorts: frozenset[SortKey] = field(default_factory=lambda: frozenset({()}))

    def describe(self) -> str:
        """The family in one line: ``tenant =, owner = (optional), filter on created_at,
        pages; sort _id``."""
        parts = [f"{f} =" for f in sorted(self.equality)]
        parts += [f"{f} = (optional)" for f in sorted(self.optional)]
        if self.filters:
            needed = f" ({', '.join(sorted(self.needs))} required)" if self.needs else ""
            parts.append("filter on " + ", ".join(sorted(self.filters)) + needed)
        text = ", ".join(parts) or "(no filter)"
        sorts = sorted(
            ", ".join(f + ("" if d > 0 else " desc") for f, d in sort) or "none"
            for sort in self.sorts
        )
        return text + "; sort " + " or ".join(sorts)

    def covers(self, shape: QueryShape) -> bool:
        if self.collection is not None and shape.collection != self.collection:
            return False
        if shape.point:
            return False  # served by the _id index: nothing to allow
        if not self.equality <= shape.equality:
            return False
        if not _all_match(self.optional, shape.equality - self.equality):
            return False
        if not _all_match(self.filters, shape.ranges | shape.residual):
            return False
        if not self.needs <= shape.ranges:
            return False
        return shape.sort in self.sorts


BY_ID: SortKey = (("_id", 1),)
NEWEST: SortKey = (("updated_at", -1), ("_id", -1))
OLDEST: SortKey = (("updated_at", 1), ("_id", 1))
ANALYTICS_FILTERS = frozenset(
    {"created_at", "last_model_name", "root_model_name", "messages.started_ts", "pages",
     f"pending.{POSITION}"}
)  # fmt: skip

BOUNDED_SCANS: tuple[BoundedScan, ...] = (
    BoundedScan(
        "whole-database backup", None, frozenset(),
        reason="`backup()` without a tenant reads every collection whole, in `_id` order "
        "through the `_id` index, a page at a time; with `since`, documents not changed "
        "since are read and left out",
        bound="the whole collection, once per backup of every tenant (an operator's job)",
        filters=frozenset({"updated_at", "retention.updated_at", "_id"}), sorts=frozenset({BY_ID}),
    ),
    BoundedScan(
        "incremental backup", None, frozenset({"tenant"}),
        reason="`backup(since=...)` of a tenant (or an owner) reads its documents in `_id` "
        "order (`tenant_1__id_1`, `tenant_owner_id`) and keeps those changed since",
        bound="one tenant's (or owner's) documents of the collection, once per backup "
        "(an operator's job)",
        optional=frozenset({"owner"}), filters=frozenset({"updated_at", "_id"}),
        needs=frozenset({"updated_at"}), sorts=frozenset({BY_ID}),
    ),
    BoundedScan(
        "incremental backup of policies", POLICIES, frozenset({"tenant"}),
        reason="`backup(since=...)` of a tenant reads its policy document (`_id` is the "
        "tenant) and keeps it if its retention changed since",
        bound="one document",
        filters=frozenset({"retention.updated_at", "_id"}),
        needs=frozenset({"retention.updated_at"}), sorts=frozenset({BY_ID}),
    ),
    BoundedScan(
        "an agent by name", AGENTS, frozenset({"tenant", "owner"}),
        reason="an agent's `owner` is its name (`_id` is `<tenant>/<name>`): `tenant_owner_id` "
        "finds it, and retention checks its `updated_at`",
        bound="one document",
        filters=frozenset({"updated_at", "_id"}), sorts=frozenset({(), BY_ID}),
    ),
    BoundedScan(
        "an owner's dialog tree", DIALOG_NODES, frozenset({"tenant", "owner"}),
        reason="an owner-scoped view adds its owner to every tree query: a node's children "
        "(`tenant_parent_id`), a subtree (`tenant_ancestors`) or a tree (`tenant_root`), each "
        "node checked for the owner",
        bound="one dialog's children, subtree or tree",
        optional=frozenset({"parent_id", "ancestors", "root_id"}),
        filters=frozenset({"_id"}), sorts=frozenset({(), BY_ID}),
    ),
    BoundedScan(
        "analytics report", TASKS, frozenset({"tenant"}),
        reason="a report (`mindstore.analytics`) reads every task in its scope in full, "
        "since their messages are what it counts: an index narrows to the tenant, its "
        "owner or state or creation range (`tenant_owner_updated`, `tenant_state_updated_id`, "
        "`tenant_created`), or its paged tasks (`tenant_paged`); the other filters (a model, "
        "a message time range, an owner with a state, pending changes) are applied to the "
        "tasks read. A message time range over a large tenant can use the optional "
        "`(tenant, messages.started_ts)` index (docs/analytics.md)",
        bound="one tenant's tasks (one owner's, one state's or one creation range's when "
        "the report names it)",
        optional=frozenset({"owner", "state"}), filters=ANALYTICS_FILTERS,
    ),
    BoundedScan(
        "tasks by owner and state", TASKS, frozenset({"tenant", "owner", "state"}),
        reason="`tasks.list(owner=..., state=...)` walks the owner's tasks newest first "
        "(`tenant_owner_updated`) and skips the other states: an index for the pair would "
        "be one more key rewritten by every append",
        bound="one owner's tasks",
        filters=frozenset({"updated_at", "_id"}), sorts=frozenset({NEWEST}),
    ),
    BoundedScan(
        "tasks by owner prefix or title", TASKS, frozenset({"tenant"}),
        reason="`tasks.list` and `tasks.count` with `owner_prefix` read the tasks of the "
        "owners with that prefix (an anchored prefix is a range of `tenant_owner_updated`) "
        "and sort them in memory; with `title`, a case-insensitive substring no index can "
        "serve, they read the tenant's tasks (its owner's or state's when named) newest "
        "first and compare each title",
        bound="one tenant's tasks (those of the owners with the prefix, one owner's or one "
        "state's when named)",
        optional=frozenset({"owner", "state"}),
        filters=frozenset({"owner", "title", "updated_at", "_id"}),
        sorts=frozenset({(), NEWEST, OLDEST}),
    ),
    BoundedScan(
        "LangGraph messages tasks", TASKS, frozenset({"tenant", "metadata.integration"}),
        reason="finding a tenant's LangGraph threads (a backup with `since` or an owner, "
        "retention) pages its LangGraph messages tasks by `_id`: `tenant_integration_thread`, "
        "a partial index of the integrations' tasks only, finds them, and each page is "
        "sorted in memory",
        bound="one tenant's (or owner's) LangGraph messages tasks",
        optional=frozenset({"owner"}), filters=frozenset({"_id"}), sorts=frozenset({BY_ID}),
    ),
    BoundedScan(
        "LangGraph checkpoints by metadata", LANGGRAPH_CHECKPOINTS, frozenset({"tenant"}),
        reason="`MindstoreSaver.list(config, filter=...)` reads a thread's checkpoints by "
        "their `_id` prefix, newest first (`tenant_id`, or `tenant_owner_id` for an "
        "owner-scoped saver), and applies the metadata filter to the checkpoints read",
        bound="one thread's checkpoints",
        optional=frozenset({"o", "md.*"}), filters=frozenset({"_id"}),
        needs=frozenset({"_id"}), sorts=frozenset({(("_id", -1),), BY_ID, ()}),
    ),
    BoundedScan(
        "a long create's own pages", TASK_PAGES, frozenset({"tenant", "task", "born"}),
        reason="a create of a long history checks, after its task insert, that the pages "
        "it wrote are still its own (`born`): the task's visible pages (`tenant_task_page`), "
        "`born` checked on each",
        bound="one task's pages",
        filters=frozenset({"page"}),
    ),
    BoundedScan(
        "pages without a task", TASK_PAGES, frozenset({"tenant", "task"}),
        reason="`dialogs.repair()` and retention look for pages no task counts among a chunk "
        "of task keys: those tasks' pages (`tenant_task_page`), each one's `created_at` "
        "compared with the grace",
        bound="the pages of at most 500 tasks per query",
        filters=frozenset({"created_at"}),
    ),
    BoundedScan(
        "a task's pages by _id", TASK_PAGES, frozenset({"tenant", "task"}),
        reason="erasing a task lists its pages by keyset pages on `_id` (`tenant_task_page` "
        "finds them; `_id` order, `<task>#<n>`, is not page order), sorted in memory",
        bound="one task's pages",
        filters=frozenset({"_id"}), sorts=frozenset({BY_ID}),
    ),
    BoundedScan(
        "sealed messages by id", TASK_PAGES, frozenset({"tenant", "task", "messages.id"}),
        reason="which of some message ids a task's sealed pages hold (an exactly-once "
        "append, a fold): `tenant_task_message` finds the pages holding them, each checked "
        "to be visible (below the task's `pages` mark)",
        bound="the pages holding the named ids (one each, plus a crashed seal's leftover)",
        filters=frozenset({"page"}),
    ),
    BoundedScan(
        "pending changes of paged tasks", TASK_PAGES, frozenset({"tenant"}),
        reason="an analytics report over paged tasks reads, for each task with pending "
        "changes, its visible pages holding the changed ids: one `$or` clause per task "
        "(`task`, `page` below its mark, `messages.id` in the changed ids), each served by "
        "`tenant_task_message`",
        bound="the pages holding a pending change, of at most 100 tasks per query",
        filters=frozenset({"task", "page", "messages.id"}),
        needs=frozenset({"task", "messages.id"}),
    ),
    BoundedScan(
        "a tenant's data keys by prefix", DATA_KEYS, frozenset({"tenant"}),
        reason="the keyring reads a tenant's keys, tombstone and sweep cursor by the `_id` "
        "prefix `<tenant>/`: the `_id` index reads that range only",
        bound="one tenant's key documents (one per key version, a tombstone, a cursor)",
        optional=frozenset({"kind"}), filters=frozenset({"_id"}), needs=frozenset({"_id"}),
    ),
    BoundedScan(
        "a tenant's data keys by tenant", DATA_KEYS, frozenset({"tenant"}),
        reason="backup and erase page a tenant's key documents by `_id` with `tenant` by "
        "equality, which no index of `data_keys` leads with: the key store holds a few "
        "documents per tenant, too few to be worth a `(tenant, _id)` index",
        bound="the key store (a few documents per tenant)",
        filters=frozenset({"_id"}), sorts=frozenset({BY_ID}),
    ),
    BoundedScan(
        "every tenant's data keys", DATA_KEYS, frozenset({"kind"}),
        reason="`Keyring.migrate()` without a tenant lists the tenants that have keys",
        bound="the key store (a few documents per tenant), once per migration",
    ),
)  # fmt: skip
"""Every allowed scan; docs/operations.md lists them (name, collection, reason, bound)."""


def allowed_by(shape: QueryShape) -> BoundedScan | None:
    """The entry that covers `shape`, if any."""
    return next((entry for entry in BOUNDED_SCANS if entry.covers(shape)), None)
