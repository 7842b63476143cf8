"""Folding the per-collection runs of a report over paged tasks (pure, no I/O).

`mindstore.pipelines.analytics_pages` says which stages run where. Here the rows of the
runs are merged: `merge_groups` combines rows with the same `_id` by the accumulators of
the `$group` that produced them (`$sum` adds, `$max`/`$min` keep the extreme, nulls
ignored, mixed types ordered as BSON orders them), and `run_local` runs the remaining
stages over merged rows with the embedded backend's aggregation engine (the same engine
the embedded backend answers every report with), so no stage is written twice.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["merge_groups", "run_local"]

_ACCUMULATORS = frozenset({"$sum", "$max", "$min"})


def _frozen(value: Any) -> Any:
    """A hashable form of a group key. A null or missing key field is dropped: MongoDB and
    the embedded backend differ on keeping a missing group key (see `folding`)."""
    if isinstance(value, Mapping):
        return ("{}", tuple((k, _frozen(v)) for k, v in value.items() if v is not None))
    if isinstance(value, (list, tuple)):
        return ("[]", tuple(_frozen(v) for v in value))
    return value


def _rank(value: Any) -> int:
    """BSON comparison order of the types group values take."""
    if value is None:
        return 0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return 2
    if isinstance(value, Mapping):
        return 3
    if isinstance(value, (list, tuple)):
        return 4
    if isinstance(value, bool):
        return 8
    if isinstance(value, _dt.datetime):
        return 9
    return 10


def _extreme(op: str, left: Any, right: Any) -> Any:
    if left is None:
        return right
    if right is None:
        return left
    a, b = (_rank(left), left), (_rank(right), right)
    if a[0] != b[0]:
        bigger = left if a[0] > b[0] else right
    else:
        try:
            bigger = left if left >= right else right
        except TypeError:
            bigger = left
    if op == "$max":
        return bigger
    return right if bigger is left else left


def _add(left: Any, right: Any) -> Any:
    numbers = [v for v in (left, right) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numbers) if numbers else 0


def _operators(group: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for name, spec in group.items():
        if name == "_id":
            continue
        op = next(iter(spec)) if isinstance(spec, Mapping) and len(spec) == 1 else None
        if op not in _ACCUMULATORS:
            raise ValueError(f"cannot merge the accumulator of {name!r}: {spec!r:.80}")
        out[name] = op
    return out


def merge_groups(
    rows: Iterable[Mapping[str, Any]], group: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Rows of several runs of one `$group` (same `_id` spec), merged into one row per key."""
    operators = _operators(group)
    merged: dict[Any, dict[str, Any]] = {}
    for row in rows:
        key = _frozen(row.get("_id"))
        current = merged.get(key)
        if current is None:
            merged[key] = dict(row)
            continue
        for name, op in operators.items():
            left, right = current.get(name), row.get(name)
            current[name] = _add(left, right) if op == "$sum" else _extreme(op, left, right)
    return list(merged.values())


def run_local(
    rows: Iterable[Mapping[str, Any]], stages: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run aggregation `stages` over `rows` in process (no database). The engine is
    imported here, only when a paged task needs it: a server user never loads it else."""
    documents = [dict(row) for row in rows]
    if not stages:
        return documents
    import mongomock.aggregate  # lazy: see above

    process = mongomock.aggregate.process_pipeline
    return list(process(documents, None, list(stages), None))  # type: ignore[no-untyped-call]
