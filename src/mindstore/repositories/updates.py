"""Turn a `Plan` into one guarded MongoDB update (pure, no I/O).

Why `$set messages.<n>` rather than `$push messages`: a verb often appends *and* patches an
earlier message (the previous message's `finished_ts`, a tool call's flags). MongoDB
rejects an update that touches `messages` and `messages.7.finished_ts` together
(conflicting paths); mongomock accepts it, so the trap only shows on a real server. The
array is append-only and `seq` is its length under the version guard, so setting index
`seq` appends, and every path in the update is disjoint.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from mindstore.errors import MindstoreError
from mindstore.model.base import Model
from mindstore.model.header import TaskHeader
from mindstore.model.planner import Plan
from mindstore.model.storage_form import escape_keys

ValueTransform = Callable[[Any, str, str], Any]
"""(stored value, message id, path inside the message) -> value actually written."""


def stored_value(value: Any) -> Any:
    """The BSON-ready form of a patch value (models dumped, user keys escaped)."""
    if isinstance(value, Model):
        value = value.to_dict()
    return escape_keys(value)


def check_disjoint(paths: list[str]) -> None:
    """Refuse an update whose paths overlap; MongoDB would reject it (see module doc)."""
    ordered = sorted(paths)
    for first, second in zip(ordered, ordered[1:]):
        if first == second or second.startswith(first + "."):
            raise MindstoreError(f"internal error: conflicting update paths {first!r} and {second!r}")


def changed_header_fields(before: TaskHeader, after: TaskHeader) -> dict[str, Any]:
    old, new = before.to_dict(), after.to_dict()
    return {key: value for key, value in new.items() if old.get(key) != value}


def build_task_update(
    plan: Plan,
    *,
    task_id: str,
    tenant: str,
    version: int,
    now: datetime,
    transform: ValueTransform | None = None,
    extra_set: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(filter, update) for one plan, guarded by version, message ids and patch targets."""
    query: dict[str, Any] = {"_id": task_id, "tenant": tenant, "version": version}
    if plan.appended:
        # Exactly-once: a message id already stored makes the whole update match nothing.
        query["messages.id"] = {"$nin": plan.new_ids}
    sets: dict[str, Any] = {}
    for offset, doc in enumerate(plan.appended_docs):
        sets[f"messages.{plan.base_index + offset}"] = doc
    for patch in plan.patches:
        if patch.message_id:
            query[f"messages.{patch.index}.id"] = patch.message_id
        value = stored_value(patch.value)
        if transform is not None:
            value = transform(value, patch.message_id, patch.path)
        sets[f"messages.{patch.index}.{patch.path}"] = value
    sets.update(changed_header_fields(plan.header_before, plan.header))
    sets["updated_at"] = now
    if extra_set:
        sets.update(extra_set)
    check_disjoint(list(sets) + ["version"])
    return query, {"$set": sets, "$inc": {"version": 1}}
