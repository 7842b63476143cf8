"""Reading stored messages: at most one walk per document, one validation per batch.

A stored message document differs from the caller's message in three ways: unsafe keys
are escaped with a `§` prefix (`storage_form`), a caller string that begins with
``mindstore:`` is stored behind an escape, and a large value is replaced by a payload
marker (`payloads`); an unknown-role message also lists the store's fields under
`DERIVED_KEY`. Reading used to walk every document once per concern (markers, keys,
strings) before validating it.

Most documents hold none of these forms, and every one of them contains ``§`` or
``mindstore:``. `read_stored` therefore renders the batch with `marshal` (C code, about a
fifth of one Python walk; every string appears in it in full, as UTF-8, at least once)
and looks for those two byte sequences, 64 documents at a time, then document by
document where one was found. What `marshal` cannot render (datetimes, `Int64` and the
other bson types) is rendered by `pickle` instead, which is slower but as exact; what
neither can render is walked. The rendering is never stored or loaded. A document that
holds neither sequence goes to validation as it is; the others are walked once, and that
walk does everything: keys unescaped, escaped strings restored (caller form), markers
recorded with the place they sit in, so that `StoredRead.resolve` can put the payloads
in once they are fetched.

`parse_read` validates the batch once, with the collector paused (`collector_paused`).
The reasons and the measured figures: docs/design.md ("Reading stored messages").
"""

from __future__ import annotations

import marshal
import pickle
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from mindstore.model.base import JSON
from mindstore.model.collector import collector_paused
from mindstore.model.messages import AnyMessage, UnknownMessage, parse_messages
from mindstore.model.storage_form import CHUNKS_KEY, DERIVED_KEY, KEY_MARK, bson_size
from mindstore.payloads import ESCAPE_PREFIX, MARKER_PREFIX, RESERVED_PREFIX

CHUNK = 64
"""Documents rendered together by the cheap check (a clean batch costs one call per chunk)."""
_NEEDLES = (KEY_MARK.encode(), RESERVED_PREFIX.encode())
_MARK_LENGTH = len(KEY_MARK)
_ESCAPE_LENGTH = len(ESCAPE_PREFIX)
_MARKER_LENGTH = len(MARKER_PREFIX)


@dataclass
class StoredRead:
    """A batch of stored message documents, made ready for validation.

    `documents` are the ones to validate (a document that needed nothing is the stored
    dict itself, not a copy); `derived` holds, by position, the store-field lists of
    unknown-role messages; `markers` maps each payload id to the places that refer to
    it (container, key or index, the marker string); `walked` counts documents walked.
    """

    documents: list[Any]
    derived: dict[int, Any] = field(default_factory=dict)
    markers: dict[str, list[tuple[Any, Any, str]]] = field(default_factory=dict)
    walked: int = 0

    def resolve(self, payloads: dict[str, Any]) -> None:
        """Put each fetched payload where its marker was; a marker whose payload is not in
        `payloads` (not this task's, or gone) stays a marker."""
        for payload_id, places in self.markers.items():
            if payload_id not in payloads:
                continue
            value = payloads[payload_id]
            for container, slot, marker in places:
                # a key given twice in a hostile document keeps the last value only
                if container[slot] == marker:
                    container[slot] = value


def plain(value: Any) -> bool:
    """True if `value` certainly holds no escaped key, escaped string, marker or derived
    list (no ``§`` and no ``mindstore:`` anywhere); False means "walk it"."""
    try:
        rendered = marshal.dumps(value)
    except ValueError:  # a type marshal cannot render (datetime, Int64, bson types)
        try:
            rendered = pickle.dumps(value, protocol=5)
        except Exception:  # cannot tell: walk it
            return False
    return _NEEDLES[0] not in rendered and _NEEDLES[1] not in rendered


class _Walk:
    """One walk: a copy of a stored value in the caller's form (or, with ``strings``
    off, the planning form: keys unescaped, strings as stored), markers recorded."""

    def __init__(self, strings: bool, markers: dict[str, list[tuple[Any, Any, str]]]) -> None:
        self.strings = strings
        self.markers = markers

    def value(self, value: Any, container: Any, slot: Any) -> Any:
        if isinstance(value, str):
            if value.startswith(RESERVED_PREFIX):
                if value.startswith(ESCAPE_PREFIX):
                    return value[_ESCAPE_LENGTH:] if self.strings else value
                if value.startswith(MARKER_PREFIX):
                    places = self.markers.setdefault(value[_MARKER_LENGTH:], [])
                    places.append((container, slot, value))
            return value
        if isinstance(value, dict):
            return self.mapping(value.items())
        if isinstance(value, list):
            copied: list[Any] = []
            for index, item in enumerate(value):
                copied.append(self.value(item, copied, index))
            return copied
        return value

    def mapping(self, items: Any) -> dict[Any, Any]:
        copied: dict[Any, Any] = {}
        chunks: Any = None
        for key, item in items:
            if key == CHUNKS_KEY:
                chunks = item
                continue
            if isinstance(key, str) and key.startswith(KEY_MARK):
                key = unquote(key[_MARK_LENGTH:])
            copied[key] = self.value(item, copied, key)
        if chunks is not None:
            joined = join_chunks(copied, chunks)
            if joined is None:  # not a streamed part's chunks: kept, as any escaped key
                copied[unquote(CHUNKS_KEY[_MARK_LENGTH:])] = self.value(chunks, copied, "more")
        return copied


STREAMED_FIELDS = {"text": "text", "reasoning": "reasoning"}
"""The field of each part type whose later chunks a stream stores under `CHUNKS_KEY`."""


def join_chunks(part: dict[Any, Any], chunks: Any) -> str | None:
    """A streamed part's whole text: its text field followed by its chunks (set in `part`,
    which is the walk's copy), or None when `part` is not a text or reasoning part whose
    text and chunks are strings (then nothing is joined)."""
    name = STREAMED_FIELDS.get(str(part.get("type")))
    if name is None or not isinstance(chunks, list):
        return None
    base = part.get(name, "")
    if not isinstance(base, str) or not all(isinstance(chunk, str) for chunk in chunks):
        return None
    part[name] = joined = base + "".join(chunks)
    return joined


def chunk_overhead(document: Any) -> int:
    """Bytes a stored message document spends on streamed chunks beyond its joined form
    (the chunk array's keys and framing): what a write that replaces the message's content
    from its decoded (joined) form removes beyond what it sized."""
    content = document.get("content") if isinstance(document, dict) else None
    total = 0
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and CHUNKS_KEY in part:
            joined = {key: value for key, value in part.items() if key != CHUNKS_KEY}
            if join_chunks(joined, part[CHUNKS_KEY]) is not None:
                total += bson_size(part) - bson_size(joined)
    return total


def read_stored(documents: list[Any], *, strings: bool, copy: bool = False) -> StoredRead:
    """Stored message documents -> a `StoredRead` (see the module docstring).

    ``strings``: restore escaped strings (the caller's form, for reads) or keep them as
    stored (the planning form: a patch's size is computed on the stored form). Markers
    are recorded either way. ``copy``: walk every document, so none of the returned
    documents is one of the given ones.
    """
    read = StoredRead(documents=list(documents))
    walk = _Walk(strings, read.markers)
    batch = read.documents
    for start in range(0, len(batch), CHUNK):
        if not copy and plain(batch[start : start + CHUNK]):
            continue
        for position in range(start, min(start + CHUNK, len(batch))):
            document = batch[position]
            if not isinstance(document, dict) or (not copy and plain(document)):
                continue  # a non-object is for validation to refuse (a typed error)
            if DERIVED_KEY in document:
                read.derived[position] = document[DERIVED_KEY]
            batch[position] = walk.mapping(
                (key, value) for key, value in document.items() if key != DERIVED_KEY
            )
            read.walked += 1
    return read


def parse_read(read: StoredRead) -> list[AnyMessage]:
    """Validate a read batch (once, collector paused); unknown roles get their store
    fields back out of `raw` (`UnknownMessage.from_stored`)."""
    with collector_paused():
        messages = parse_messages(read.documents)
    for position, names in read.derived.items():
        message = messages[position]
        if names and isinstance(message, UnknownMessage):
            messages[position] = UnknownMessage.from_stored(message.raw, list(names))
    return messages


def parse_stored_documents(documents: list[JSON], *, strings: bool) -> list[AnyMessage]:
    """`read_stored` then `parse_read`, for documents that refer to no payloads to fetch."""
    return parse_read(read_stored(documents, strings=strings))
