"""One tenant's view of the keyring, as the task repository uses it.

The repository calls these at the places where stored documents are made and read
(docs/encryption.md, "Where it hooks in"):

* `offloader(task_id, threshold)`: the write transform. It is the payload `Offloader`
  (large values out, reserved strings escaped) followed by the sealing of
  `crypto.fields`, for whole message documents and for patch values alike, and it seals
  each offloaded payload's data. The planner sizes what it returns, so `size_bytes`
  counts the ciphertexts.
* `open` / `opened`: stored message documents with their ciphertexts opened, before any
  other decoding (escapes, markers, validation); `open_payload` a payload's data.
* `seal_task` / `open_task`: a task document's title, metadata values and own content.

Key loading is async (`ready`); the transforms are sync and use the keys `ready` loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mindstore.crypto import task_fields
from mindstore.crypto.aead import is_sealed
from mindstore.crypto.fields import open_document, seal_at, seal_document
from mindstore.crypto.keyring import Keyring
from mindstore.crypto.keys import MissingKey, TenantKeys
from mindstore.errors import KeyShredded
from mindstore.payloads import Offloader

__all__ = ["SealingOffloader", "TenantCipher"]


@dataclass
class TenantCipher:
    """A keyring bound to one tenant."""

    keyring: Keyring
    tenant: str

    async def ready(self, *, write: bool = False) -> TenantKeys:
        """Load (or refresh) the tenant's keys; `write`: make its first key if needed (a
        read never does: it must not change the tenant's encryption state).

        Raises:
            KeyShredded: The tenant was shredded, for a read as for a write, even when
                what it reads or writes holds nothing sealed (a task stored before the
                tenant was encrypted and not swept yet: its content is the tenant's too).
        """
        keys = await self.keyring.keys(self.tenant, create=write)
        if keys.shredded:
            raise KeyShredded(self.tenant)
        return keys

    async def current(self) -> tuple[int, AESGCM] | None:
        """The data key new ciphertexts of the tenant use, or None for a tenant that has
        none (its content is stored in the clear). Never makes a key: for readers that
        derive from the key (the search index), which must not encrypt a tenant.

        Raises:
            KeyShredded: The tenant was shredded.
            OrphanedKeys: Its provider holds a KEK but its data keys are gone.
        """
        keys = await self.ready()
        if not keys.keys and not keys.orphaned:
            return None
        return keys.current()

    def keys(self) -> TenantKeys:
        held = self.keyring.cached(self.tenant)
        if held is None:
            raise MissingKey(self.tenant, 0)  # `ready` was not awaited: a wiring bug
        return held

    # ------------------------------------------------------------------ writes
    def offloader(self, task_id: str, threshold: int) -> SealingOffloader:
        return SealingOffloader(task_id, threshold, tenant=self.tenant, cipher=self)

    def seal_task(self, fields: dict[str, Any], task_id: str) -> dict[str, Any]:
        """`task_fields.seal_task_fields` with this tenant's keys."""
        return task_fields.seal_task_fields(fields, self.keys(), self.tenant, task_id)

    # ------------------------------------------------------------------ reads
    def open(self, documents: list[Any], task_id: str) -> list[Any]:
        keys = self.keys()
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

    def open_payload(
        self,
        payload_id: str,
        data: Any,
        task_id: str,
        *,
        stored: dict[str, Any],
        places: Iterable[tuple[str, str]],
    ) -> Any:
        """`task_fields.open_payload`: `stored` is the payload document (its clear
        `message_id`, `path`, `sha256`), `places` (`task_fields.payload_places`) must be
        where it was offloaded."""
        return task_fields.open_payload(
            data, self.keys(), self.tenant, task_id, payload_id, places=places,
            message_id=stored.get("message_id"), path=stored.get("path"),
            sha256=stored.get("sha256"),
        )  # fmt: skip

    def open_task(self, document: dict[str, Any], task_id: str) -> dict[str, Any]:
        return task_fields.open_task_fields(document, self.keys(), self.tenant, task_id)


class SealingOffloader(Offloader):
    """The payload offloader, then sealing (see the module doc). Composition inside: the
    offloading walk is a plain `Offloader` sharing this one's `pending` payloads."""

    def __init__(self, task_id: str, threshold: int, *, tenant: str, cipher: TenantCipher) -> None:
        super().__init__(task_id, threshold, tenant=tenant)
        self._plain = Offloader(task_id, threshold, tenant=tenant, pending=self.pending)
        self._cipher = cipher

    def _seal_payloads(self, keys: TenantKeys) -> None:
        # by the data, not by the id: a planner that transforms the same value twice
        # registers a new payload object under the same id, with its data in the clear
        for payload in self.pending.values():
            if not is_sealed(payload.data):
                payload.data = task_fields.seal_payload(
                    payload.data, keys, self.tenant, self.task_id, payload.id,
                    message_id=payload.message_id, path=payload.path,
                )  # fmt: skip

    def transform_document(self, message_doc: dict[str, Any]) -> dict[str, Any]:
        document = self._plain.transform_document(message_doc)
        keys = self._cipher.keys()
        self._seal_payloads(keys)
        if "type" in document and "role" not in document:
            return document  # a task's own content part: `seal_task` seals it at its index
        return seal_document(document, keys, self.tenant, self.task_id)

    def transform_value(self, value: Any, message_id: str, path: str) -> Any:
        if is_sealed(value):  # already its stored form (a streamed chunk, sealed when planned)
            return value
        transformed = self._plain.transform_value(value, message_id, path)
        keys = self._cipher.keys()
        self._seal_payloads(keys)
        return seal_at(transformed, path, keys, self.tenant, self.task_id, message_id)
