"""The search index's stored shapes and indexes (Beanie documents, among the core's models).

``search_postings``: a tenant's inverted index. Each term's postings lie in blocks (`_id`
= ``<tenant>/<term>/<block>``, `postings.BLOCK_BYTES` wide in bytes of postings the
tenant's indexing wrote, so none grows without bound): ``e`` = ``[{t: ordinal, p:
<binary>}]``, one group per task, term and catch-up (split past `postings.PART_BYTES`),
the task named by its ordinal in the tenant, ``p`` its postings, varint- and delta-coded:
the message's index, the term's count and its positions among the message's words, on
which a phrase is checked (under a keyring the positions are sealed apart, ``x``). A
search names every block it needs by `_id` (terms times blocks), so one `_id` lookup
returns every posting of the query's terms, on any server and on the embedded backend
alike; a term's document frequency is its postings' count. One more document per tenant,
``_id`` = ``<tenant>/``, holds its statistics (messages, terms, watermark, epoch,
stemming, key version, stored form, bytes of postings written), and that lookup returns it
too. ``search_entries``: one document per task and chunk of consecutive messages a
catch-up indexed (`_id` = ``<task key>/<first index, 10 digits>``, `search.entries`): the
last index ``l``, the indexes held ``g`` (varint gaps, in clear), their length ``n``, the
owner ``o``, the task's ordinal ``r``, the messages' table ``m`` (length, role, time: what
a search joins postings with, in clear), and ``z``: each message's index, id and text for
snippets, zlib-compressed (sealed whole under a keyring). ``search_tasks``: per task
(`_id` = the task's key) its mark: the version and message count it was indexed at, its
entries' count and length, and the claim of a search indexing it (``w`` a token, empty
once released, ``wa`` its time), and its ordinal ``r``; beside it (``<key>~terms``) its
terms (compressed, one value per catch-up), the blocks its groups went to and its ordinal
(docs/search.md). ``search_vectors``: one document per message embedded (named ``<task
key>/<index>``, as its entry is), its vector and what the scope filters read
(`search.vectors`; docs/search.md).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import pymongo
from beanie import Document
from pydantic import Field
from pymongo import IndexModel

from mindstore.collection_names import (
    SEARCH_ENTRIES,
    SEARCH_POSTINGS,
    SEARCH_TASKS,
    SEARCH_VECTORS,
)

__all__ = ["SearchEntryDoc", "SearchPostingsDoc", "SearchTaskDoc", "SearchVectorDoc"]

TENANT_ID = IndexModel(
    [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_1__id_1"
)
"""`(tenant, _id)`, as every sharded collection has (`mindstore.document_models`)."""


class SearchPostingsDoc(Document):
    """One block of one term's postings (see the module doc)."""

    id: str  # type: ignore[assignment]
    tenant: str
    e: list[dict[str, Any]] = Field(default_factory=list)

    class Settings:
        name = SEARCH_POSTINGS
        use_state_management = False
        validate_on_save = False
        indexes: ClassVar[list[IndexModel]] = [TENANT_ID]


class SearchEntryDoc(Document):
    """One chunk of a task's indexed messages (see the module doc)."""

    id: str  # type: ignore[assignment]
    tenant: str
    task: str | None = None
    o: str | None = None
    l: int = 0  # noqa: E741
    g: Any = None
    n: int = 0
    r: int = 0
    m: Any = None
    z: Any = None

    class Settings:
        name = SEARCH_ENTRIES
        use_state_management = False
        validate_on_save = False
        indexes: ClassVar[list[IndexModel]] = [
            # a snippet's chunk: a range of `_id`s, its last index `l` checked on the keys
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("_id", pymongo.ASCENDING),
                    ("l", pymongo.ASCENDING),
                ],
                name="tenant_id_last",
            ),
            # a search's tables: the chunks of the tasks its postings name, by ordinal
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("r", pymongo.ASCENDING)],
                name="tenant_ordinal",
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
    k: list[Any] = Field(default_factory=list)
    r: int | None = None
    u: datetime | None = None
    w: str = ""
    wa: datetime | None = None

    class Settings:
        name = SEARCH_TASKS
        use_state_management = False
        validate_on_save = False
        indexes: ClassVar[list[IndexModel]] = [TENANT_ID]


class SearchVectorDoc(Document):
    """One message's vector (see the module doc and `mindstore.search.vectors`)."""

    id: str  # type: ignore[assignment]
    tenant: str
    task: str
    o: str | None = None
    r: str = ""
    t: int = 0
    e: str = ""
    v: Any = None

    class Settings:
        name = SEARCH_VECTORS
        use_state_management = False
        validate_on_save = False
        indexes: ClassVar[list[IndexModel]] = [
            # a ranking reads its model's vectors only (the tenant's, of one tag)
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("e", pymongo.ASCENDING),
                    ("_id", pymongo.ASCENDING),
                ],
                name="tenant_model",
            ),
            TENANT_ID,
        ]
