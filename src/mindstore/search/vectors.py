"""How a message's vector is stored (``search_vectors``, docs/search.md "Recall by
meaning"): one document per indexed message, its `_id` the message's entry's
(``<task key>/<index>``), so whatever removes an entry removes its vector by the same
`_id`s (`lifecycle.delete_entries`). Beside the vector, what the scope filters need: the
task (``task``), owner (``o``), role (``r``) and time in microseconds (``t``), and the
model's tag (``e``, `model_tag`): a ranking reads only its model's vectors.

The vector is quantised to int8 (each component times 127 over the largest's magnitude,
rounded) and stored as a BSON binary vector (subtype 9, dtype int8: what a server's
vector index reads): 386 bytes for 384 dimensions, a quarter of float32; a cosine ranks
after renormalising, so the scale is not kept. Under a keyring it is sealed like the
entry's text, bound to the tenant, the entry and "search.v" (`VectorSeal`). Pure but
`vector_seal`, which asks the tenant's cipher for its key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bson.binary import Binary, BinaryVectorDtype

from mindstore.crypto.aead import open_value, seal_value
from mindstore.model.plans.redaction import redaction_of

from .postings import micros
from .text import searchable

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher
    from mindstore.model.messages import AnyMessage

__all__ = [
    "VectorSeal",
    "VectorSource",
    "dequantise",
    "model_tag",
    "quantise",
    "source_for",
    "vector_document",
    "vector_seal",
]


def model_tag(key: str) -> str:
    """The short tag a vector document carries for its model (`embedder.model_key`)."""
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def quantise(vector: Sequence[float]) -> bytes:
    """A unit vector as int8 components (the largest magnitude at 127), as BSON stores a
    binary vector of dtype int8 (two header bytes, then one byte a component)."""
    top = max((abs(x) for x in vector), default=0.0)
    if top == 0:
        values = [0] * len(vector)
    else:  # over the largest first: 127 / a subnormal largest would overflow
        values = [max(-127, min(127, round(x / top * 127))) for x in vector]
    return bytes(Binary.from_vector(values, BinaryVectorDtype.INT8))


def dequantise(stored: bytes) -> list[int]:
    """The int8 components of a stored vector (a cosine ranks them as they are)."""
    vector = Binary(stored, 9).as_vector()
    if vector.dtype != BinaryVectorDtype.INT8:
        raise ValueError("not an int8 vector")
    return [int(x) for x in vector.data]


@dataclass(frozen=True)
class VectorSource:
    """What a message's vector is made of and filtered by (its entry's `_id` names it)."""

    id: str
    task: str
    owner: str | None
    role: str
    time: int
    """Microseconds since the epoch (as the postings hold it)."""
    text: str


def source_for(
    message: AnyMessage, entry_id: str, task_id: str, owner: str | None
) -> VectorSource | None:
    """The vector source of a message its catch-up indexed (None: redacted)."""
    if redaction_of(message) is not None:
        return None
    return VectorSource(
        entry_id,
        task_id,
        owner,
        str(getattr(message, "role", "unknown")),
        micros(getattr(message, "started_ts", 0) or 0),
        searchable(message).text,
    )


@dataclass(frozen=True)
class VectorSeal:
    """How one tenant's vectors are stored: sealed under its current data key, or as
    they are (`seal`, `open` of the stored bytes, by entry `_id`)."""

    seal: Callable[[bytes, str], Any]
    open: Callable[[Any, str], bytes]
    sealed: bool = False
    """Whether vectors are sealed (then only the process can rank them)."""


def _clear() -> VectorSeal:
    return VectorSeal(lambda b, _i: Binary(b, 9), lambda v, _i: bytes(v))


async def vector_seal(tenant: str, cipher: TenantCipher | None) -> VectorSeal:
    """The tenant's vector seal: its current data key under a keyring (an embedding
    leaks what was said), else none. Raises KeyShredded as `codec_for` does."""
    if cipher is None:
        return _clear()
    current = await cipher.current()
    if current is None:
        return _clear()
    version, data_key = current
    keys = cipher.keys()

    def seal(raw: bytes, entry: str) -> Any:
        return seal_value(raw, data_key, version, (tenant, entry, "vector", "search.v"))

    def opened(value: Any, entry: str) -> bytes:
        raw = open_value(value, keys.key, (tenant, entry, "vector", "search.v"))
        if not isinstance(raw, bytes):
            raise ValueError("not a sealed vector")
        return raw

    return VectorSeal(seal, opened, sealed=True)


def vector_document(
    tenant: str, source: VectorSource, vector: Sequence[float], tag: str, sealer: VectorSeal
) -> dict[str, Any]:
    """The stored document of one message's vector (see the module doc)."""
    return {
        "_id": source.id,
        "tenant": tenant,
        "task": source.task,
        "o": source.owner,
        "r": source.role,
        "t": source.time,
        "e": tag,
        "v": sealer.seal(quantise(vector), source.id),
    }
