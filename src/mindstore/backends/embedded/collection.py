"""`EmbeddedCollection`: pymongo's `AsyncCollection` surface over a mongomock collection.

Assembled from one mixin per concern; this module adds what concerns the collection as a
whole (drop, rename, options) and what the embedded backend cannot do (change streams,
raw batches), which raises `NotImplementedError` rather than pretending.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from .bulk import BulkWrites
from .find_and_modify import FindAndModify
from .indexes import Indexes
from .reads import Reads

__all__ = ["EmbeddedCollection"]


class EmbeddedCollection(Reads, BulkWrites, FindAndModify, Indexes):
    """pymongo `AsyncCollection` surface over a mongomock collection."""

    def with_options(self, *args: Any, **kwargs: Any) -> EmbeddedCollection:
        return self

    def __getitem__(self, name: str) -> EmbeddedCollection:
        return cast(EmbeddedCollection, self._database.get_collection(f"{self._name}.{name}"))

    async def drop(
        self, session: Any = None, comment: Any = None, encrypted_fields: Any = None
    ) -> None:
        await self._database.drop_collection(self._name)

    async def rename(self, new_name: str, session: Any = None, **kwargs: Any) -> EmbeddedCollection:
        await asyncio.sleep(0)
        with self.lock:
            self._sync.rename(new_name, **{k: v for k, v in kwargs.items() if k == "dropTarget"})
            self._database.forget_collection(self._name)
            self._database.forget_collection(new_name)
            return cast(EmbeddedCollection, self._database.get_collection(new_name))

    async def options(self, session: Any = None, comment: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        with self.lock:
            return dict(self._sync.options())

    async def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("change streams are not available on the embedded backend")

    async def find_raw_batches(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("find_raw_batches is not available on the embedded backend")
