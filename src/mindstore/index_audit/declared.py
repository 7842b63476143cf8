"""The indexes mindstore declares, read from its Beanie document models (no I/O).

`connect()` creates exactly these (`mindstore.document_models.bind_documents`): the
core's models and every registered integration's (the LangGraph saver's), each with the
``_id`` index every collection has. The index audit plans queries against this map.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pymongo import IndexModel

from .plan import ID_INDEX, IndexSpec
from .shapes import filter_fields

__all__ = ["declared_indexes", "index_spec"]


def index_spec(model: IndexModel) -> IndexSpec:
    """One `IndexModel` as an `IndexSpec`: its name, its keys in order and, for a partial
    index, the fields of its filter."""
    document = model.document
    keys = tuple((str(field), int(direction)) for field, direction in document["key"].items())
    partial = document.get("partialFilterExpression")
    fields = filter_fields(partial) if isinstance(partial, Mapping) else None
    named = frozenset().union(*fields[:3]) if fields else frozenset()
    return IndexSpec(str(document["name"]), keys, named)


def declared_indexes(models: Iterable[Any]) -> Mapping[str, tuple[IndexSpec, ...]]:
    """Collection name -> its indexes (``_id_`` first), for Beanie document classes."""
    found: dict[str, tuple[IndexSpec, ...]] = {}
    for model in models:
        settings = model.Settings
        declared = [index_spec(index) for index in getattr(settings, "indexes", None) or []]
        found[str(settings.name)] = (ID_INDEX, *declared)
    return found
