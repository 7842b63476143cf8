"""One tenant's view of the keyring, as the task repository uses it.

The repository calls three things, at the places where stored documents are made and
read (docs/encryption.md, "Where it hooks in"):

* `offloader(task_id, threshold)`: the write transform. It is the payload `Offloader`
  (large values out, reserved strings escaped) followed by the sealing of
  `crypto.fields`, for whole message documents and for patch values alike, and it seals
  each offloaded payload's data. The planner sizes what it returns, so `size_bytes`
  counts the ciphertexts.
* `open(documents, task_id)`: stored message documents with their ciphertexts opened,
  before any other decoding (escapes, markers, validation).
* `open_payload(payload_id, data, task_id)`: an offloaded payload's data.

Key loading is async (`ready`); the transforms are sync and use the keys `ready` loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mindstore.crypto.aead import is_sealed, open_value, seal_value
from mindstore.crypto.fields import open_document, open_value_at, seal_at, seal_document, seal_part
from mindstore.crypto.keyring import Keyring, MissingKey, TenantKeys
from mindstore.payloads import Offloader

__all__ = ["SealingOffloader", "TenantCipher"]

TASK_CONTENT = "task.content"
"""The path a task's own content parts are bound to (they are not in a message)."""
PAYLOAD_FIELD = "payload"
OWN_METADATA = "mindstore_"


@dataclass
class TenantCipher:
    """A keyring bound to one tenant."""

    keyring: Keyring
    tenant: str

    async def ready(self, *, write: bool = False) -> TenantKeys:
        """Load (or refresh) the tenant's keys; `write`: make its first key if needed."""
        return await self.keyring.keys(self.tenant, create=write)

    def _keys(self) -> TenantKeys:
        held = self.keyring.cached(self.tenant)
        if held is None:
            raise MissingKey(self.tenant, 0)  # `ready` was not awaited: a wiring bug
        return held

    # ------------------------------------------------------------------ writes
    def offloader(self, task_id: str, threshold: int) -> SealingOffloader:
        return SealingOffloader(task_id, threshold, tenant=self.tenant, cipher=self)

    def seal_payload(self, payload_id: str, data: Any, task_id: str) -> Any:
        version, key = self._keys().current()
        return seal_value(data, key, version, (self.tenant, task_id, payload_id, PAYLOAD_FIELD))

    def seal_task_value(self, value: Any, task_id: str, name: str) -> Any:
        """A task field (`title`, a `metadata` value) sealed, bound to its name."""
        if value is None or is_sealed(value):
            return value
        version, key = self._keys().current()
        return seal_value(value, key, version, (self.tenant, task_id, "", f"task.{name}"))

    def seal_task(self, fields: dict[str, Any], task_id: str) -> dict[str, Any]:
        """Task document fields with `title` and the `metadata` values sealed (a new dict).
        Metadata keys stay clear, and so do the values of mindstore's own keys
        (`mindstore_*`, e.g. a fork's marker, which dialog repair finds on the server)."""
        out = dict(fields)
        if "title" in out:
            out["title"] = self.seal_task_value(out["title"], task_id, "title")
        metadata = out.get("metadata")
        if type(metadata) is dict:
            out["metadata"] = {
                key: value if str(key).startswith(OWN_METADATA) else
                self.seal_task_value(value, task_id, f"metadata.{key}")
                for key, value in metadata.items()
            }  # fmt: skip
        return out

    def open_task(self, document: dict[str, Any], task_id: str) -> dict[str, Any]:
        """A task document with its title, metadata values and own content opened (the
        same dict when it holds no ciphertext)."""
        keys = self._keys()
        out: dict[str, Any] | None = None
        for name in ("title", "metadata"):
            if name in document:
                opened = open_value_at(document[name], f"task.{name}", keys, self.tenant, task_id)
                if opened is not document[name]:
                    out = out if out is not None else dict(document)
                    out[name] = opened
        content = document.get("content")
        if type(content) is list:
            parts = [open_value_at(part, TASK_CONTENT, keys, self.tenant, task_id, "")
                     if type(part) is dict else part for part in content]  # fmt: skip
            if any(a is not b for a, b in zip(parts, content, strict=True)):
                out = out if out is not None else dict(document)
                out["content"] = parts
        return document if out is None else out

    # ------------------------------------------------------------------ reads
    def open(self, documents: list[Any], task_id: str) -> list[Any]:
        keys = self._keys()
        return [open_document(document, keys, self.tenant, task_id) for document in documents]

    async def opened(self, documents: list[Any], task_id: str) -> list[Any]:
        """`open` after loading the keys; a version not held yet (rotated by another
        process) reads the keys again once."""
        await self.ready()
        try:
            return self.open(documents, task_id)
        except MissingKey:
            await self.keyring.refresh(self.tenant)
            return self.open(documents, task_id)

    def open_payload(self, payload_id: str, data: Any, task_id: str) -> Any:
        if not is_sealed(data):
            return data
        context = (self.tenant, task_id, payload_id, PAYLOAD_FIELD)
        return open_value(data, self._keys().key, context)

    def open_task_value(self, value: Any, task_id: str, name: str) -> Any:
        return open_value_at(value, f"task.{name}", self._keys(), self.tenant, task_id)


class SealingOffloader(Offloader):
    """The payload offloader, then sealing (see the module doc). Composition inside: the
    offloading walk is a plain `Offloader` sharing this one's `pending` payloads."""

    def __init__(self, task_id: str, threshold: int, *, tenant: str, cipher: TenantCipher) -> None:
        super().__init__(task_id, threshold, tenant=tenant)
        self._plain = Offloader(task_id, threshold, tenant=tenant, pending=self.pending)
        self._cipher = cipher
        self._sealed: set[str] = set()

    def _seal_payloads(self) -> None:
        for payload in self.pending.values():
            if payload.id not in self._sealed:
                payload.data = self._cipher.seal_payload(payload.id, payload.data, self.task_id)
                self._sealed.add(payload.id)

    def transform_document(self, message_doc: dict[str, Any]) -> dict[str, Any]:
        document = self._plain.transform_document(message_doc)
        self._seal_payloads()
        keys = self._cipher._keys()
        if "type" in document and "role" not in document:
            return seal_part(document, keys, self.tenant, self.task_id, TASK_CONTENT)
        return seal_document(document, keys, self.tenant, self.task_id)

    def transform_value(self, value: Any, message_id: str, path: str) -> Any:
        transformed = self._plain.transform_value(value, message_id, path)
        self._seal_payloads()
        keys = self._cipher._keys()
        return seal_at(transformed, path, keys, self.tenant, self.task_id, message_id)
