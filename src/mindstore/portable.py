"""The portable operator subset (DESIGN.md), as data, and an auditor for recorded commands.

Everything mindstore sends must behave the same on the embedded backend and on MongoDB
>= 6. The suite records the commands it sends and `audit()` checks each one: every `$`
operator must be in `ALLOWED`, and every single-document write on `tasks` or
`dialog_nodes` must name `tenant` and `_id` in its filter, so it targets one shard on a
cluster sharded on `(tenant, _id)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from mindstore.backends.recorder import RecordedCommand

DESIGN_SUBSET = frozenset({
    "$push", "$each", "$slice", "$inc", "$set", "$unset", "$ne", "$unwind", "$match", "$group",
    "$project", "$filter", "$map", "$size", "$cond", "$lookup", "$sort", "$limit", "$count",
    "$not", "$eq",
})  # fmt: skip
"""Listed in DESIGN.md's portable subset."""

STANDARD_EXTRAS = frozenset({
    # query operators, standard since MongoDB 3.x, used by mindstore and tested on both paths
    "$in", "$nin", "$exists", "$gt", "$gte", "$lt", "$lte", "$and", "$or",
    # expression/accumulator operators used by pipelines (standard since MongoDB 3.x-4.x)
    "$sum", "$min", "$max", "$first", "$last", "$avg", "$push", "$arrayElemAt", "$ifNull",
    "$add", "$subtract", "$skip", "$addFields", "$indexOfArray", "$concatArrays",
    # update operator used by restore (insert-if-missing)
    "$setOnInsert",
})  # fmt: skip
"""Outside DESIGN.md's list, but standard MongoDB >= 6 operators that the suite runs on the
embedded backend; the audit test shows which of them the code really sends."""

ALLOWED = DESIGN_SUBSET | STANDARD_EXTRAS

SHARDED_COLLECTIONS = frozenset({"tasks", "dialog_nodes"})
"""Collections sharded on (tenant, _id): updates must name both; deletes at least the
tenant (a tenant-wide delete, as erase does, is a legitimate multi-shard admin write)."""

FIELD_PATH_PREFIX = "$$"


@dataclass(frozen=True)
class Violation:
    command: str
    collection: str | None
    problem: str


def operators(value: Any) -> set[str]:
    """Every `$operator` key anywhere in a filter, update, projection or pipeline."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and key.startswith("$") and not key.startswith(FIELD_PATH_PREFIX):
                    found.add(key)
                stack.append(child)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def check_command(command: RecordedCommand) -> list[Violation]:
    problems: list[Violation] = []
    parts: list[Any] = [command.filter, command.pipeline, command.projection]
    if command.name != "insert":
        parts.append(command.update)  # inserted documents hold data, not operators
    for op in sorted(operators(parts) - ALLOWED):
        problems.append(Violation(command.name, command.collection, f"operator {op} is outside the portable subset"))
    if command.collection in SHARDED_COLLECTIONS and command.name in {"update", "findAndModify", "delete"}:
        flt = command.filter or {}
        needed = {"tenant"} if command.name == "delete" else {"tenant", "_id"}
        if not needed <= set(flt):
            problems.append(Violation(command.name, command.collection,
                                      f"write filter lacks {sorted(needed - set(flt))} (shard key)"))  # fmt: skip
    return problems


def audit(commands: Iterable[RecordedCommand]) -> list[Violation]:
    return [v for command in commands for v in check_command(command)]
