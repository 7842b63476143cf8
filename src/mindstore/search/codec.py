"""How a message becomes what the index stores, for one tenant: the tenant's codec (terms
and texts as they are, or blind tokens and sealed chunks under its keys; docs/search.md
"Under a keyring") and a message's entry under it (`entry_for`: what its chunk holds of it,
`entries.pack_chunks`, and its postings). Pure but `codec_for`, which asks the tenant's
cipher for its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bson import Binary

from mindstore.crypto.aead import open_value, seal_value
from mindstore.ids import task_key
from mindstore.model.plans.redaction import redaction_of

from .blind import Blinder, derive_search_key
from .entries import Entry, entry_id
from .postings import IndexState, Packed, micros
from .query import tool_term
from .text import searchable
from .tokenize import Stemmer, stemmer_for, terms

if TYPE_CHECKING:
    from mindstore.crypto.tenant import TenantCipher
    from mindstore.model.messages import AnyMessage


@dataclass
class Codec:
    """How terms and texts are stored for one tenant: as they are, or under its keys."""

    term: Callable[[str], str]
    seal: Callable[[bytes, str, str], Any]
    """(a chunk's compressed payload, task id, chunk `_id`) -> its stored form."""
    open: Callable[[Any, str, str], bytes]
    stem: Stemmer | None
    key_version: int | None
    seal_places: Callable[[bytes, str, str], Any] | None = None
    """(packed positions, task id, stored term) -> their sealed form; None: kept in clear.
    Under a keyring a posting's positions would show the order of the tokens in a message,
    so each group's positions are sealed apart (opened only for a phrase)."""
    open_places: Callable[[Any, str, str], bytes] | None = None


def _plain_codec(stem: Stemmer | None) -> Codec:
    return Codec(lambda t: t, lambda x, _t, _c: Binary(x), lambda x, _t, _c: bytes(x), stem, None)


async def codec_for(tenant: str, cipher: TenantCipher | None, state: IndexState) -> Codec:
    """The tenant's codec: blind tokens and sealed texts under a keyring (docs/search.md).

    Raises:
        KeyShredded: The tenant's keys were destroyed: it cannot be searched.
    """
    stem = stemmer_for(state.stemming)
    if cipher is None:
        return _plain_codec(stem)
    current = await cipher.current()  # a search never makes a tenant's first key
    if current is None:  # not encrypted: its messages are in the clear, and so is its index
        return _plain_codec(stem)
    version, data_key = current
    keys = cipher.keys()
    blind = Blinder(derive_search_key(data_key, tenant))

    def seal(payload: bytes, task_id: str, chunk: str) -> Any:
        return seal_value(payload, data_key, version, (tenant, task_id, chunk, "search.z"))

    def opened(value: Any, task_id: str, chunk: str) -> bytes:
        return bytes(open_value(value, keys.key, (tenant, task_id, chunk, "search.z")))

    def seal_places(places: bytes, task_id: str, term: str) -> Any:
        return seal_value(places, data_key, version, (tenant, task_id, term, "search.p"))

    def open_places(value: Any, task_id: str, term: str) -> bytes:
        return bytes(open_value(value, keys.key, (tenant, task_id, term, "search.p")))

    return Codec(blind, seal, opened, stem, version, seal_places, open_places)


def entry_for(
    message: AnyMessage, index: int, tenant: str, task_id: str, codec: Codec
) -> Entry | None:
    """The index entry of one message (None: nothing of it is searchable, or redacted)."""
    if redaction_of(message) is not None:
        return None
    found = searchable(message)
    words = terms(found.text, codec.stem)
    places: dict[str, list[int]] = {}
    for at, word in enumerate(words):
        places.setdefault(codec.term(word), []).append(at)
    for tool in found.tools:
        places.setdefault(codec.term(tool_term(tool)), [])  # a filter, not a scored word
    if not places:
        return None
    message_id = str(getattr(message, "id", ""))
    role = str(getattr(message, "role", "unknown"))
    time = micros(getattr(message, "started_ts", 0) or 0)
    length = len(words)
    postings = {term: Packed(index, tuple(at)) for term, at in places.items()}
    return Entry(
        entry_id(task_key(tenant, task_id), index), index, message_id, length, found.text,
        postings, role, time,
    )  # fmt: skip
