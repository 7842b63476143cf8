"""The stored shape of a memory item and its indexes (a Beanie document among the core's
models, `mindstore.document_models`): ``memory_items``, one document per (tenant,
namespace, key), `memory.rules` and `memory.items` say what each field holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import pymongo
from beanie import Document
from pymongo import IndexModel

from mindstore.collection_names import MEMORY_ITEMS

__all__ = ["MemoryItemDoc"]


def _index(name: str, *fields: str) -> IndexModel:
    return IndexModel([(f, pymongo.ASCENDING) for f in fields], name=name)


class MemoryItemDoc(Document):
    """One memory item: `_id` = ``<tenant>/<hash of (namespace, key)>``; ``ns`` its
    namespace's labels, ``p`` their path (``a.b.``), ``k`` its key, ``owner`` its owner (an
    owner scope's, or the label the store names as the owner's), ``v`` its value (JSON
    bytes, sealed under a keyring), ``e``/``d`` its embeddings (float32 bytes, sealed) and
    their dimensions, ``c``/``updated_at`` created and updated, ``t`` its TTL in minutes and ``x``
    when it expires, ``z`` set when its values are ciphertexts."""

    id: str  # type: ignore[assignment]
    tenant: str
    ns: list[str]
    p: str
    k: str
    owner: str | None = None
    v: bytes = b""
    e: bytes | None = None
    d: int | None = None
    c: datetime | None = None
    updated_at: datetime | None = None
    t: float | None = None
    x: datetime | None = None
    z: bool | None = None

    class Settings:
        name = MEMORY_ITEMS
        use_state_management = False
        indexes: ClassVar[list[IndexModel]] = [
            _index("tenant_1__id_1", "tenant", "_id"),
            _index("tenant_path", "tenant", "p"),
            _index("tenant_owner_path", "tenant", "owner", "p"),
            _index("tenant_owner_id", "tenant", "owner", "_id"),
            _index("tenant_expiry", "tenant", "x"),
            _index("tenant_updated", "tenant", "updated_at"),
            _index("tenant_owner_updated", "tenant", "owner", "updated_at"),  # owner retention
        ]
