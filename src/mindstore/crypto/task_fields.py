"""Sealing what is not in a message: a task's title, metadata values, own content parts
and agent-graph state (`agent_state`), and offloaded payloads (pure, keys given).

The agent state (`tasks.save_agent_state`: the context summary, the graph's messages as
dicts, the interrupt's reason and data) is sealed whole, one ciphertext bound to
``task.agent_state``: nothing on the server reads inside it. A task's own content part is
bound to its index (``task.content.1.text``): two parts swapped in the database do not
open (format 1 bound them all to ``task.content``, without the index; such ciphertexts
still open until the sweep re-seals them, `aead.open_value`).

An offloaded payload is bound to its id and to the message and path it was offloaded from
(format 1: to its id alone, which derives from that place, `payloads.payload_id`; a
payload moved to another tenant by a restore gets an id that does not):
`payload_places` finds where the opened documents refer to each payload, and
`open_payload` refuses a payload referred to from anywhere else (a marker copied into
another message or field)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mindstore.crypto.aead import LEGACY_FORMAT, is_sealed, open_value, seal_value, sealed_format
from mindstore.crypto.fields import (
    OWN_FIELDS,
    KeySource,
    clear_refused,
    open_value_at,
    refuse_clear,
    seal_part,
)
from mindstore.errors import CryptoError
from mindstore.payloads import MARKER_PREFIX, payload_id

__all__ = [
    "AGENT_STATE",
    "OWN_FIELDS",
    "OWN_METADATA",
    "TASK_CONTENT",
    "open_payload",
    "open_task_fields",
    "payload_places",
    "seal_payload",
    "seal_task_fields",
]

TASK_CONTENT = "task.content"
"""The path a task's own content parts are bound to (they are not in a message), followed
by the part's index (``task.content.0``; format 1: without it)."""
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
        out["content"] = [seal_part(part, keys, tenant, task_id, f"{TASK_CONTENT}.{index}")
                          if type(part) is dict else part
                          for index, part in enumerate(content)]  # fmt: skip
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
        parts = [open_value_at(part, f"{TASK_CONTENT}.{index}", keys, tenant, task_id,
                               legacy_path=TASK_CONTENT)
                 if type(part) is dict else part
                 for index, part in enumerate(content)]  # fmt: skip
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


def _payload_context(
    tenant: str, task_id: str, key: str, message_id: str, path: str
) -> tuple[str, str, str, str]:
    """A payload's binding: its id and the place it was offloaded from (format 2; format 1
    bound the id alone, `PAYLOAD_FIELD`)."""
    return (tenant, task_id, key, f"{PAYLOAD_FIELD}@{json.dumps([message_id, path])}")


def seal_payload(
    data: Any,
    keys: KeySource,
    tenant: str,
    task_id: str,
    payload_id: str,
    *,
    message_id: str,
    path: str,
) -> Any:
    """An offloaded payload's data, bound to its payload id and to the message and path it
    was offloaded from (the payload document's clear `message_id` and `path`)."""
    return _seal(data, keys, _payload_context(tenant, task_id, payload_id, message_id, path))


def open_payload(
    data: Any,
    keys: KeySource,
    tenant: str,
    task_id: str,
    payload_id: str,
    *,
    message_id: Any,
    path: Any,
    places: Iterable[tuple[str, str]] | None = None,
    sha256: Any = None,
) -> Any:
    """An offloaded payload's data (`message_id`, `path`, `sha256`: its document's clear
    fields). `places`: the (message id, path) pairs that refer to it (`payload_places`);
    each must be the place it was offloaded from, else `CryptoError`: for format 2 the
    place it is sealed for, for format 1 the place its id derives from (with `sha256`, its
    content hash). None: not checked (the sweep re-seals a payload without the messages).
    A payload in the clear is not checked: anyone can write one, and a sealed-only tenant
    refuses it."""
    if not is_sealed(data):
        if keys.sealed_only and data is not None:
            raise clear_refused(f"payload {payload_id!r} of task {task_id!r}", tenant)
        return data
    legacy = sealed_format(data) == LEGACY_FORMAT
    for place in places or ():
        if (
            place == (message_id, path)
            if not legacy
            else _offloaded_at(payload_id, tenant, task_id, *place, sha256)
        ):
            continue
        raise CryptoError(
            f"payload {payload_id!r} of task {task_id!r} (tenant {tenant!r}) is referred "
            f"to from {place[1] or 'value'} of message {place[0]!r}, where it was not "
            "offloaded: a marker copied there"
        )
    return open_value(
        data,
        keys.key,
        _payload_context(tenant, task_id, payload_id, str(message_id), str(path)),
        legacy_context=(tenant, task_id, payload_id, PAYLOAD_FIELD),
        legacy=keys.legacy_bindings,
    )


def _offloaded_at(
    key: str, tenant: str, task_id: str, message_id: str, path: str, sha256: Any
) -> bool:
    return type(sha256) is str and payload_id(tenant, task_id, message_id, path, sha256) == key


def payload_places(documents: Iterable[Any]) -> dict[str, set[tuple[str, str]]]:
    """Where stored message documents (opened, keys as stored) refer to payloads: each
    payload id with the (message id, path in the message) of every marker naming it, the
    place the offloader derived the id from (`payloads.Offloader.transform_value`)."""
    found: dict[str, set[tuple[str, str]]] = {}

    def walk(value: Any, message_id: str, path: str) -> None:
        if type(value) is str:
            if value.startswith(MARKER_PREFIX):
                found.setdefault(value[len(MARKER_PREFIX) :], set()).add((message_id, path))
        elif type(value) is dict:
            for name, item in value.items():
                walk(item, message_id, f"{path}.{name}" if path else str(name))
        elif type(value) is list:
            for index, item in enumerate(value):
                walk(item, message_id, f"{path}.{index}" if path else str(index))

    for document in documents:
        if type(document) is dict:
            walk(document, str(document.get("id", "")), "")
    return found
