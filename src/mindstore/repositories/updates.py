"""Turn a `Plan` into one guarded MongoDB update (pure, no I/O).

Why `$set messages.<n>` rather than `$push messages`: a verb often appends *and* patches an
earlier message (the previous message's `finished_ts`, a tool call's flags). MongoDB
rejects an update that touches `messages` and `messages.7.finished_ts` together
(conflicting paths); mongomock accepts it, so the trap only shows on a real server. The
array is append-only and `seq` is its length under the version guard, so setting index
`seq` appends, and every path in the update is disjoint.

Every byte of the update travels with every append, so the header's changes are sent in
their smallest form (`header_changes`): a sub-document's changed fields as dotted paths, a
list that grew by setting the new items at their indexes (`field.<n>`, as messages are
appended), a list that lost its last items by `$push`
with an empty `$each` and a `$slice` (the portable truncation), one changed list item as
`field.<i>`, whichever encodes smallest. The filter pins the document state the plan was
made from: `version` and `updated_at` (a counter alone can repeat after a delete and
re-create, a timestamp pins the incarnation). Under that pin the message array is exactly
the one planned from, so patches carry no per-message id guard of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from mindstore.errors import MindstoreError, ValidationError
from mindstore.model import id_filter
from mindstore.model.header import STORED_HEADER_FIELDS, TaskHeader, stored_header
from mindstore.model.lean_form import lean_value
from mindstore.model.paging import pending_entry
from mindstore.model.plans import ABSENT, FROM_VALUE, Patch, Plan
from mindstore.model.storage_form import element_size, escape_keys

ValueTransform = Callable[[Any, str, str], Any]
"""(stored value, message id, path inside the message) -> value actually written."""

Update = dict[str, dict[str, Any]]
"""{operator: {path: value}}, e.g. {"$set": {...}, "$push": {...}}."""

OPERATOR_BYTES = 12
"""An operator's own sub-document in an update (`"$push": {...}`): type, name, length, end."""


def stored_value(value: Any) -> Any:
    """The BSON-ready form of a patch value (models in their lean form, user keys escaped)."""
    return escape_keys(lean_value(value))


def patch_value(patch: Patch) -> Any:
    """What a patch writes: its planned stored value, else its value made BSON-ready
    (`ABSENT` when the lean form leaves the field out)."""
    return stored_value(patch.value) if patch.stored is FROM_VALUE else patch.stored


def check_disjoint(paths: list[str]) -> None:
    """Refuse an update whose paths overlap; MongoDB would reject it (see module doc).

    Paths are compared by their components: sorted as text, `a.1-x` would fall between
    `a.1` and `a.1.id` and hide that overlap."""
    ordered = sorted(paths, key=lambda path: path.split("."))
    for first, second in itertools.pairwise(ordered):
        if first == second or second.startswith(first + "."):
            raise MindstoreError(
                f"internal error: conflicting update paths {first!r} and {second!r}"
            )


def _size(update: Update) -> int:
    return sum(
        OPERATOR_BYTES + sum(element_size(path, value) for path, value in entries.items())
        for entries in update.values()
    )


def _dict_options(key: str, old: Any, new: Any) -> list[Update]:
    """`key: new`, or just the changed entries of a sub-document as `key.sub: value` (a
    missing entry reads as its default, so setting one never needs `$unset`)."""
    options: list[Update] = [{"$set": {key: new}}]
    if isinstance(old, dict) and isinstance(new, dict) and new.keys() >= old.keys():
        dotted = {f"{key}.{sub}": value for sub, value in new.items() if old.get(sub) != value}
        options.append({"$set": dotted})
    return options


def _list_options(key: str, old: list[Any], new: list[Any]) -> list[Update]:
    """Ways to turn the stored list `old` into `new`: set it whole; push what was added at
    its end; truncate it to a prefix; set the items that changed in place."""
    options: list[Update] = [{"$set": {key: new}}]
    if len(new) > len(old) and new[: len(old)] == old:
        # as messages are appended: setting the index at the end grows the array by one
        options.append({"$set": {f"{key}.{i}": new[i] for i in range(len(old), len(new))}})
    elif len(new) < len(old) and old[: len(new)] == new:
        options.append({"$push": {key: {"$each": [], "$slice": len(new)}}})
    elif len(new) == len(old):
        items: dict[str, Any] = {}
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            if before != after:
                smallest = min(_dict_options(f"{key}.{index}", before, after), key=_size)
                items.update(smallest["$set"])
        options.append({"$set": items})
    return options


def header_changes(before: TaskHeader, after: TaskHeader) -> Update:
    """The stored header fields a plan changed, each in its smallest encoding."""
    old, new = stored_header(before), stored_header(after)
    update: Update = {}
    for key in STORED_HEADER_FIELDS:
        was, now = old.get(key), new.get(key)  # a paging field is absent at 0
        if was == now:
            continue
        if isinstance(was, list) and isinstance(now, list):
            options = _list_options(key, was, now)
        else:
            options = _dict_options(key, was, now)
        for operator, entries in min(options, key=_size).items():
            update.setdefault(operator, {}).update(entries)
    return update


def changed_header_fields(before: TaskHeader, after: TaskHeader) -> dict[str, Any]:
    """The header fields a plan changed, as `$set` entries only (for writes that add their
    own `$push`, such as retracting the last message)."""
    old, new = stored_header(before), stored_header(after)
    sets: dict[str, Any] = {}
    for key in STORED_HEADER_FIELDS:
        if old.get(key) != new.get(key):
            sets.update(min(_dict_options(key, old.get(key), new.get(key)), key=_size)["$set"])
    return sets


def exactly_once_guard(ids: Sequence[str]) -> dict[str, Any]:
    """Match only if none of these message ids is stored yet (`$ne` for one id is the
    same test as `$nin`, and 9 bytes shorter on every single-message append)."""
    if len(ids) == 1:
        return {"$ne": ids[0]}
    return {"$nin": list(ids)}


def build_task_update(
    plan: Plan,
    *,
    key: str,
    tenant: str,
    version: int,
    updated_at: datetime | None,
    now: datetime,
    transform: ValueTransform | None = None,
    guard_ids: Sequence[str] = (),
    require_ids: Sequence[str] = (),
    unset: Sequence[str] = (),
    sealed_ids: Mapping[int, str] | None = None,
    seal_due: bool = False,
    unsealed_ids: Sequence[str] = (),
) -> tuple[dict[str, Any], Update]:
    """(filter, update) for one plan, pinned to the document state it was planned from.

    `guard_ids`: the appended ids a caller named (a replay of the call carries them
    again); the exactly-once guard holds them. Ids the store generates (a verb called
    without a message id, a sub-task entry's config and context messages) are fresh: a
    replay of the call would not carry them, so the guard leaves them out (49 bytes an
    append). `require_ids`: stored message ids
    the write needs (`$all`, e.g. those a compression message names). `unset`: stored
    fields of an earlier format to drop in the same write. A patch that sets a field back
    to its default removes it (`$unset`), so the stored message stays in its lean form and
    `size_bytes` (planned on that form) stays exact. A patch of a sealed message (index
    below the header's `sealed`) is a `pending` entry instead, named by the message's id
    (`sealed_ids` supplies the ids a patch does not carry). `seal_due`: the task was due
    for a seal when planned, so a seal may be under way (docs/write-paths.md).
    `unsealed_ids`: caller-named ids the task's sealed-id filter must not hold
    (`model/id_filter.py`), so the replay of a sealed message matches nothing.
    `plan.document_set`: other task-document fields set in the same `$set`.
    """
    query: dict[str, Any] = {"_id": key, "tenant": tenant, "version": version,
                             "updated_at": updated_at}  # fmt: skip
    named = set(guard_ids)
    guarded = [i for i in plan.new_ids if i in named]
    if guarded:
        # Exactly-once: a message id already stored makes the whole update match nothing.
        query["messages.id"] = exactly_once_guard(guarded)
    clauses: list[dict[str, Any]] = []
    if require_ids:
        # beside the guard, not inside its operator document: mongomock evaluates
        # {"$ne": .., "$all": [..]} on an array path as never matching (MongoDB does not)
        clauses.append({"messages.id": {"$all": sorted(set(require_ids))}})
    words = plan.header_before.id_filter_words
    if unsealed_ids and words:
        clauses.extend(id_filter.guard(words, sorted(set(unsealed_ids))))
    nested: list[dict[str, Any]] = []
    for clause in clauses:  # top-level keys where they are free (fewer bytes than `$and`)
        ((path, test),) = clause.items()
        if path in query:
            nested.append(clause)
        else:
            query[path] = test
    if nested:
        query["$and"] = nested
    sets: dict[str, Any] = {}
    unsets: dict[str, Any] = {}
    pushes: dict[str, Any] = {}
    pending: list[dict[str, Any]] = []
    sealed = plan.header_before.sealed  # the array holds messages [sealed, seq)
    for offset, doc in enumerate(plan.appended_docs):
        sets[f"messages.{plan.base_index + offset - sealed}"] = doc
    for patch in plan.patches:
        value = patch_value(patch)
        if value is not ABSENT and transform is not None:
            value = transform(value, patch.message_id, patch.path)
        if patch.index < sealed:  # in a sealed page: recorded here, folded into it later
            if patch.push:  # a pending entry sets a path: a planner never pushes here
                raise ValidationError(f"cannot append to {patch.path} of a sealed message")
            message_id = patch.message_id or (sealed_ids or {}).get(patch.index, "")
            pending.append(pending_entry(message_id, patch.index, patch.path, value,
                                         absent=value is ABSENT))  # fmt: skip
        elif value is ABSENT:
            unsets[f"messages.{patch.index - sealed}.{patch.path}"] = ""
        elif patch.push:
            pushes[f"messages.{patch.index - sealed}.{patch.path}"] = value
        else:
            sets[f"messages.{patch.index - sealed}.{patch.path}"] = value
        if patch.guard is not None and patch.index >= sealed:
            query[f"messages.{patch.index - sealed}.{patch.path}"] = patch.guard
    update: Update = {"$set": sets}
    if pending:
        pushes["pending"] = {"$each": pending}
        sets["pending_at"] = version + 1
    if pushes:
        update["$push"] = pushes
    last = plan.header_before.tail.index if plan.header_before.tail is not None else -1
    if seal_due and any(sealed <= patch.index != last for patch in plan.patches):
        # an open message other than the last changed while a seal may be under way: that
        # seal must not drop the copy it read (its guard, repositories/pages.py)
        update["$inc"] = {"patched": 1}
    for operator, entries in header_changes(plan.header_before, plan.header).items():
        update.setdefault(operator, {}).update(entries)
    if plan.document_set:  # fields beside the header (agent_state): the same update
        sets.update(plan.document_set)
    sets["updated_at"] = now
    # the filter pins the version, so setting the next one is `$inc` without its sub-document
    sets["version"] = version + 1
    unsets.update(dict.fromkeys(unset, ""))
    if unsets:
        update["$unset"] = unsets
    check_disjoint([path for entries in update.values() for path in entries])
    return query, update
