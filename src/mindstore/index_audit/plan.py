"""Which declared index serves a query shape, or why none does.

The rule a server's planner follows for a bounded index scan (equality, sort, range):

1. **point**: ``_id`` by equality or an id list is served by the ``_id`` index, whatever
   else the filter says (at most that many documents are read, and sorted in memory);
2. otherwise an index serves the shape when
   * its leading keys are exactly the shape's equality fields (in any order): the scan
     reads one key range, the documents those values select;
   * the sort's fields (those not fixed by an equality) come next, in the index's order,
     every direction as declared or every one reversed: no in-memory sort;
   * without a sort, a range bounds the key right after the equality prefix (else the
     scan reads every key the prefix selects);
   * every range and residual field is among the index's keys after its equality prefix:
     bounds or key filters, no document is fetched only to be dropped;
   * a partial index (`IndexSpec.partial`) only for a shape that names its filter's
     fields, which the index's membership then satisfies;
3. a ``distinct`` reads its field in index order, as a sort on it would: served by an
   index holding the field right after the equality prefix (without a filter: leading with
   it), from one value to the next.

An equality field outside the index's prefix, or a filter field outside the index,
makes the server read more than the query selects: a **scan** (of the collection, or of
every document the prefix selects). A sort the index does not hold is an **in-memory
sort** of everything the filter selects. `serving_index` names the index, or the
problems of the closest one.

Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from .shapes import ID, QueryShape, SortKey

__all__ = ["ID_INDEX", "IndexSpec", "Outcome", "Verdict", "serving_index"]


@dataclass(frozen=True, order=True)
class IndexSpec:
    """One declared index: its name and ``((field, 1 | -1), ...)`` keys in order."""

    name: str
    keys: SortKey
    partial: frozenset[str] = frozenset()
    """The fields of a partial index's filter (``partialFilterExpression``): it holds only
    the documents that match it, so only a query naming those fields can use it."""

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(field for field, _ in self.keys)

    def describe(self) -> str:
        keys = ", ".join(f + ("" if d > 0 else " desc") for f, d in self.keys)
        where = f" where {', '.join(sorted(self.partial))}" if self.partial else ""
        return f"`{self.name}` ({keys}){where}"


ID_INDEX = IndexSpec("_id_", ((ID, 1),))
"""The index every collection has."""


class Outcome(StrEnum):
    """How a shape is answered."""

    POINT = "point"  # by _id (a value or a list)
    SERVED = "served"  # a bounded index scan, sorted by the index
    SCAN = "scan"  # reads documents the query does not select
    SORT = "in-memory sort"  # the right documents, sorted after reading them


@dataclass(frozen=True)
class Verdict:
    """The index that serves a shape (`problems` empty), or the closest one and why it
    does not (`index` None when no index narrows the query at all)."""

    outcome: Outcome
    index: IndexSpec | None
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.POINT, Outcome.SERVED)


@dataclass(frozen=True)
class _Fit:
    index: IndexSpec
    prefix: int
    scan: tuple[str, ...]
    sort: tuple[str, ...]
    position: int

    @property
    def rank(self) -> tuple[int, int, int, int]:
        # fewest scans, then fewest sort problems, the longest prefix, the first declared
        return (len(self.scan), len(self.sort), -self.prefix, self.position)


def _equality_prefix(index: IndexSpec, equality: frozenset[str]) -> int:
    length = 0
    for field in index.fields:
        if field not in equality:
            break
        length += 1
    return length


def _sort_fits(index: IndexSpec, start: int, sort: SortKey) -> bool:
    held = index.keys[start : start + len(sort)]
    if [f for f, _ in held] != [f for f, _ in sort]:
        return False
    same = all(d == hd for (_, d), (_, hd) in zip(sort, held, strict=True))
    reversed_ = all(d == -hd for (_, d), (_, hd) in zip(sort, held, strict=True))
    return same or reversed_


def _fit(shape: QueryShape, index: IndexSpec, position: int) -> _Fit | None:
    if not index.partial <= shape.fields:
        return None  # the index lacks documents the query may select
    prefix = _equality_prefix(index, shape.equality)
    fields = index.fields
    after = set(fields[prefix:])
    ranges = shape.ranges - index.partial
    # a distinct reads its field's values in index order: as a sort on that field
    wanted = shape.sort if shape.distinct is None else ((shape.distinct, 1),)
    sort = tuple((f, d) for f, d in wanted if f not in shape.equality)
    sorted_by_index = not sort or _sort_fits(index, prefix, sort)
    scan: list[str] = []
    if prefix == 0 and not (fields[0] in ranges or (sort and sorted_by_index)):
        scan.append(f"no equality or range on {fields[0]}, the index's first key")
    missing = sorted(shape.equality - set(fields[:prefix]))
    if missing:
        scan.append("equality on " + ", ".join(missing) + " is not in its equality prefix")
    outside = sorted((ranges | shape.residual) - index.partial - after)
    if outside:
        scan.append("filter on " + ", ".join(outside) + " is not among its keys")
    if (
        ranges
        and 0 < prefix < len(fields)
        and fields[prefix] not in ranges
        and not (sort and sorted_by_index)
    ):
        shown = ", ".join(sorted(ranges))
        scan.append(f"range on {shown} does not bound {fields[prefix]}, the key after its prefix")
    sort_problems: list[str] = []
    if not sorted_by_index:
        shown = ", ".join(f + ("" if d > 0 else " desc") for f, d in sort)
        sort_problems.append(f"sort ({shown}) does not follow its equality prefix")
    return _Fit(index, prefix, tuple(scan), tuple(sort_problems), position)


def serving_index(shape: QueryShape, indexes: Iterable[IndexSpec]) -> Verdict:
    """The verdict for `shape` over a collection's `indexes` (``_id_`` is always added)."""
    candidates = list(indexes)
    if ID_INDEX not in candidates and not any(i.name == ID_INDEX.name for i in candidates):
        candidates.insert(0, ID_INDEX)
    if shape.point:
        return Verdict(Outcome.POINT, next(i for i in candidates if i.name == ID_INDEX.name))
    if not shape.fields and not shape.sort and shape.distinct is None:
        return Verdict(Outcome.SCAN, None, ("no filter: every document is read",))
    fitting = (_fit(shape, index, position) for position, index in enumerate(candidates))
    fits = sorted((f for f in fitting if f is not None), key=lambda f: f.rank)
    best = fits[0]
    if not best.scan and not best.sort:
        return Verdict(Outcome.SERVED, best.index)
    narrowing = best.prefix > 0 or (
        bool(best.index.fields) and best.index.fields[0] in shape.ranges
    )
    outcome = Outcome.SCAN if best.scan else Outcome.SORT
    return Verdict(outcome, best.index if narrowing else None, best.scan + best.sort)
