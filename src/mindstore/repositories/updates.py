"""Turn a `Plan` into one guarded MongoDB update (pure, no I/O).

Why `$set messages.<n>` rather than `$push messages`: a verb often appends *and* patches an
earlier message (the previous message's `finished_ts`, a tool call's flags). MongoDB
rejects an update that touches `messages` and `messages.7.finished_ts` together
(conflicting paths); mongomock accepts it, so the trap only shows on a real server. The
array is append-only and `seq` is its length under the version guard, so setting index
`seq` appends, and every path in the update is disjoint.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mindstore.errors import MindstoreError
from mindstore.model.header import TaskHeader
from mindstore.model.lean_form import lean_value
from mindstore.model.planner import ABSENT, FROM_VALUE, Patch, Plan
from mindstore.model.storage_form import element_size, escape_keys

ValueTransform = Callable[[Any, str, str], Any]
"""(stored value, message id, path inside the message) -> value actually written."""


def stored_value(value: Any) -> Any:
    """The BSON-ready form of a patch value (models in their lean form, user keys escaped)."""
    return escape_keys(lean_value(value))


def patch_value(patch: Patch) -> Any:
    """What a patch writes: its planned stored value, else its value made BSON-ready
    (`ABSENT` when the lean form leaves the field out)."""
    return stored_value(patch.value) if patch.stored is FROM_VALUE else patch.stored


def check_disjoint(paths: list[str]) -> None:
    """Refuse an update whose paths overlap; MongoDB would reject it (see module doc)."""
    ordered = sorted(paths)
    for first, second in itertools.pairwise(ordered):
        if first == second or second.startswith(first + "."):
            raise MindstoreError(
                f"internal error: conflicting update paths {first!r} and {second!r}"
            )


def _smaller_of(key: str, old: Any, new: Any) -> dict[str, Any]:
    """`key: new`, or `key.sub: value` for just the changed entries of a sub-document when
    that encodes smaller (usage after one turn changes 3 of its 5 counters). Dotted
    entries are used only when both sides have the same keys, so nothing needs `$unset`."""
    whole = {key: new}
    if not (isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys()):
        return whole
    dotted = {f"{key}.{sub}": value for sub, value in new.items() if old[sub] != value}
    if sum(element_size(k, v) for k, v in dotted.items()) < element_size(key, new):
        return dotted
    return whole


def changed_header_fields(before: TaskHeader, after: TaskHeader) -> dict[str, Any]:
    """The header fields a plan changed, as compact `$set` entries."""
    old, new = before.to_dict(), after.to_dict()
    sets: dict[str, Any] = {}
    for key, value in new.items():
        if old.get(key) != value:
            sets.update(_smaller_of(key, old.get(key), value))
    return sets


def exactly_once_guard(new_ids: list[str]) -> dict[str, Any]:
    """Match only if none of the new message ids is stored yet (`$ne` for one id is the
    same test as `$nin`, and 9 bytes shorter on every single-message append)."""
    if len(new_ids) == 1:
        return {"$ne": new_ids[0]}
    return {"$nin": new_ids}


def build_task_update(
    plan: Plan,
    *,
    key: str,
    tenant: str,
    version: int,
    now: datetime,
    transform: ValueTransform | None = None,
    extra_set: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(filter, update) for one plan, guarded by version, message ids and patch targets.

    A patch that sets a field back to its default removes it (`$unset`), so the stored
    message stays in its lean form and `size_bytes` (planned on that form) stays exact."""
    query: dict[str, Any] = {"_id": key, "tenant": tenant, "version": version}
    if plan.appended:
        # Exactly-once: a message id already stored makes the whole update match nothing.
        query["messages.id"] = exactly_once_guard(plan.new_ids)
    sets: dict[str, Any] = {}
    unsets: dict[str, Any] = {}
    for offset, doc in enumerate(plan.appended_docs):
        sets[f"messages.{plan.base_index + offset}"] = doc
    for patch in plan.patches:
        if patch.message_id:
            query[f"messages.{patch.index}.id"] = patch.message_id
        value = patch_value(patch)
        if value is ABSENT:
            unsets[f"messages.{patch.index}.{patch.path}"] = ""
            continue
        if transform is not None:
            value = transform(value, patch.message_id, patch.path)
        sets[f"messages.{patch.index}.{patch.path}"] = value
    sets.update(changed_header_fields(plan.header_before, plan.header))
    sets["updated_at"] = now
    # the guard pins the version, so setting the next one is `$inc` without its sub-document
    sets["version"] = version + 1
    if extra_set:
        sets.update(extra_set)
    check_disjoint([*sets, *unsets])
    update: dict[str, Any] = {"$set": sets}
    if unsets:
        update["$unset"] = unsets
    return query, update
