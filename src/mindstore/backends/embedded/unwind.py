"""`$unwind` of a top-level array without copying the array once per element.

mongomock's `$unwind` deep-copies the whole document for every element of the array it
unwinds, the array included: a document holding N looked-up pages (`$lookup` then
`$unwind`, as the paged context window does, `mindstore.pipelines.context_pages`) costs N
copies of all N pages. MongoDB streams the elements. Here, for an array in a top-level
field, each output document is a deep copy of the other fields with its own element, in
the same field order: the same documents, each independent of the others, as mongomock's
(an element is in one output document only; the stage's input documents are the
pipeline's own copies, dropped after it). Any other case (a dotted path, a value that is
not a non-empty list) goes to mongomock's own code.

`install()` replaces mongomock's `$unwind` handler once per process; `unwind` is the part
that runs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from mongomock import aggregate as _untyped_aggregate

__all__ = ["install", "unwind"]

_aggregate: Any = _untyped_aggregate
Handler = Callable[[Any, Any, Any], Any]


def unwind(documents: Iterable[dict[str, Any]], options: Any, fallback: Handler) -> list[Any]:
    """The `$unwind` of `documents` (see the module docstring); `fallback` is mongomock's."""
    spec = options if isinstance(options, dict) else {"path": options}
    path = spec.get("path")
    if not isinstance(path, str) or not path.startswith("$") or "." in path:
        return list(fallback(documents, None, options))
    field, index_field = path[1:], spec.get("includeArrayIndex")
    out: list[Any] = []
    for document in documents:
        items = document.get(field)
        if not isinstance(items, list) or not items:
            out += fallback([document], None, options)
            continue
        for index, item in enumerate(items):
            row = {
                key: item if key == field else copy.deepcopy(value)
                for key, value in document.items()
            }
            if index_field:
                row = _aggregate.helpers.set_value_by_dot(row, index_field, index)
            out.append(row)
    return out


def install() -> None:
    """Make mongomock's pipeline use `unwind` for `$unwind` (once per process)."""
    handlers = _aggregate._PIPELINE_HANDLERS
    original = handlers["$unwind"]
    if getattr(original, "_mindstore_unwind", False):
        return

    def handle(documents: Any, database: Any, options: Any) -> list[Any]:
        return unwind(documents, options, original)

    handle._mindstore_unwind = True  # type: ignore[attr-defined]
    handlers["$unwind"] = handle
