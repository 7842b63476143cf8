"""Guarded single-document updates without copying the document (embedded backend).

mongomock runs every update the same general way: it tests every document of the
collection with its generic matcher, deep-copies the matched document (to roll back and to
tell whether anything changed), applies the operators, and compares the whole document
with the copy. On a task of 10,000 messages (about 7 MB) that is about 100 ms per append,
growing with the history, although a server does the same append in constant time.

mindstore's writes have one shape: a filter naming one `_id` (plus equality guards and an
exactly-once guard `{"messages.id": {"$ne": id}}` or `$nin`) and an update of `$set`,
`$unset` and `$inc` on disjoint dotted paths. For that shape this module:

* finds the document by `_id` in mongomock's store (no scan of the collection);
* matches the filter without copying: the `$ne`/`$nin` guard by one pass over the values
  it names (with mongomock's semantics: an array value matches element by element, a
  missing field never equals a string), every other key by mongomock's own matcher
  (equality values, `$all`, and `$not`/`$bitsAllSet` on the sealed-id filter, also
  inside an `$and` of such clauses);
* applies each operator in place on the stored document, storing values copied from the
  update (so nothing the caller or a listener holds is shared with the store), and knows
  per path whether the document changed (mongomock's ``nModified``), so no snapshot is
  needed; an undo log restores the document (key order included) if a unique index
  refuses the result, as mongomock's rollback does.

Everything about an update is checked against the stored document *before* it is changed.
Any other shape, and any case whose outcome is not certain to equal mongomock's (a path
through a scalar, an array index past the end, a non-numeric `$inc`, overlapping paths,
positional `$` paths, `arrayFilters`, `sort`, an upsert that inserts, ...), returns None:
the caller then runs mongomock's own update, so results, errors and stored documents never
differ from mongomock's; the tests run both paths on generated updates and compare.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bson import ObjectId
from bson.int64 import Int64
from mongomock import filtering as _untyped_filtering
from mongomock import helpers as _untyped_helpers
from pymongo.results import UpdateResult

from . import guard_index

__all__ = ["FastUpdate", "fast_update", "parse_update"]

# mongomock carries no annotations: typed aliases of the few functions used here
_helpers: Any = _untyped_helpers
_filtering: Any = _untyped_filtering
_filter_applies: Callable[[dict[str, Any], Any], bool] = _filtering.filter_applies
_iter_key_candidates: Callable[[str, Any], Any] = _filtering.iter_key_candidates
NOTHING: Any = _filtering.NOTHING

#: Filter values matched by mongomock's matcher on the one document (none can raise).
_PLAIN_FILTER_VALUES: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), _dt.datetime, ObjectId, Int64}
)
_NUMBERS: frozenset[type] = frozenset({int, float, Int64})
_OPERATORS = ("$set", "$unset", "$inc")
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class Guard:
    """`{path: {"$ne": s}}` or `{path: {"$nin": [s, ...]}}` with string operands."""

    path: str
    operator: str
    operand: Any
    forbidden: frozenset[str]


@dataclass(frozen=True, slots=True)
class FastUpdate:
    """An update statement of the shape this module runs (see `parse_update`)."""

    key: str | ObjectId
    plain: dict[str, Any]
    guards: tuple[Guard, ...]
    order: tuple[tuple[str, bool], ...]  # filter keys in order: (key, is a guard)
    ops: tuple[tuple[str, str, tuple[str, ...], Any], ...]  # (operator, path, parts, value)


def _index(part: str) -> int | None:
    """A canonical array index ("0", "17"; not "07", "-1", "+1"), else None."""
    if part.isascii() and part.isdigit() and (part == "0" or part[0] != "0"):
        return int(part)
    return None


_EXACT_OPERATORS = frozenset({"$all", "$not", "$bitsAllSet"})
"""Operators of a filter value mongomock's matcher evaluates on the one document exactly
as its general path would, without raising for the operands mindstore sends (`$all` of
ids beside the guard, `$not`/`$bitsAllSet` on the sealed-id filter)."""


def _exact_operators(search: Any) -> bool:
    """A filter value made only of `_EXACT_OPERATORS` (nested through `$not`)."""
    return (
        type(search) is dict
        and bool(search)
        and all(
            operator in _EXACT_OPERATORS and (operator != "$not" or _exact_operators(operand))
            for operator, operand in search.items()
        )
    )


def _exact_clauses(clauses: Any) -> bool:
    """An `$and` of single-key clauses on fields, each plain or `_exact_operators`."""
    return (
        type(clauses) is list
        and bool(clauses)
        and all(
            type(clause) is dict
            and len(clause) == 1
            and all(
                type(path) is str
                and path
                and not path.startswith("$")
                and (type(value) in _PLAIN_FILTER_VALUES or _exact_operators(value))
                for path, value in clause.items()
            )
            for clause in clauses
        )
    )


def _guard(path: str, search: Mapping[str, Any]) -> Guard | None:
    if type(search) is not dict or len(search) != 1:
        return None
    ((operator, operand),) = search.items()
    if operator == "$ne" and type(operand) is str:
        return Guard(path, operator, operand, frozenset((operand,)))
    strings = type(operand) is list and all(type(item) is str for item in operand)
    if operator == "$nin" and operand and strings:
        return Guard(path, operator, operand, frozenset(operand))
    return None


def _disjoint(paths: list[tuple[str, ...]]) -> bool:
    """No path twice, none inside another (MongoDB refuses such an update; mongomock
    applies it in order, which the general path keeps doing)."""
    seen = set(paths)
    if len(seen) != len(paths):
        return False
    return not any(parts[:end] in seen for parts in paths for end in range(1, len(parts)))


def parse_update(spec: Any, document: Any) -> FastUpdate | None:
    """The statement as a `FastUpdate`, or None when it is not of the fast shape.

    `spec` and `document` are what mongomock would see after its datetime patching
    (`helpers.patch_datetime_awareness_in_document`): ms-precision naive datetimes.
    """
    if type(spec) is not dict or type(document) is not dict or not document:
        return None
    key = spec.get("_id", NOTHING)
    if type(key) not in (str, ObjectId):
        return None
    plain: dict[str, Any] = {}
    guards: list[Guard] = []
    order: list[tuple[str, bool]] = []
    for path, search in spec.items():
        if path == "$and" and _exact_clauses(search):
            plain[path] = search
            order.append((path, False))
            continue
        if type(path) is not str or not path or path.startswith("$"):
            return None
        if type(search) in _PLAIN_FILTER_VALUES or _exact_operators(search):
            plain[path] = search
            order.append((path, False))
            continue
        guard = _guard(path, search)
        if guard is None:
            return None
        guards.append(guard)
        order.append((path, True))
    ops: list[tuple[str, str, tuple[str, ...], Any]] = []
    for operator, fields in document.items():
        if operator not in _OPERATORS or type(fields) is not dict or not fields:
            return None
        for path, value in fields.items():
            if type(path) is not str or "$" in path or "\0" in path:
                return None
            parts = tuple(path.split("."))
            if not all(parts) or parts[0] == "_id":
                return None
            if operator == "$inc" and type(value) not in _NUMBERS:
                return None
            ops.append((operator, path, parts, value))
    if not _disjoint([parts for _, _, parts, _ in ops]):
        return None
    return FastUpdate(key, plain, tuple(guards), tuple(order), tuple(ops))


# -- matching -----------------------------------------------------------------------------


def _candidates(path: str, doc: dict[str, Any]) -> list[Any]:
    """The values mongomock's matcher compares for `path` (`iter_key_candidates`), with a
    direct pass for the common `array.field` path."""
    head, dot, field = path.partition(".")
    if dot and "." not in field:
        array = doc.get(head, NOTHING)
        if type(array) is list:
            try:
                int(field)
            except ValueError:  # a field name: one candidate per sub-document
                return guard_index.candidate_values(array, field)
    return list(_iter_key_candidates(path, doc))


_MATCHERS: dict[str, Callable[[Any, Any], bool]] = {}


def _operator(name: str) -> Callable[[Any, Any], bool]:
    """mongomock's own implementation of a query operator (exact semantics, slow)."""
    if not _MATCHERS:
        _MATCHERS.update(_filtering._Filterer()._operator_map)
    return _MATCHERS[name]


def _guard_holds(guard: Guard, doc: dict[str, Any], index: guard_index.ArrayIndex | None) -> bool:
    """True when no value at `guard.path` equals a forbidden string (mongomock's `$ne` /
    `$nin`: every candidate must pass; no candidate at all passes)."""
    if index is not None:
        return not index.holds_any(guard.forbidden)
    candidates = _candidates(guard.path, doc)
    if set(map(type, candidates)) <= guard_index.SIMPLE_TYPES:
        return guard.forbidden.isdisjoint(candidates)
    matches = _operator(guard.operator)
    return all(matches(value, guard.operand) for value in candidates)


def _indexed(path: str) -> bool:
    """Whether a guard on `path` can use an `ArrayIndex` ("array.field", a field name)."""
    _, dot, field = path.partition(".")
    if not dot or "." in field:
        return False
    try:
        int(field)
    except ValueError:
        return True
    return False


def _matches(
    update: FastUpdate, doc: dict[str, Any], indexes: dict[str, guard_index.ArrayIndex]
) -> bool:
    guards = {guard.path: guard for guard in update.guards}
    for path, is_guard in update.order:
        if is_guard:
            if not _guard_holds(guards[path], doc, indexes.get(path)):
                return False
        elif not _filter_applies({path: update.plain[path]}, doc):
            return False
    return True


# -- applying -----------------------------------------------------------------------------


def _checked(update: FastUpdate, doc: dict[str, Any]) -> bool:
    """True when every operator can be applied exactly as mongomock would (checked on the
    unchanged document; the paths are disjoint, so one change cannot affect another)."""
    for operator, _, parts, _ in update.ops:
        parent: Any = doc
        missing = False
        for part in parts[:-1]:
            if type(parent) is dict:
                if part not in parent:
                    missing = True  # $set/$inc create sub-documents, $unset does nothing
                    break
                parent = parent[part]
            elif type(parent) is list:
                index = _index(part)
                if index is None or index >= len(parent):
                    return False
                parent = parent[index]
            else:
                return False  # a path through a scalar
        if missing:
            continue
        last = parts[-1]
        if type(parent) is dict:
            if operator == "$inc" and last in parent and type(parent[last]) not in _NUMBERS:
                return False
        elif type(parent) is list:
            index = _index(last)
            if operator != "$set" or index is None or index > len(parent):
                return False
        else:
            return False
    return True


def _same(old: Any, new: Any) -> bool:
    """How mongomock's whole-document comparison sees one value (Python's container
    equality: identity, then ``==``), so ``nModified`` is what mongomock reports."""
    return old is new or bool(old == new)


class _Undo:
    """What an applied update changed, to put the document back exactly."""

    def __init__(self) -> None:
        self.steps: list[Callable[[], None]] = []

    def restore_key(self, container: dict[str, Any], key: str, old: Any) -> None:
        if old is _ABSENT:
            self.steps.append(lambda: container.pop(key, None))
        else:
            self.steps.append(lambda: container.__setitem__(key, old))

    def restore_element(self, container: list[Any], index: int, old: Any) -> None:
        self.steps.append(lambda: container.__setitem__(index, old))

    def restore_removed(self, container: dict[str, Any], key: str, old: Any) -> None:
        order = list(container)

        def put_back() -> None:
            items = [(k, old if k == key else container[k]) for k in order]
            container.clear()
            container.update(items)

        self.steps.append(put_back)

    def rollback(self) -> None:
        for step in reversed(self.steps):
            step()


def _apply(update: FastUpdate, doc: dict[str, Any], undo: _Undo) -> bool:
    """Apply the operators in order (as mongomock does); True if the document changed."""
    changed = False
    for operator, _, parts, value in update.ops:
        parent: Any = doc
        skip = False
        for part in parts[:-1]:
            if type(parent) is list:
                parent = parent[int(part)]
            elif part in parent:
                parent = parent[part]
            elif operator == "$unset":
                skip = True
                break
            else:
                undo.restore_key(parent, part, _ABSENT)
                parent[part] = {}
                parent = parent[part]
        if skip:
            continue
        last = parts[-1]
        if type(parent) is list:  # $set of an element or one past the end (checked)
            index = int(last)
            new = _helpers.patch_datetime_awareness_in_document(value)
            if index == len(parent):
                parent.append(new)
                undo.steps.append(parent.pop)
                changed = True
            else:
                old = parent[index]
                parent[index] = new
                undo.restore_element(parent, index, old)
                changed = changed or not _same(old, new)
            continue
        old = parent.get(last, _ABSENT)
        if operator == "$unset":
            if old is not _ABSENT:
                undo.restore_removed(parent, last, old)
                del parent[last]
                changed = True
            continue
        if operator == "$inc":
            new = (0 if old is _ABSENT else old) + value
        else:
            new = _helpers.patch_datetime_awareness_in_document(value)
        undo.restore_key(parent, last, old)
        parent[last] = new
        changed = changed or old is _ABSENT or not _same(old, new)
    return changed


def _has_unique_index(sync: Any) -> bool:
    return any(index.get("unique") for index in sync._store.indexes.values())


def _reply(sync: Any, matched: bool, modified: bool) -> UpdateResult:
    """mongomock's reply to an update of one document."""
    raw = {
        "connectionId": sync.database.client._id,
        "err": None,
        "n": int(matched),
        "nModified": int(modified),
        "ok": 1,
        "upserted": None,
        "updatedExisting": matched,
    }
    return UpdateResult(raw, acknowledged=True)


def fast_update(sync: Any, spec: Any, document: Any, *, upsert: bool) -> UpdateResult | None:
    """Run an update statement on mongomock's collection `sync` without copying the
    matched document; None when the statement is not of the fast shape (run it the
    general way then). Raises what mongomock raises (a duplicate key)."""
    spec = _helpers.patch_datetime_awareness_in_document(spec)
    update = parse_update(spec, document)
    if update is None:
        return None
    store = sync._store
    if update.key not in store:
        return None  # nothing to update: an upsert inserts, or nothing matches
    doc = store[update.key]
    if type(doc) is not dict:
        return None
    indexes: dict[str, guard_index.ArrayIndex] = {}
    for guard in update.guards:
        if _indexed(guard.path):
            found = guard_index.lookup(store, update.key, doc, guard.path)
            if found is not None:
                indexes[guard.path] = found
    if not _matches(update, doc, indexes):
        return None if upsert else _reply(sync, False, False)
    if not _checked(update, doc):
        return None
    paths = [parts for _, _, parts, _ in update.ops]
    pending = [
        guard_index.Pending(store, update.key, index, paths)
        for index in guard_index.indexes_of(store, update.key, doc)
    ]
    undo = _Undo()
    try:
        changed = _apply(update, doc, undo)
        if changed and _has_unique_index(sync):
            sync._ensure_uniques(doc)  # mongomock's check (a duplicate key raises)
    except Exception:
        undo.rollback()  # the document as it was, as after mongomock's rollback
        guard_index.forget(store, update.key)
        raise
    for entry in pending:
        entry.commit()
    return _reply(sync, True, changed)
