"""The search index's stored shapes and indexes (Beanie documents, among the core's models).

``search_entries``: one document per indexed message (`_id` = ``<task key>/<index>``):
the tenant, task, owner, role, time, the message's postings ``p`` (``[{t: term, c:
count}]``, a multikey index led by tenant serves every lookup), its length ``n`` and its
text ``x`` for snippets (sealed under a keyring). One more per tenant, ``_id`` =
``<tenant>/``, holds its statistics (messages, terms, watermark, epoch, stemming) and a
posting of the empty term, so the one lookup a search sends returns it too.
``search_tasks``: per task (`_id` = the task's key) the version and message count it
was indexed at, and its entries' count and length (docs/search.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import pymongo
from beanie import Document
from pydantic import Field
from pymongo import IndexModel

from mindstore.collection_names import SEARCH_ENTRIES, SEARCH_TASKS

TENANT_ID = IndexModel(
    [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_1__id_1"
)
"""`(tenant, _id)`, as every sharded collection has (`mindstore.document_models`)."""

__all__ = ["SearchEntryDoc", "SearchTaskDoc"]


class SearchEntryDoc(Document):
    """One indexed message, or a tenant's statistics (see the module doc)."""

    id: str  # type: ignore[assignment]
    tenant: str
    task: str | None = None
    i: int = 0
    m: str | None = None
    r: str | None = None
    o: str | None = None
    ts: float = 0.0
    p: list[dict[str, Any]] = Field(default_factory=list)
    n: int = 0
    x: Any = None

    class Settings:
        name = SEARCH_ENTRIES
        use_state_management = False
        validate_on_save = False
        indexes: ClassVar[list[IndexModel]] = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("p.t", pymongo.ASCENDING)], name="tenant_terms"
            ),
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("task", pymongo.ASCENDING),
                    ("m", pymongo.ASCENDING),
                ],
                name="tenant_task_message",
            ),
            TENANT_ID,
        ]


class SearchTaskDoc(Document):
    """How far one task is indexed (see the module doc)."""

    id: str  # type: ignore[assignment]
    tenant: str
    v: int = 0
    s: int = 0
    d: int = 0
    l: int = 0  # noqa: E741
    u: datetime | None = None

    class Settings:
        name = SEARCH_TASKS
        use_state_management = False
        validate_on_save = False
        indexes: ClassVar[list[IndexModel]] = [TENANT_ID]
