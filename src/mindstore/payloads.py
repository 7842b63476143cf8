"""Large values live outside the message array.

An image, an audio clip or a 2 MB tool result inside the task document would make every
read of the header heavier and bring the document toward MongoDB's 16 MiB limit. Any
string or binary value above the threshold is replaced by a short marker string and stored
in the `payloads` collection; reads put it back. Payload ids are derived from (task,
message, path, content hash), so a retried write upserts the same payload instead of
adding a second one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

MARKER_PREFIX = "mindstore:payload:"
DEFAULT_THRESHOLD = 256 * 1024


@dataclass
class PendingPayload:
    id: str
    message_id: str
    path: str
    sha256: str
    size: int
    data: str | bytes


def _digest(value: str | bytes) -> str:
    raw = value.encode() if isinstance(value, str) else value
    return hashlib.sha256(raw).hexdigest()


def is_marker(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MARKER_PREFIX)


@dataclass
class Offloader:
    """Collects the payloads of one write; the values it returns are what gets stored."""

    task_id: str
    threshold: int = DEFAULT_THRESHOLD
    pending: dict[str, PendingPayload] = field(default_factory=dict)

    def transform_document(self, message_doc: dict[str, Any]) -> dict[str, Any]:
        return self.transform_value(message_doc, str(message_doc.get("id", "")), "")

    def transform_value(self, value: Any, message_id: str, path: str) -> Any:
        if isinstance(value, (str, bytes)):
            size = len(value.encode() if isinstance(value, str) else value)
            if size < self.threshold or is_marker(value):
                return value
            sha = _digest(value)
            payload_id = hashlib.sha256(
                f"{self.task_id}\x00{message_id}\x00{path}\x00{sha}".encode()
            ).hexdigest()[:32]
            self.pending[payload_id] = PendingPayload(
                payload_id, message_id, path, sha, size, value
            )
            return MARKER_PREFIX + payload_id
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
    if isinstance(value, str):
        if value.startswith(MARKER_PREFIX):
            found.add(value[len(MARKER_PREFIX) :])
    elif isinstance(value, dict):
        for item in value.values():
            find_markers(item, found)
    elif isinstance(value, list):
        for item in value:
            find_markers(item, found)


def replace_markers(value: Any, payloads: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith(MARKER_PREFIX):
        key = value[len(MARKER_PREFIX) :]
        return payloads.get(key, value)
    if isinstance(value, dict):
        return {key: replace_markers(item, payloads) for key, item in value.items()}
    if isinstance(value, list):
        return [replace_markers(item, payloads) for item in value]
    return value
