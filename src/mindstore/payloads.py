"""Large values live outside the message array.

An image, an audio clip or a 2 MB tool result inside the task document would make every
read of the header heavier and bring the document toward MongoDB's 16 MiB limit. Any
string or binary value above the threshold is replaced by a short marker string and stored
in the `payloads` collection; reads put it back. Payload ids are derived from (tenant,
task, message, path, content hash), so a retried write upserts the same payload instead of
adding a second one.

A marker is a string, so user data must never look like one: every caller string that
begins with `RESERVED_PREFIX` is stored escaped, and reads resolve a marker only against
the payloads of the task being read (tenant and task id in the payload query), so knowing
another task's payload id gets a caller nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from mindstore.errors import TaskTooLarge, ValidationError

RESERVED_PREFIX = "mindstore:"
"""Stored strings that begin with this are mindstore's own: payload markers or escapes."""
MARKER_PREFIX = RESERVED_PREFIX + "payload:"
ESCAPE_PREFIX = RESERVED_PREFIX + "escaped:"
"""A caller's string that begins with `RESERVED_PREFIX` is stored behind this prefix, so no
user data can ever be read back as a marker (and `read_value` strips it again)."""
DEFAULT_THRESHOLD = 256 * 1024
MAX_PAYLOAD_BYTES = 15 * 1024 * 1024
"""The largest single value mindstore stores: one payload document, under MongoDB's 16 MiB
document limit with room for its own fields. Larger values raise `TaskTooLarge`."""


@dataclass
class PendingPayload:
    id: str
    message_id: str
    path: str
    sha256: str
    size: int
    data: str | bytes


def _utf8(value: str, path: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"invalid text at {path or 'value'}: lone surrogate at position {exc.start}"
        ) from None


def _digest(value: str | bytes) -> str:
    raw = value.encode() if isinstance(value, str) else value
    return hashlib.sha256(raw).hexdigest()


def is_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MARKER_PREFIX)


def escape_string(value: str) -> str:
    """The stored form of a caller's string (see `ESCAPE_PREFIX`)."""
    return ESCAPE_PREFIX + value if value.startswith(RESERVED_PREFIX) else value


def payload_id(tenant: str, task_id: str, message_id: str, path: str, sha256: str) -> str:
    """Deterministic, so a retried write upserts the same payload; tenant-qualified, so two
    tenants with the same task and message ids never share (or collide on) a payload."""
    seed = f"{tenant}\x00{task_id}\x00{message_id}\x00{path}\x00{sha256}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


@dataclass
class Offloader:
    """Collects the payloads of one write; the values it returns are what gets stored."""

    task_id: str
    threshold: int = DEFAULT_THRESHOLD
    tenant: str = ""
    pending: dict[str, PendingPayload] = field(default_factory=dict)

    def transform_document(self, message_doc: dict[str, Any]) -> dict[str, Any]:
        document: dict[str, Any] = self.transform_value(
            message_doc, str(message_doc.get("id", "")), ""
        )  # a dict walks back as a dict
        return document

    def transform_value(self, value: Any, message_id: str, path: str) -> Any:
        """Offload a large value, escape a caller's string that looks like ours, walk the rest.

        Every value reaching here is the caller's data (fresh from the model), never a
        stored form, so a string that begins with `RESERVED_PREFIX` is always escaped.
        """
        if isinstance(value, (str, bytes)):
            size = len(_utf8(value, path) if isinstance(value, str) else value)
            if size < self.threshold:
                return escape_string(value) if isinstance(value, str) else value
            if size > MAX_PAYLOAD_BYTES:
                raise TaskTooLarge(self.task_id, 0, size, MAX_PAYLOAD_BYTES)
            sha = _digest(value)
            key = payload_id(self.tenant, self.task_id, message_id, path, sha)
            self.pending[key] = PendingPayload(key, message_id, path, sha, size, value)
            return MARKER_PREFIX + key
        if isinstance(value, dict):
            return {
                key: self.transform_value(item, message_id, f"{path}.{key}" if path else str(key))
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [
                self.transform_value(item, message_id, f"{path}.{i}" if path else str(i))
                for i, item in enumerate(value)
            ]
        return value


def find_markers(value: Any, found: set[str]) -> None:
    """Collect the payload ids that stored values refer to."""
    if isinstance(value, str):
        if value.startswith(MARKER_PREFIX):
            found.add(value[len(MARKER_PREFIX) :])
    elif isinstance(value, dict):
        for item in value.values():
            find_markers(item, found)
    elif isinstance(value, list):
        for item in value:
            find_markers(item, found)


def read_value(value: Any, payloads: dict[str, Any]) -> Any:
    """The caller's value from its stored form: markers resolved, escapes removed.

    A marker whose payload is not in `payloads` (not this task's, or gone) stays a marker:
    reads never fetch a payload the task does not own.
    """
    if isinstance(value, str):
        if value.startswith(RESERVED_PREFIX):
            if value.startswith(ESCAPE_PREFIX):
                return value[len(ESCAPE_PREFIX) :]
            if value.startswith(MARKER_PREFIX):
                return payloads.get(value[len(MARKER_PREFIX) :], value)
        return value
    if isinstance(value, dict):
        return {key: read_value(item, payloads) for key, item in value.items()}
    if isinstance(value, list):
        return [read_value(item, payloads) for item in value]
    return value


def replace_markers(value: Any, payloads: dict[str, Any]) -> Any:
    """Kept for callers of the earlier name: `read_value`."""
    return read_value(value, payloads)
