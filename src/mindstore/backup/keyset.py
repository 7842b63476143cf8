"""Reading a collection by keyset pages on `_id`: each page one bounded, sorted query that
starts after the last `_id` of the one before (on the `(tenant, _id)` index), never one
long cursor, so a large tenant is read in steps of known size."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

PAGE = 1000
"""Documents a page at the most, unless the caller says."""


async def keyset_pages(
    collection: Any,
    query: dict[str, Any],
    projection: dict[str, Any] | None = None,
    *,
    page: int = PAGE,
) -> AsyncIterator[list[dict[str, Any]]]:
    """The documents matching `query` (`projection` only, when given), in `_id` order,
    a page at a time; the last page is the first one shorter than `page`."""
    last: Any = None
    while True:
        page_query = dict(query)
        if last is not None:
            page_query["$and"] = [{"_id": {"$gt": last}}]
        found = await collection.find(
            page_query, projection, sort=[("_id", 1)], limit=page
        ).to_list()
        yield found
        if len(found) < page:
            return
        last = found[-1]["_id"]


async def every_match(
    collection: Any, query: dict[str, Any], projection: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every document matching `query` (`projection` only), by `keyset_pages`."""
    return [
        document
        async for found in keyset_pages(collection, query, projection)
        for document in found
    ]
