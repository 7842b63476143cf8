"""The shape of a query: which fields a command selects by, and how, and what it sorts by.

An index serves a query by its equality fields first, then its sort, then its ranges
(docs/operations.md, "Queries and their indexes"); the values do not matter, so a shape
keeps the fields and the kind of each condition:

* **equality**: a value, ``{$eq: v}`` or ``{$in: [...]}`` (an index scans one key, or
  a few, per value);
* **range**: ``$gt``/``$gte``/``$lt``/``$lte``, and every field named inside ``$or`` /
  ``$nor`` (a keyset continuation ``{$or: [{t: {$lt: x}}, {t: x, _id: {$lt: y}}]}`` is
  a bound on those fields, served when the index holds them after its equality prefix);
* **residual**: anything else (``$ne``, ``$nin``, ``$exists``, ``$not``, ``$all``,
  ``$elemMatch``, ``$expr``, ...): filters no index bound narrows, only index keys or
  fetched documents can apply;
* **point**: ``_id`` by equality or by an id list: the ``_id`` index finds at most that
  many documents, whatever else the query says.

`shapes_of` reads every query a recorded command carries: a find's filter and sort, each
statement of an update or delete (with an update's sort), a findAndModify's query and
sort, a count's or distinct's query, an aggregate's leading ``$match`` (and a ``$sort``
right after it, which the server folds into the same index scan), and the foreign side
of every ``$lookup`` (its ``foreignField`` by equality, once per input document).

Pure functions over `RecordedCommand`s: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mindstore.backends.recorder import RecordedCommand

__all__ = [
    "EQUALITY_OPERATORS",
    "QUERY_COMMANDS",
    "RANGE_OPERATORS",
    "QueryShape",
    "field_path",
    "filter_fields",
    "shapes_of",
    "sort_key",
]

EQUALITY_OPERATORS = frozenset({"$eq", "$in"})
RANGE_OPERATORS = frozenset({"$gt", "$gte", "$lt", "$lte"})
QUERY_COMMANDS = frozenset(
    {"find", "update", "delete", "findandmodify", "count", "distinct", "aggregate"}
)
"""The commands that select documents (compared in lower case)."""
ID = "_id"
POSITION = "<n>"
NO_MATCH = "(no leading $match)"

SortKey = tuple[tuple[str, int], ...]


@dataclass(frozen=True, order=True)
class QueryShape:
    """What one query selects by, without its values.

    `command` is the wire command (``find``, ``update``, ``delete``, ``findAndModify``,
    ``count``, ``distinct``, ``aggregate``) or ``lookup`` for a ``$lookup``'s foreign
    match. `sort` is ``((field, 1 | -1), ...)`` in its order; `distinct` the field a
    distinct reads. Field paths keep their names, with array positions written ``<n>``
    (``messages.<n>.id``): no index key names a position, and a shape does not depend on
    which message a guard names.
    """

    collection: str
    command: str
    equality: frozenset[str] = frozenset()
    ranges: frozenset[str] = frozenset()
    residual: frozenset[str] = frozenset()
    sort: SortKey = ()
    point: bool = False
    distinct: str | None = None

    @property
    def fields(self) -> frozenset[str]:
        """Every field the filter names."""
        return self.equality | self.ranges | self.residual

    def describe(self) -> str:
        """One line: ``tenant =, task =, page range, sort start``."""
        parts = [f"{f} =" for f in sorted(self.equality)]
        parts += [f"{f} range" for f in sorted(self.ranges)]
        parts += [f"{f} filter" for f in sorted(self.residual)]
        text = ", ".join(parts) or "(no filter)"
        if self.distinct is not None:
            text = f"distinct {self.distinct} of " + text
        if self.sort:
            text += "; sort " + ", ".join(f + ("" if d > 0 else " desc") for f, d in self.sort)
        return text


def _is_operator_document(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(k, str) and k.startswith("$") for k in value)
    )


def _equality_value(value: Any) -> bool:
    """A value an index can look up: not an operator document."""
    return not _is_operator_document(value)


def _is_point(value: Any) -> bool:
    """`_id` by equality or by an id list."""
    if not _is_operator_document(value):
        return True
    return set(value) <= EQUALITY_OPERATORS


@dataclass
class _Fields:
    equality: set[str]
    ranges: set[str]
    residual: set[str]
    point: bool = False


def field_path(path: str) -> str:
    """`path` with its array positions written ``<n>``: ``messages.7.id`` ->
    ``messages.<n>.id``."""
    if not any(part.isdigit() for part in path.split(".")):
        return path
    return ".".join(POSITION if part.isdigit() else part for part in path.split("."))


def _collect(query: Mapping[str, Any], into: _Fields, *, branch: bool) -> None:
    for raw, value in query.items():
        if not isinstance(raw, str):
            continue
        key = field_path(raw)
        if key == "$and" and isinstance(value, (list, tuple)):
            for clause in value:
                if isinstance(clause, Mapping):
                    _collect(clause, into, branch=branch)
            continue
        if key in ("$or", "$nor") and isinstance(value, (list, tuple)):
            for clause in value:
                if isinstance(clause, Mapping):
                    _collect(clause, into, branch=True)
            continue
        if key.startswith("$"):  # $expr, $where, $text, $comment...
            into.residual.add(key)
            continue
        if branch:
            into.ranges.add(key)
            continue
        if not _is_operator_document(value):
            into.equality.add(key)
            if key == ID:
                into.point = True
            continue
        operators = set(value)
        if key == ID and _is_point(value):
            into.point = True
        if operators <= EQUALITY_OPERATORS:
            into.equality.add(key)
        elif operators <= EQUALITY_OPERATORS | RANGE_OPERATORS:
            into.ranges.add(key)
        else:
            into.residual.add(key)


def filter_fields(
    query: Mapping[str, Any] | None,
) -> tuple[frozenset[str], frozenset[str], frozenset[str], bool]:
    """(equality, range, residual fields, point) of a filter; see the module doc."""
    fields = _Fields(set(), set(), set())
    if isinstance(query, Mapping):
        _collect(query, fields, branch=False)
    # a field both equal and bounded is an equality (the index scans one key)
    ranges = fields.ranges - fields.equality
    residual = fields.residual - fields.equality - ranges
    return frozenset(fields.equality), frozenset(ranges), frozenset(residual), fields.point


def sort_key(spec: Any) -> SortKey:
    """A sort as ``((field, 1 | -1), ...)``: from a command's ``[(field, dir), ...]`` or a
    ``$sort`` document; `$meta` and ``$natural`` sorts are not index sorts and are left out."""
    items: Iterable[Any]
    if isinstance(spec, Mapping):
        items = spec.items()
    elif isinstance(spec, Sequence) and not isinstance(spec, (str, bytes)):
        items = spec
    else:
        return ()
    key: list[tuple[str, int]] = []
    for item in items:
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            continue
        field, direction = item
        if not isinstance(field, str) or field == "$natural":
            continue
        if isinstance(direction, (int, float)) and direction in (1, -1):
            key.append((field_path(field), int(direction)))
    return tuple(key)


def _shape(collection: str, command: str, query: Any, sort: Any = None) -> QueryShape:
    equality, ranges, residual, point = filter_fields(query if isinstance(query, Mapping) else {})
    return QueryShape(collection, command, equality, ranges, residual, sort_key(sort), point)


def _pipeline_shapes(collection: str, pipeline: Sequence[Any]) -> list[QueryShape]:
    stages = [s for s in pipeline if isinstance(s, Mapping) and len(s) == 1]
    found: list[QueryShape] = []
    # the server folds consecutive leading $match stages into one, and a $sort after them
    matches: list[Any] = []
    while len(matches) < len(stages) and "$match" in stages[len(matches)]:
        matches.append(stages[len(matches)]["$match"])
    following = stages[len(matches)] if len(matches) < len(stages) else {}
    sort = following.get("$sort")
    if matches or sort is not None:
        query = matches[0] if len(matches) == 1 else {"$and": matches}
        found.append(_shape(collection, "aggregate", query, sort))
    else:
        found.append(QueryShape(collection, "aggregate", residual=frozenset({NO_MATCH})))
    for stage in _lookups(pipeline):
        foreign = stage.get("from")
        field = stage.get("foreignField")
        if isinstance(foreign, str) and isinstance(field, str):
            found.append(_shape(foreign, "lookup", {field: None}))
        elif isinstance(foreign, str):  # a pipeline $lookup: its own leading $match
            inner = stage.get("pipeline")
            found.extend(
                QueryShape(foreign, "lookup", s.equality, s.ranges, s.residual, s.sort, s.point)
                for s in _pipeline_shapes(foreign, inner if isinstance(inner, list) else [])[:1]
            )
    return found


def _lookups(value: Any) -> list[Mapping[str, Any]]:
    """Every ``$lookup`` stage anywhere in a pipeline (inside ``$facet`` too)."""
    found: list[Mapping[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                if key == "$lookup" and isinstance(child, Mapping):
                    found.append(child)
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def shapes_of(command: RecordedCommand) -> list[QueryShape]:
    """Every query `command` makes the server answer (empty for inserts, index and
    collection commands, and a ``count`` without a query, which reads metadata)."""
    name = command.name
    lname = name.lower()
    collection = command.collection
    if lname not in QUERY_COMMANDS or not collection:
        return []
    if lname == "aggregate":
        return _pipeline_shapes(collection, command.pipeline or [])
    if lname in ("update", "delete"):
        writes = command.writes
        if writes is None:
            return [_shape(collection, name, command.filter)]
        return [_shape(collection, name, w.get("q"), w.get("sort")) for w in writes]
    if lname == "count" and command.filter is None:
        return []
    shape = _shape(collection, name, command.filter, command.sort)
    if lname == "distinct" and command.key:
        return [dataclasses.replace(shape, distinct=field_path(command.key))]
    return [shape]
