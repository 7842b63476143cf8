"""`$range` in aggregation expressions, which mongomock lists as not implemented, with
MongoDB's semantics.

Analytics over paged tasks names a task's visible pages on the server by their numbers,
``{"$range": [0, "$pages"]}`` (`mindstore.paged_history.stages`). MongoDB's rules, as its
manual gives them: two or three arguments (start, end, step; step 1 by default), each a
number representable as a 32-bit integer (an integral double counts), step not 0; the
result holds start, start + step, ... up to but not including end. Anything else is an
error.

`install()` wraps mongomock's array-operator handler once per process; `int_range` is the
pure part.
"""

from __future__ import annotations

from typing import Any

from mongomock import OperationFailure
from mongomock import aggregate as _untyped_aggregate

from .int32 import int32

__all__ = ["install", "int_range"]

_aggregate: Any = _untyped_aggregate


def int_range(arguments: Any) -> list[int]:
    """`$range` of already evaluated `arguments` ([start, end] or [start, end, step])."""
    if not isinstance(arguments, (list, tuple)) or len(arguments) not in (2, 3):
        raise OperationFailure("$range requires two or three arguments")
    start = int32(arguments[0], "$range", "starting value")
    end = int32(arguments[1], "$range", "ending value")
    step = int32(arguments[2], "$range", "step value") if len(arguments) == 3 else 1
    if step == 0:
        raise OperationFailure("$range requires a non-zero step value")
    return list(range(start, end, step))


def install() -> None:
    """Make mongomock's expression parser know `$range` (once per process)."""
    parser = _aggregate._Parser
    if getattr(parser, "_mindstore_range", False):
        return
    handle = parser._handle_array_operator

    def handle_array_operator(self: Any, operator: str, value: Any) -> Any:
        if operator == "$range":
            return int_range(list(self.parse_many(value)) if isinstance(value, list) else value)
        return handle(self, operator, value)

    parser._handle_array_operator = handle_array_operator
    parser._mindstore_range = True
