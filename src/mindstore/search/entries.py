"""The stored form of a task's indexed messages (``search_entries``), as pure logic: one
document per task and *chunk* of consecutive messages a catch-up indexed, packed and
compressed, sealed whole under a keyring (docs/search.md, "The model").

A chunk covers at most `CHUNK_SPAN` consecutive message indexes and at most `CHUNK_TEXT`
bytes of text (or one message, if that alone is longer), so a page of hits reads at most
one bounded chunk per hit. Its `_id` is ``<task key>/<first index, 10 digits>``: within a
task the ids sort as the indexes do, so the chunk holding message ``i`` is the one whose
`_id` lies between those of ``i - CHUNK_SPAN + 1`` and ``i`` and whose last index ``l`` is
at least ``i`` (`holding`: one `_id` range and one bound per hit, no read of the task's
other chunks). The indexes it holds are kept in clear as well (``g``, varint gaps from
the first), so a scan of which messages lack a vector reads them without unsealing; a
message is still named ``<task key>/<index>`` (`entry_id`), the `_id` of its vector.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from bson import Binary

from mindstore.ids import task_id_of, task_key

from .postings import (
    OTHER_ROLE,
    ROLE_CODES,
    ROLES_BY_CODE,
    Packed,
    _number,
    _unzigzag,
    _varint,
    _zigzag,
    as_ordinal,
)

CHUNK_SPAN = 64
"""The most message indexes one chunk covers (last - first + 1)."""

CHUNK_TEXT = 8 << 10
"""The most bytes of text (UTF-8) one chunk holds, unless one message alone is longer."""

ZLIB_LEVEL = 6


@dataclass(frozen=True)
class Entry:
    """One message as the index holds it: its name, what a snippet needs, its postings."""

    id: str
    """``<task key>/<index>``: the message's name in the index (its vector's `_id`)."""
    index: int
    message_id: str
    length: int
    """Its words (the statistics' and BM25's length)."""
    text: str
    """Its searchable text, in clear (sealed only with its chunk)."""
    postings: dict[str, Packed]
    """Term -> its posting, to pack with the task's others (`postings.pack_group`)."""
    role: str = "unknown"
    time: int = 0
    """Microseconds since the epoch (`postings.micros`)."""


@dataclass(frozen=True)
class StoredText:
    """A message's text as a chunk holds it, opened (for a snippet)."""

    task: str
    message_id: str
    text: str


def entry_id(key: str, index: int) -> str:
    """A message's name in the index: ``<task key>/<index>``."""
    return f"{key}/{index}"


def chunk_id(key: str, first: int) -> str:
    """The `_id` of the chunk of task `key` whose first message is `first`."""
    return f"{key}/{first:010d}"


def key_of(identifier: str) -> str:
    """The task key of an entry's or a chunk's `_id`."""
    return identifier.rpartition("/")[0]


def holding(identifier: str) -> dict[str, Any]:
    """The filter clause of the chunk holding the message named `identifier`
    (``<task key>/<index>``; see the module doc)."""
    key, _, at = identifier.rpartition("/")
    index = int(at)
    low = chunk_id(key, max(0, index - CHUNK_SPAN + 1))
    return {"_id": {"$gte": low, "$lt": chunk_id(key, index + 1)}, "l": {"$gte": index}}


def task_range(key: str) -> dict[str, str]:
    """The `_id` range of every chunk of task `key` (no other task's key starts with
    ``<key>/``: ``/`` is outside the key alphabet)."""
    return {"$gte": f"{key}/", "$lt": f"{key}0"}  # "0" follows "/"


def candidates(key: str, count: int) -> tuple[list[str], list[str]]:
    """Every chunk `_id` and every vector `_id` a task of `count` indexed messages may
    hold: what a re-index or a delete removes without reading first."""
    return [chunk_id(key, i) for i in range(count)], [entry_id(key, i) for i in range(count)]


def _runs(entries: Sequence[Entry]) -> list[list[Entry]]:
    """`entries` (in index order) cut into chunks within the bounds."""
    runs: list[list[Entry]] = []
    size = 0
    for entry in entries:
        grown = size + len(entry.text.encode("utf-8", "surrogatepass"))
        if not runs or entry.index - runs[-1][0].index >= CHUNK_SPAN or grown > CHUNK_TEXT:
            runs.append([])
            grown -= size
        runs[-1].append(entry)
        size = grown
    return runs


def _gaps(entries: Sequence[Entry]) -> bytearray:
    out, previous = bytearray(), entries[0].index
    for entry in entries:
        _varint(out, entry.index - previous)
        previous = entry.index
    return out


def _payload(entries: Sequence[Entry]) -> bytes:
    """Each message's index gap, id and text, length-prefixed, then compressed."""
    out, previous = bytearray(), entries[0].index
    for entry in entries:
        _varint(out, entry.index - previous)
        previous = entry.index
        for part in (entry.message_id, entry.text):
            data = part.encode("utf-8", "surrogatepass")
            _varint(out, len(data))
            out += data
    return zlib.compress(bytes(out), ZLIB_LEVEL)


def pack_table(entries: Sequence[Entry]) -> bytes:
    """A chunk's message table, in the order of its indexes (``g``): each message's length
    in words and its role's code in one varint (an unknown role: code `OTHER_ROLE` and its
    name), then its time in microseconds as a difference from the previous message's
    (zigzag-coded; the first from 0). What BM25 and the role and time filters read of a
    message, once for all its terms."""
    out, last = bytearray(), 0
    for entry in entries:
        code = ROLE_CODES.get(entry.role, OTHER_ROLE)
        _varint(out, entry.length << 4 | code)
        if code == OTHER_ROLE:
            raw = entry.role.encode("utf-8", "surrogatepass")
            _varint(out, len(raw))
            out += raw
        _varint(out, _zigzag(entry.time - last))
        last = entry.time
    return bytes(out)


class Row(NamedTuple):
    """One message as its chunk's table holds it (a tuple: a search makes one per match)."""

    length: int
    role: str
    time: int
    """Microseconds since the epoch."""
    chunk: str
    """The `_id` of the chunk holding it (where its text is)."""


def unpack_table(document: dict[str, Any], wanted: Container[int] | None = None) -> dict[int, Row]:
    """Index -> `Row` of each message a chunk holds (its clear ``g`` and ``m``), or of
    those `wanted` names (the rest are stepped over: a search reads the tables of whole
    tasks for the messages that match, often a few of them)."""
    data = bytes(document.get("m") or b"")
    chunk = str(document["_id"])
    out: dict[int, Row] = {}
    at, last = 0, 0
    for index in chunk_indexes(document):
        both = data[at]  # varints of one byte read inline, as most are
        if both < 0x80:
            at += 1
        else:
            both, at = _number(data, at)
        code = both & 0xF
        role = ""
        if code == OTHER_ROLE:
            size, at = _number(data, at)
            role = data[at : at + size].decode("utf-8", "surrogatepass")
            at += size
        shift = data[at]
        if shift < 0x80:
            at += 1
        else:
            shift, at = _number(data, at)
        last += _unzigzag(shift)
        if wanted is None or index in wanted:
            out[index] = Row(both >> 4, role or ROLES_BY_CODE.get(code, "unknown"), last, chunk)
    return out


def pack_chunks(
    entries: Sequence[Entry],
    tenant: str,
    task_id: str,
    owner: str | None,
    seal: Callable[[bytes, str, str], Any],
    ordinal: int = 0,
) -> list[dict[str, Any]]:
    """The chunk documents of one catch-up's entries of a task (in index order); `seal`
    ((compressed payload, task id, chunk `_id`) -> its stored form) binds each to them.
    Each carries its task's `ordinal` (``r``: what the task's postings name it by) and
    its messages' table (``m``, `pack_table`), in clear as the postings were."""
    key = task_key(tenant, task_id)
    documents = []
    for run in _runs(entries):
        identifier = chunk_id(key, run[0].index)
        documents.append(
            {
                "_id": identifier,
                "tenant": tenant,
                "task": task_id,
                "o": owner,
                "l": run[-1].index,
                "g": Binary(bytes(_gaps(run))),
                "n": sum(entry.length for entry in run),
                "r": ordinal,
                "m": Binary(pack_table(run)),
                "z": seal(_payload(run), task_id, identifier),
            }
        )
    return documents


def _first_index(document: dict[str, Any]) -> int:
    """The index of a chunk's first message, from its `_id` (`chunk_id`)."""
    return int(str(document["_id"]).rpartition("/")[2])


def chunk_indexes(document: dict[str, Any]) -> list[int]:
    """The message indexes a chunk holds, read from its clear ``g`` (no unsealing)."""
    data = bytes(document.get("g") or b"")
    index = _first_index(document)
    out, at = [], 0
    while at < len(data):
        step, at = _number(data, at)
        index += step
        out.append(index)
    return out


def unpack_chunk(document: dict[str, Any], opened: bytes) -> list[tuple[int, str, str]]:
    """(index, message id, text) of each message of a chunk, from its opened payload."""
    data = zlib.decompress(opened)
    index = _first_index(document)
    out: list[tuple[int, str, str]] = []
    at = 0
    while at < len(data):
        step, at = _number(data, at)
        index += step
        parts = []
        for _ in range(2):
            size, at = _number(data, at)
            parts.append(data[at : at + size].decode("utf-8", "surrogatepass"))
            at += size
        out.append((index, parts[0], parts[1]))
    return out


@dataclass(frozen=True)
class TaskTable:
    """What a task's chunks say of its indexed messages: the task, its owner, and each
    message's `Row` by index (what a search joins its postings' occurrences with)."""

    task: str
    owner: str | None
    rows: dict[int, Row]


def tables_of(
    chunks: Sequence[dict[str, Any]], wanted: Mapping[int, Collection[int]] | None = None
) -> dict[int, TaskTable]:
    """Ordinal -> `TaskTable`, from chunks read by ordinal (``r``, ``o``, ``l``, ``g``, ``m``),
    with the rows of the indexes `wanted` names for each ordinal (None: every row). A
    chunk's task is the one its `_id` names (what its sealed text is bound to), not its
    ``task`` field, which a writer of the database could change alone. An ordinal whose
    chunks name more than one task or owner is left out: a catch-up cut off by an erase
    may leave, until its take-back, a chunk whose ordinal a later task was given, and no
    posting may be read under another task's owner."""
    tables: dict[int, TaskTable] = {}
    clashing: set[int] = set()
    for chunk in chunks:
        ordinal = as_ordinal(chunk.get("r"))
        if ordinal is None:
            continue
        task, owner = task_id_of(key_of(str(chunk["_id"]))), chunk.get("o")
        held = tables.get(ordinal)
        if held is None:
            held = tables[ordinal] = TaskTable(task, owner, {})
        elif (held.task, held.owner) != (task, owner):
            clashing.add(ordinal)
        if wanted is None:
            held.rows.update(unpack_table(chunk))
            continue
        asked = wanted.get(ordinal, ())
        first, last = _first_index(chunk), int(chunk.get("l") or 0)
        if any(first <= index <= last for index in asked):  # else none of its rows is asked
            held.rows.update(unpack_table(chunk, asked))
    for ordinal in clashing:
        del tables[ordinal]
    return tables
