"""The LangGraph saver's Beanie documents (`mindstore.integrations.langgraph`): its
checkpoints, pending writes and channel blobs, with their indexes.

They are the integration's, not the core's: importing this module (which the saver's
module does) registers them with `mindstore.document_models.register_documents`, so the
next `connect()` creates their indexes and binds them for Beanie queries. A store
connected before this module was first imported gets them at its next connect; the saver
itself reads and writes the collections directly and does not need Beanie. The
collections' names are in `mindstore.collection_names`, where the registry, backup and
erase find them without importing an integration. On a store with a keyring the
serialized bytes, sealed metadata values and the fingerprint chain are ciphertexts (BSON
binaries, still `bytes`; `mindstore.crypto.integration_fields` says which).
"""

from __future__ import annotations

from typing import Any

import pymongo
from beanie import Document
from pydantic import Field
from pymongo import IndexModel

from mindstore.collection_names import LANGGRAPH_BLOBS, LANGGRAPH_CHECKPOINTS, LANGGRAPH_WRITES
from mindstore.document_models import register_documents

__all__ = [
    "LANGGRAPH_DOCUMENT_MODELS",
    "LangGraphBlobDoc",
    "LangGraphCheckpointDoc",
    "LangGraphWriteDoc",
]


class LangGraphCheckpointDoc(Document):
    """One LangGraph checkpoint (`mindstore.integrations.langgraph`), without its channel
    values: `_id` = "<tenant>/<thread>/<namespace>/<checkpoint id>" (see `langgraph_keys`);
    the `messages` channel is a count of a task's messages (`ms`), other channels are blobs."""

    id: str  # type: ignore[assignment]
    tenant: str
    o: str | None = None  # owner, on an owner-scoped view
    th: str | None = None  # the thread id, when the key holds a hash of it
    ns: str | None = None  # the namespace, when not the root
    p: str | None = None  # parent checkpoint id
    c: list[Any] = Field(default_factory=list)  # [serde type, bytes] of the checkpoint
    md: dict[str, Any] | None = None  # metadata (filterable), or
    mdb: list[Any] | None = None  # [serde type, bytes] when not storable as a document
    ms: dict[str, Any] | None = None  # messages: task, count, fingerprint chain
    b: dict[str, str] | None = None  # channel -> the checkpoint whose blob holds its value
    iv: dict[str, Any] | None = None  # small channel values, inline

    class Settings:
        name = LANGGRAPH_CHECKPOINTS
        use_state_management = False
        indexes = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_id"
            ),
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("md.run_id", pymongo.ASCENDING)], name="tenant_run"
            ),
            IndexModel(
                [
                    ("tenant", pymongo.ASCENDING),
                    ("o", pymongo.ASCENDING),
                    ("_id", pymongo.ASCENDING),
                ],
                name="tenant_owner_id",
            ),
        ]


class LangGraphWriteDoc(Document):
    """One task's pending writes on one checkpoint: `_id` = "<checkpoint key>/<task id>",
    `w` = [[index, channel, serde type, bytes], ...]."""

    id: str  # type: ignore[assignment]
    tenant: str
    p: str | None = None  # task path
    w: list[Any] = Field(default_factory=list)
    v: int | None = None  # change counter, set by the first change

    class Settings:
        name = LANGGRAPH_WRITES
        use_state_management = False
        indexes = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_id"
            ),
        ]


class LangGraphBlobDoc(Document):
    """One version of one channel's value, written once and shared by every checkpoint
    holding that version.

    `_id` = "<tenant>/<thread>/<namespace>/<writer checkpoint id>~<channel>".
    """

    id: str  # type: ignore[assignment]
    tenant: str
    t: str = ""  # serde type
    b: bytes = b""

    class Settings:
        name = LANGGRAPH_BLOBS
        use_state_management = False
        indexes = [
            IndexModel(
                [("tenant", pymongo.ASCENDING), ("_id", pymongo.ASCENDING)], name="tenant_id"
            ),
        ]


LANGGRAPH_DOCUMENT_MODELS: list[type[Document]] = [
    LangGraphCheckpointDoc,
    LangGraphWriteDoc,
    LangGraphBlobDoc,
]

register_documents(*LANGGRAPH_DOCUMENT_MODELS)
