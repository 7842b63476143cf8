"""The portable operator subset (docs/design.md), as data, and an auditor for recorded commands.

Everything mindstore sends must behave the same on the embedded backend and on MongoDB
>= 6, and every write must be routable on a cluster sharded on ``(tenant, _id)``. The
suite records the commands it sends (`mindstore.backends.recorder`) and `audit()` checks
each one:

* every ``$`` operator in a filter, projection, update or pipeline is in `ALLOWED`;
* every single-document write (``updateOne``, ``deleteOne``, ``findAndModify``, replace,
  upsert) on a sharded collection names ``tenant`` and ``_id`` by equality -- MongoDB 6
  refuses such a write without the shard key or ``_id``, and an upsert without the full
  shard key;
* every multi-document write on a sharded collection names ``tenant`` by equality and
  either ``_id`` (a value or ``{"$in": [...]}``, as `erase` deletes in id chunks) or a
  filter shape listed in `TENANT_WIDE_WRITES`, the documented admin paths allowed to
  reach every chunk of one tenant;
* every inserted document on a sharded collection carries ``tenant`` and ``_id``.

Pure functions over `RecordedCommand`s: no I/O, unit tested without a store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mindstore.backends.recorder import RecordedCommand
from mindstore.collection_names import (
    AGENTS,
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
from mindstore.registry import COLLECTIONS

DESIGN_SUBSET = frozenset({
    "$push", "$each", "$slice", "$inc", "$set", "$unset", "$ne", "$unwind", "$match", "$group",
    "$project", "$filter", "$map", "$size", "$cond", "$lookup", "$sort", "$limit", "$count",
    "$not", "$eq",
})  # fmt: skip
"""Listed in docs/design.md's portable subset. `$set` is also the pipeline stage (MongoDB
4.2+'s alias of `$addFields`, implemented by mongomock): the paged context window
(pipelines/context_pages.py)."""

STANDARD_EXTRAS: Mapping[str, str] = {
    # query operators, standard since MongoDB 3.x, evaluated alike by mongomock
    "$in": "id lists: payload lookups, dialog subtrees, erase/restore chunks; also the "
    "aggregation form in the context view's exclusion list",
    "$nin": "exactly-once append guard (`messages.id` not among the new ids), updates.py",
    "$all": "a compression message's referenced ids must all be stored: the same filter as "
    "the append guard (`messages.id`), so checking them costs no read, updates.py",
    "$exists": "dialogs.repair() finds half-made forks by their marker",
    "$gt": "keyset pages over _id (backup export, erase), `updated_after` and the oldest-first "
    "keyset continuation in list(); in "
    "analytics `{$gt: [x, null]}` inside `$cond` tests 'present and not null' (a fork "
    "copy's `origin`, a usage object)",
    "$gte": "backup scope `since` (updated_at >= since); analytics time ranges",
    "$regex": "list() and count(): an owner prefix (`^` and the escaped prefix, which the "
    "owner index serves) and a title substring (`(?i)` and the escaped text): every "
    "character of the caller's text is escaped (re.escape), so none is a pattern; PCRE on "
    "the server and Python's re on the embedded backend read these patterns alike",
    "$lt": "list() keyset continuation (updated_at, _id) and `updated_before`; analytics "
    "time ranges",
    "$and": "boundary and context-view conditions; erase pages",
    "$or": "boundary conditions; list() keyset continuation; picking messages by id",
    # aggregation accumulators/expressions, standard since MongoDB 3.2
    "$max": "sub-task spans in $group (pipelines/boundaries.py, pipelines/analytics.py)",
    "$min": "first message / first call time in analytics $group (pipelines/analytics.py)",
    "$sum": "message counts in $group (pipelines/boundaries.py); analytics sums",
    "$add": "nesting depth in $group (pipelines/boundaries.py, pipelines/analytics.py)",
    "$subtract": "durations and latencies (epoch-second timestamps, docs/design.md) and day "
    "buckets in analytics",
    "$mod": "UTC day bucket `ts - ts mod 86400` in analytics ($dateTrunc is not portable)",
    "$isNumber": "analytics: only numeric timestamps reach $min/$max (MongoDB >= 4.4)",
    "$ifNull": "a message field the lean stored form leaves out, read as its default "
    "(docs/data-model.md); analytics: a message without `content` filters as an empty list",
    "$year": "analytics: tasks created per day (docs/design.md: works on the embedded backend)",
    "$month": "analytics: tasks created per day",
    "$dayOfMonth": "analytics: tasks created per day",
    "$literal": "every caller id inside an aggregation expression (level scopes, replay and "
    "checkpoint id lists), so no stored id is ever read as a field path or variable",
    "$bitsAllSet": "exactly-once over sealed pages: an append's filter asks that a named id "
    "is not in the task's filter of sealed ids (`{$not: {$bitsAllSet: mask}}` on one 63-bit "
    "word, model/id_filter.py); standard since MongoDB 3.2, added to the embedded backend "
    "(mongomock lacks it) with MongoDB's semantics, backends/embedded/bit_queries.py",
    "$pull": "a seal drops the messages it moved into pages by id (`{messages: {id: {$in: "
    "[...]}}}`), so appends made meanwhile do not stop it (repositories/pages.py)",
    "$range": "analytics over paged tasks: the numbers of a task's visible pages, ``[0, "
    "pages)``, to name their `_id`s for the page `$lookup` (paged_history/stages.py); "
    "standard since MongoDB 3.2",
    "$concat": "analytics over paged tasks: a page's `_id` is its task's key, `#` and its "
    "number (ids.page_key), built on the server (paged_history/stages.py)",
    "$toString": "analytics over paged tasks: the page number inside a page's `_id` "
    "(paged_history/stages.py); standard since MongoDB 4.0",
    # update operator, standard since MongoDB 2.4
    "$setOnInsert": "payload offload: insert the payload if missing, never overwrite",
    "$addToSet": "the search index adds an appended task's new terms to the set of its "
    "terms, with `$each`, so it needs no read (search/catchup.py); standard since MongoDB 2.4",
    # "$max" above is also the update operator (MongoDB 2.6): the search index's watermark
    # only moves forward when two stores bring it up to date at once (search/catchup.py)
}
"""Outside docs/design.md's list, but standard in every MongoDB since 3.x (so in 6), used by the
code, and run on the embedded backend by the suite (whose audit, tests/conftest.py,
refuses anything not listed here). Add an operator only with the code that uses it."""

ALLOWED = DESIGN_SUBSET | frozenset(STANDARD_EXTRAS)

SHARDED_COLLECTIONS = frozenset(
    {
        TASKS,
        TASK_PAGES,
        DIALOG_NODES,
        PAYLOADS,
        AGENTS,
        POLICIES,
        LANGGRAPH_CHECKPOINTS,
        LANGGRAPH_WRITES,
        LANGGRAPH_BLOBS,
        MEMORY_ITEMS,
        SEARCH_ENTRIES,
        SEARCH_POSTINGS,
        SEARCH_TASKS,
        SEARCH_VECTORS,
    }
)
"""Collections sharded on ``(tenant, _id)`` (docker/compose.sharded.yaml, docs/operations.md)."""

MINDSTORE_COLLECTIONS = frozenset(COLLECTIONS)
"""The collections mindstore owns (the registry's, which are the document models'); the
suite-wide audit checks commands on these, not the scratch collections of the backend
adapter's own tests."""

TENANT_WIDE_WRITES: Mapping[tuple[str, str, frozenset[str]], str] = {
    ("delete", "payloads", frozenset({"tenant", "task_id"})):
        "tasks.delete() drops the deleted task's offloaded payloads (deleteMany)",
    ("delete", "task_pages", frozenset({"tenant", "task"})):
        "tasks.delete() drops the deleted task's sealed pages (deleteMany)",
    ("delete", SEARCH_ENTRIES, frozenset({"tenant"})):
        "search-index rebuild, erase of a tenant and a shredded tenant drop its index",
    ("delete", SEARCH_POSTINGS, frozenset({"tenant"})):
        "search-index rebuild, erase of a tenant and a shredded tenant drop its index",
    ("delete", SEARCH_TASKS, frozenset({"tenant"})):
        "search-index rebuild, erase of a tenant and a shredded tenant drop its index",
    ("delete", SEARCH_VECTORS, frozenset({"tenant"})):
        "search-index rebuild, erase of a tenant and a shredded tenant drop its index",
    ("update", TASKS, frozenset({"tenant"})):
        "keys.shred marks every task of the shredded tenant encrypted (updateMany)",
}  # fmt: skip
"""Multi-document writes without ``_id`` that are allowed, keyed by (command, collection,
filter fields): admin paths that must reach every chunk of one tenant. Anything else
without ``_id`` is a violation: add it here only with a reason."""

FIELD_PATH_PREFIX = "$$"
SINGLE_WRITES = frozenset({"findandmodify"})
WRITE_COMMANDS = frozenset({"update", "delete", "findandmodify", "insert"})


@dataclass(frozen=True)
class Violation:
    command: str
    collection: str | None
    problem: str


def operators(value: Any) -> set[str]:
    """Every `$operator` key anywhere in a filter, update, projection or pipeline.

    `$$variables` are not operators; field paths such as ``"$messages"`` are values, not keys.
    """
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                if (
                    isinstance(key, str)
                    and key.startswith("$")
                    and not key.startswith(FIELD_PATH_PREFIX)
                ):
                    found.add(key)
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def is_replacement(update: Any) -> bool:
    """A replacement document (data, not operators): no top-level `$` key, not a pipeline."""
    return isinstance(update, Mapping) and not any(str(k).startswith("$") for k in update)


def _statements(command: RecordedCommand) -> list[dict[str, Any]]:
    """(filter, update, multi) of every statement of a write command."""
    lname = command.name.lower()
    if command.writes is not None:
        if lname == "delete":
            return [
                {"q": w.get("q"), "u": None, "multi": not w.get("limit")} for w in command.writes
            ]
        return [
            {"q": w.get("q"), "u": w.get("u"), "multi": bool(w.get("multi"))}
            for w in command.writes
        ]
    if lname in ("update", "delete", "findandmodify"):
        # recorded without statements (hand-built records): the first one, single
        return [{"q": command.filter, "u": command.update, "multi": False}]
    return []


def sent_operators(command: RecordedCommand) -> set[str]:
    """Operators of everything the command asks the server to evaluate (not stored data)."""
    parts: list[Any] = [command.pipeline, command.projection]
    statements = _statements(command)
    if statements:
        for statement in statements:
            parts.append(statement["q"])
            if not is_replacement(statement["u"]):
                parts.append(statement["u"])
    else:
        parts.append(command.filter)
    return operators(parts)


def _equality(value: Any) -> bool:
    return value is not None and not isinstance(value, (Mapping, list, tuple))


def _id_targeted(value: Any) -> bool:
    """`_id` by equality or by an explicit id list."""
    if _equality(value):
        return True
    return (
        isinstance(value, Mapping)
        and set(value) == {"$in"}
        and isinstance(value["$in"], (list, tuple))
        and all(_equality(v) for v in value["$in"])
    )


def shard_key_problem(name: str, collection: str, query: Any, multi: bool) -> str | None:
    """Why one write statement could not be routed by ``(tenant, _id)``, or None."""
    query = query if isinstance(query, Mapping) else {}
    if not _equality(query.get("tenant")):
        return "write filter lacks tenant equality (shard key)"
    if not multi:
        if not _equality(query.get("_id")):
            return "single-document write filter lacks _id equality (shard key)"
        return None
    if "_id" in query:
        return (
            None
            if _id_targeted(query["_id"])
            else "multi-document write with an _id that is not a value or $in list"
        )
    if (name, collection, frozenset(query)) in TENANT_WIDE_WRITES:
        return None
    return (
        f"tenant-wide {name} on {collection} with filter {sorted(query)} "
        "is not in TENANT_WIDE_WRITES"
    )


def check_command(command: RecordedCommand) -> list[Violation]:
    problems: list[Violation] = []
    for op in sorted(sent_operators(command) - ALLOWED):
        problems.append(
            Violation(
                command.name, command.collection, f"operator {op} is outside the portable subset"
            )
        )
    lname = command.name.lower()
    if command.collection not in SHARDED_COLLECTIONS or lname not in WRITE_COMMANDS:
        return problems
    if lname == "insert":
        for doc in command.documents or []:
            if not (isinstance(doc, Mapping) and _equality(doc.get("tenant")) and "_id" in doc):
                problems.append(
                    Violation(
                        command.name,
                        command.collection,
                        "inserted document lacks tenant or _id (shard key)",
                    )
                )
                break
        return problems
    for statement in _statements(command):
        multi = statement["multi"] and lname not in SINGLE_WRITES
        problem = shard_key_problem(lname, command.collection, statement["q"], multi)
        if problem:
            problems.append(Violation(command.name, command.collection, problem))
    return problems


def audit(
    commands: Iterable[RecordedCommand], *, collections: Iterable[str] | None = None
) -> list[Violation]:
    """Every violation in `commands` (empty when all are portable and shard-safe).

    With `collections`, only commands on those collections are audited.
    """
    wanted = None if collections is None else frozenset(collections)
    return [
        v
        for command in commands
        if wanted is None or command.collection in wanted
        for v in check_command(command)
    ]
