"""`$slice` in aggregation expressions with computed arguments, as MongoDB has them.

mongomock takes only literal integers for the position and the count of ``{"$slice":
[array, n]}`` and ``{"$slice": [array, position, n]}``; MongoDB takes any expression that
resolves to an integer (its manual: "`<position>` can be any valid expression as long as it
resolves to an integer", the same for `<n>`). The paged context window picks each page's
share of a window on the server, ``{"$slice": ["$visible", "$$cut.start", "$$cut.count"]}``
(`mindstore.pipelines.context_paged`), so the embedded backend evaluates those arguments
first and hands mongomock the integers. MongoDB's rules: each argument a number
representable as a 32-bit integer (an integral double counts), the count of the
three-argument form positive; a null or missing array gives null. Literal arguments go
to mongomock's own code unchanged.

`install()` wraps mongomock's array-operator handler once per process; `slice_arguments`
is the pure part.
"""

from __future__ import annotations

from typing import Any

from mongomock import OperationFailure
from mongomock import aggregate as _untyped_aggregate

from .int32 import int32

__all__ = ["install", "slice_arguments"]

_aggregate: Any = _untyped_aggregate


def slice_arguments(arguments: list[Any]) -> list[int]:
    """The evaluated position and count of a `$slice` (one or two values), as integers."""
    if len(arguments) == 1:
        return [int32(arguments[0], "$slice", "count")]
    if len(arguments) != 2:
        raise OperationFailure("$slice takes at least 2 arguments, and at most 3")
    position, count = (
        int32(arguments[0], "$slice", "position"),
        int32(arguments[1], "$slice", "count"),
    )
    if count <= 0:
        raise OperationFailure(f"$slice: the count must be positive, got {count}")
    return [position, count]


def install() -> None:
    """Make mongomock's `$slice` evaluate computed arguments (once per process)."""
    parser = _aggregate._Parser
    if getattr(parser, "_mindstore_slice", False):
        return
    handle = parser._handle_array_operator

    def handle_array_operator(self: Any, operator: str, value: Any) -> Any:
        if (
            operator == "$slice"
            and isinstance(value, list)
            and 2 <= len(value) <= 3
            and not all(isinstance(v, int) and not isinstance(v, bool) for v in value[1:])
        ):
            array = self.parse(value[0])
            if array is None:
                return None
            numbers = slice_arguments([self.parse(v) for v in value[1:]])
            return handle(self, operator, [{"$literal": array}, *numbers])
        return handle(self, operator, value)

    parser._handle_array_operator = handle_array_operator
    parser._mindstore_slice = True
