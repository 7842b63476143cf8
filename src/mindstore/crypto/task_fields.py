"""Sealing what is not in a message: a task's title, metadata values, own content parts
and agent-graph state (`agent_state`), and offloaded payloads (pure, keys given).

The agent state (`tasks.save_agent_state`: the context summary, the graph's messages as
dicts, the interrupt's reason and data) is sealed whole, one ciphertext bound to
``task.agent_state``: nothing on the server reads inside it."""

from __future__ import annotations

from typing import Any

from mindstore.crypto.aead import is_sealed, open_value, seal_value
from mindstore.crypto.fields import (
    OWN_FIELDS,
    KeySource,
    clear_refused,
    open_value_at,
    refuse_clear,
    seal_part,
)

__all__ = [
    "AGENT_STATE",
    "OWN_FIELDS",
    "OWN_METADATA",
    "TASK_CONTENT",
    "open_payload",
    "open_task_fields",
    "seal_payload",
    "seal_task_fields",
]

TASK_CONTENT = "task.content"
"""The path a task's own content parts are bound to (they are not in a message)."""
AGENT_STATE = "agent_state"
"""The task-document field of an agent-graph state (sealed whole)."""
PAYLOAD_FIELD = "payload"
OWN_METADATA = "mindstore_"
"""Task metadata keys of mindstore's own bookkeeping (a fork's marker, which dialog
repair finds and reads on the server): their values stay clear."""


def _seal(value: Any, keys: KeySource, context: tuple[str, str, str, str]) -> Any:
    if value is None or is_sealed(value):
        return value
    version, key = keys.current()
    return seal_value(value, key, version, context)


def seal_task_fields(
    fields: dict[str, Any], keys: KeySource, tenant: str, task_id: str
) -> dict[str, Any]:
    """Task document fields with `title`, the `metadata` values (keys clear, see
    `OWN_METADATA`), the own `content` parts and `agent_state` sealed (a new dict)."""
    out = dict(fields)
    for name in ("title", AGENT_STATE):
        if name in out:
            out[name] = _seal(out[name], keys, (tenant, task_id, "", f"task.{name}"))
    metadata = out.get("metadata")
    if type(metadata) is dict:
        out["metadata"] = {
            key: value if str(key).startswith(OWN_METADATA) else
            _seal(value, keys, (tenant, task_id, "", f"task.metadata.{key}"))
            for key, value in metadata.items()
        }  # fmt: skip
    content = out.get("content")
    if type(content) is list:
        out["content"] = [seal_part(part, keys, tenant, task_id, TASK_CONTENT)
                          if type(part) is dict else part for part in content]  # fmt: skip
    return out


def open_task_fields(
    document: dict[str, Any], keys: KeySource, tenant: str, task_id: str
) -> dict[str, Any]:
    """A task document with its title, metadata values, own content and agent state
    opened (the same dict when it holds no ciphertext; a sealed-only tenant's value in
    the clear is refused, as `fields.refuse_clear` does for messages)."""
    if keys.sealed_only:
        _refuse_clear_fields(document, tenant, task_id)
    out: dict[str, Any] | None = None
    for name in ("title", "metadata", AGENT_STATE):
        if name in document:
            opened = open_value_at(document[name], f"task.{name}", keys, tenant, task_id)
            if opened is not document[name]:
                out = out if out is not None else dict(document)
                out[name] = opened
    content = document.get("content")
    if type(content) is list:
        parts = [open_value_at(part, TASK_CONTENT, keys, tenant, task_id)
                 if type(part) is dict else part for part in content]  # fmt: skip
        if any(a is not b for a, b in zip(parts, content, strict=True)):
            out = out if out is not None else dict(document)
            out["content"] = parts
    return document if out is None else out


def _refuse_clear_fields(document: dict[str, Any], tenant: str, task_id: str) -> None:
    def clear(value: Any) -> bool:
        return value is not None and not is_sealed(value)

    for name in ("title", AGENT_STATE):
        if clear(document.get(name)):
            raise clear_refused(f"task.{name} of task {task_id!r}", tenant)
    metadata = document.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        raise clear_refused(f"task.metadata of task {task_id!r}", tenant)
    for key, value in (metadata or {}).items():
        if not str(key).startswith(OWN_METADATA) and clear(value):
            raise clear_refused(f"task.metadata.{key} of task {task_id!r}", tenant)
    content = document.get("content")
    for part in content if type(content) is list else []:
        if type(part) is dict:
            refuse_clear({"content": [part]}, tenant, task_id)
        elif clear(part):
            raise clear_refused(f"{TASK_CONTENT} of task {task_id!r}", tenant)


def seal_payload(data: Any, keys: KeySource, tenant: str, task_id: str, payload_id: str) -> Any:
    """An offloaded payload's data, bound to its payload id (which names its tenant,
    task, message, path and content hash)."""
    return _seal(data, keys, (tenant, task_id, payload_id, PAYLOAD_FIELD))


def open_payload(data: Any, keys: KeySource, tenant: str, task_id: str, payload_id: str) -> Any:
    if not is_sealed(data):
        if keys.sealed_only and data is not None:
            raise clear_refused(f"payload {payload_id!r} of task {task_id!r}", tenant)
        return data
    return open_value(data, keys.key, (tenant, task_id, payload_id, PAYLOAD_FIELD))
