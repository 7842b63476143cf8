"""How a message becomes what the index stores, for one tenant: the tenant's codec (terms
and texts as they are, or blind tokens and sealed texts under its keys; docs/search.md
"Under a keyring") and a message's entry under it (`entry_for`: its entry document and
its packed postings). Pure but `codec_for`, which asks the tenant's cipher for its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindstore.crypto.aead import open_value, seal_value
from mindstore.ids import task_key
from mindstore.model.plans.redaction import redaction_of

from .blind import Blinder, derive_search_key
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
    seal: Callable[[str, str, str], Any]
    """(text, task id, message id) -> the stored form."""
    open: Callable[[Any, str, str], str]
    stem: Stemmer | None
    key_version: int | None
    seal_places: Callable[[bytes, str, str], Any] | None = None
    """(packed positions, task id, stored term) -> their sealed form; None: kept in clear.
    Under a keyring a posting's positions would show the order of the tokens in a message,
    so each group's positions are sealed apart (opened only for a phrase)."""
    open_places: Callable[[Any, str, str], bytes] | None = None


def _plain_codec(stem: Stemmer | None) -> Codec:
    return Codec(lambda t: t, lambda x, _t, _m: x, lambda x, _t, _m: str(x or ""), stem, None)


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

    def seal(text: str, task_id: str, message_id: str) -> Any:
        return seal_value(text, data_key, version, (tenant, task_id, message_id, "search.x"))

    def opened(value: Any, task_id: str, message_id: str) -> str:
        return str(open_value(value, keys.key, (tenant, task_id, message_id, "search.x")))

    def seal_places(places: bytes, task_id: str, term: str) -> Any:
        return seal_value(places, data_key, version, (tenant, task_id, term, "search.p"))

    def open_places(value: Any, task_id: str, term: str) -> bytes:
        return bytes(open_value(value, keys.key, (tenant, task_id, term, "search.p")))

    return Codec(blind, seal, opened, stem, version, seal_places, open_places)


@dataclass
class Entry:
    """One message as the index holds it: its entry document and its postings."""

    document: dict[str, Any]
    postings: dict[str, Packed]
    """Term -> its posting, to pack with the task's others (`postings.pack_group`)."""
    owner: str | None = None


def entry_for(
    message: AnyMessage, index: int, tenant: str, task_id: str, owner: str | None, codec: Codec
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
    document = {
        "_id": f"{task_key(tenant, task_id)}/{index}",
        "tenant": tenant,
        "task": task_id,
        "i": index,
        "m": message_id,
        "o": owner,
        "n": length,
        "x": codec.seal(found.text, task_id, message_id),
    }
    postings = {term: Packed(index, length, role, time, tuple(at)) for term, at in places.items()}
    return Entry(document, postings)
