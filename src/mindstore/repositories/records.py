"""What repositories return: task headers without messages, pages, spans."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, field_validator

from mindstore.clock import as_utc as as_utc  # re-export: its former home
from mindstore.errors import ValidationError
from mindstore.ids import task_id_of
from mindstore.model.base import Timestamp
from mindstore.model.header import TaskHeader, UsageTotals
from mindstore.model.storage_form import unescape_keys

T = TypeVar("T")


class TaskRecord(BaseModel):
    """A task without its messages: what listing and header reads return."""

    id: str
    tenant: str
    owner: str | None = None
    title: str | None = None
    state: str = "running"
    created_at: datetime
    updated_at: datetime
    version: int = 0
    seq: int = 0
    size_bytes: int = 0
    level: int = 0
    current_scope: str | None = None
    usage: UsageTotals = Field(default_factory=UsageTotals)
    open_tool_call_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    model: str | None = None
    """The model of the task's current configuration, from its header (None: no config)."""

    @field_validator("created_at", "updated_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    @classmethod
    def from_document(cls, document: dict[str, Any], header: TaskHeader) -> TaskRecord:
        return cls(
            id=task_id_of(document["_id"]),
            tenant=document["tenant"],
            owner=document.get("owner"),
            title=document.get("title"),
            state=document.get("state", "running"),
            created_at=document["created_at"],
            updated_at=document["updated_at"],
            version=document.get("version", 0),
            seq=header.seq,
            size_bytes=header.size_bytes,
            level=header.level,
            current_scope=header.current_scope,
            usage=header.usage,
            open_tool_call_ids=[ref.id for ref in header.open_tool_calls],
            metadata=unescape_keys(document.get("metadata")),
            model=header.current_model_name(),
        )


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = None
    previous_cursor: str | None = None
    """Where a listing that gave one began (`tasks.list`: its first item): passed back with
    the opposite order, it reads the items before this page, nearest first."""


def encode_cursor(updated_at: datetime, task_id: str) -> str:
    payload = json.dumps({"u": as_utc(updated_at).isoformat(), "i": task_id})
    return base64.urlsafe_b64encode(payload.encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        updated_at = datetime.fromisoformat(payload["u"])
        task_id = payload["i"]
        if not isinstance(task_id, str):
            raise TypeError("cursor id must be a string")
        return as_utc(updated_at), task_id
    except Exception as exc:
        raise ValidationError(f"invalid page cursor: {cursor!r:.60}") from exc


class CheckpointRecord(BaseModel):
    """The latest compression checkpoint of a level, as the context view needs it."""

    message_id: str
    checkpoint_id: str = ""
    timestamp: Timestamp = 0
    compressed_message_ids: list[str] = Field(default_factory=list)
    kept_message_ids: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    cache: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_stored(cls, message: dict[str, Any]) -> CheckpointRecord:
        checkpoint: dict[str, Any] = {}
        cache: dict[str, Any] = {}
        for part in message.get("content") or []:
            checkpoint = checkpoint or ((part.get("metadata") or {}).get("checkpoint") or {})
            cache = cache or (part.get("cache") or {})
        return cls(
            message_id=message.get("id", ""),
            checkpoint_id=checkpoint.get("checkpoint_id", ""),
            timestamp=checkpoint.get("timestamp", 0),
            compressed_message_ids=list(checkpoint.get("compressed_message_ids", [])),
            kept_message_ids=list(checkpoint.get("kept_message_ids", [])),
            metadata=checkpoint.get("metadata", {}),
            cache=cache,
        )
