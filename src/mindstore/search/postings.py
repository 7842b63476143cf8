"""The index's stored forms, as pure logic (no I/O): the `_id`s and blocks of its
documents, the statistics document read back (`IndexState`), and the packing of postings
(`Packed`, `pack_group`, `unpack`): one binary value per task, term and part, delta- and
varint-coded, its task named by an ordinal, not a sub-document per message.
docs/search.md ("The model").
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bson import Binary

from .tokenize import TOKENIZER_VERSION

BLOCK_BYTES = 2 << 20
"""The width of a postings block, in bytes of postings the tenant's indexing writes (each
group's packed bytes and its `GROUP_BYTES`): the postings a catch-up writes while the
tenant's counter of written bytes (``q`` in the statistics document) lies in ``[b *
BLOCK_BYTES, (b + 1) * BLOCK_BYTES)`` go to block ``b`` of their term. So a block of one
term holds at most `BLOCK_BYTES` (plus one part, per indexer writing at once), however
frequent the term and however large the tenant; a search asks every block of its terms by
`_id`. (Beanie's documents are not imported here: `import mindstore` does not load
Beanie.)"""

GROUP_BYTES = 40
"""What a group adds to its block's document beyond its packed bytes, at most: its key in
the block's array (up to 6 digits), its sub-document's length and end, the ordinal (an
int64 at worst) and the two binaries' headers (the sealed positions' too). A catch-up
counts it with the packed bytes (`group_bytes`), so a block's document stays within
`BLOCK_BYTES` however small its groups: a term written one posting per task fills a block
with groups of 3 packed bytes, which counted alone would let its document reach 11x the
width. (Form 5 made groups small, and this count made the width a bound on documents;
the width went from 1 MiB of packed bytes to 2 MiB of both, so a million messages lie in
half the blocks: fewer documents, a shorter lookup.)"""

PART_BYTES = 1 << 14
"""The most bytes of postings one group (one task's postings of one term) packs: a task
whose postings of a term are longer is split into several groups, so one task of a
million messages cannot grow one block past its bound either."""

FORMAT = 5
"""The stored form of the index (2: postings as packed strings in 8 partitions by task;
3: binary, delta-coded groups in blocks bounded in bytes; 4: as 3, with a task's entries
packed in compressed chunks, `entries`, not one document per message; 5: a group names
its task by an ordinal and a posting keeps only index, count and positions, a message's
length, role and time in its chunk's table, a task's terms compressed). A tenant's index
of another form is dropped and rebuilt by its next search."""


def stats_id(tenant: str) -> str:
    """The `_id` of a tenant's statistics document (no postings `_id` ends in ``/``)."""
    return f"{tenant}/"


def block_of(written: int) -> int:
    """The block a group goes to when the tenant's indexing has written `written` bytes of
    postings (and the last block a search asks, from the same counter)."""
    return max(0, written) // BLOCK_BYTES


def group_bytes(group: dict[str, Any]) -> int:
    """What one group counts toward the tenant's written bytes (`block_of`)."""
    return len(group["p"]) + len(group.get("x") or b"") + GROUP_BYTES


def postings_id(tenant: str, term: str, block: int) -> str:
    """The `_id` of block `block` of `term`'s postings."""
    return f"{tenant}/{term}/{block}"


def stats_filter(tenant: str) -> dict[str, str]:
    """The filter of a tenant's statistics document."""
    return {"_id": stats_id(tenant), "tenant": tenant}


def terms_id(key: str) -> str:
    """The `_id` of a task's terms document in `search_tasks` (beside its mark, `key`: a
    `$lookup` of marks by task key never copies the terms)."""
    return f"{key}~terms"


@dataclass(frozen=True)
class IndexState:
    """A tenant's index, as the statistics document holds it."""

    watermark: datetime | None = None
    epoch: int = 0
    stemming: str | None = None
    key_version: int | None = None
    documents: int = 0
    length: int = 0
    carrier: str | None = None
    """The key of one of the tenant's tasks (the last a catch-up indexed): the change
    check always returns its row, which carries the postings lookup (`SearchStore.refresh`)."""
    format: int = 0
    tokenizer: int = TOKENIZER_VERSION
    """The `TOKENIZER_VERSION` the index was built with (1: built before it was recorded)."""
    written: int = 0
    """Bytes of postings the tenant's indexing has written (never decreases): which block
    a catch-up writes to (`block_of`)."""
    ordinals: int = 0
    """The last task ordinal handed out (``r``, raised by each catch-up that indexes a
    task for the first time): a task's postings name it by its ordinal."""
    top: int = 0
    """The last block any catch-up wrote to (``qb``, raised by each): a process whose count
    was behind (it held a state from before a rebuild or an erase) may have written past
    `block_of(written)`."""

    @property
    def last_block(self) -> int:
        """The last block a search asks for."""
        return max(block_of(self.written), self.top)

    @classmethod
    def of(cls, document: dict[str, Any] | None) -> IndexState:
        if not document:
            return cls()
        return cls(
            watermark=document.get("wm"),
            epoch=int(document.get("epoch") or 0),
            stemming=document.get("stem"),
            key_version=document.get("kv"),
            documents=int(document.get("docs") or 0),
            length=int(document.get("length") or 0),
            carrier=document.get("wt"),
            format=int(document.get("f") or 0),
            tokenizer=int(document.get("tv") or 1),
            written=int(document.get("q") or 0),
            top=int(document.get("qb") or 0),
            ordinals=int(document.get("r") or 0),
        )


def micros(ts: float) -> int:
    """A message's time in whole microseconds (what its hit's `time` shows, and what
    `since` and `until`, datetimes, are compared with)."""
    return round(float(ts) * 1_000_000)


ROLES = (
    "system", "user", "assistant", "tool", "informational", "compression", "taskconfig",
    "taskentry", "taskexit",
)  # fmt: skip
"""A known role is stored as its place here (4 bits beside the message's length, in its
chunk's table); another (an unknown message's) as code 15 and its name."""
ROLE_CODES = {role: code for code, role in enumerate(ROLES)}
ROLES_BY_CODE = dict(enumerate(ROLES))
OTHER_ROLE = 15


@dataclass(frozen=True, slots=True)
class Packed:
    """One message's posting of one term, before packing: where, and the term's positions
    among the message's words (none: a tool name, a filter). The message's length, role
    and time are its entry's (`entries.Entry`), packed once in its chunk's table."""

    index: int
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One message holding a term, as its postings group stores it: the task's ordinal,
    the message's index, the term's count and positions (empty when sealed and not
    opened). Whose, how long and when are the message's chunk's (`entries.TaskTable`)."""

    ordinal: int
    index: int
    count: int
    positions: tuple[int, ...] = ()


# ------------------------------------------------------------------ varints
def _varint(out: bytearray, number: int) -> None:
    """`number` (>= 0) as LEB128: 7 bits a byte, low first."""
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)


def _zigzag(number: int) -> int:
    """A signed number as an unsigned one (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...)."""
    return number * 2 if number >= 0 else -number * 2 - 1


def _unzigzag(number: int) -> int:
    return number >> 1 if not number & 1 else -((number + 1) >> 1)


# ------------------------------------------------------------------ groups
def place_binding(ordinal: int) -> str:
    """What a group's sealed positions are bound to in place of a task id: its task's
    ordinal, which names one task of the tenant for the task's whole life (no task id
    starts with ``#``, so the two never meet)."""
    return f"#{ordinal}"


def _posting(out: bytearray, item: Packed, previous: Packed | None, *, places: bool) -> None:
    """One posting after `previous` (the group's last, or None): the index as a
    difference, the term's count, then (`places`) its positions as gaps. A message's
    length, role and time are its chunk's (`entries.pack_table`), stated once."""
    _varint(out, item.index - (previous.index if previous else 0))
    _varint(out, len(item.positions))
    if places:
        _gaps(out, item.positions)


def _gaps(out: bytearray, positions: Sequence[int]) -> None:
    last = 0
    for at in positions:
        _varint(out, at - last)
        last = at


def split(items: Sequence[Packed], *, places: bool = True, bound: int | None = None) -> list[bytes]:
    """One task's postings of one term (ascending indexes), packed into parts of at most
    `bound` bytes each (a part holding one posting may be longer: a posting is never cut);
    each part starts afresh (no difference reaches back into another part), so any part
    reads alone (`bound` None: `PART_BYTES`)."""
    bound = PART_BYTES if bound is None else bound
    parts: list[bytes] = []
    out, previous = bytearray(), None
    for item in items:
        one = bytearray()
        _posting(one, item, previous, places=places)
        if previous is not None and len(out) + len(one) > bound:
            parts.append(bytes(out))
            out, one = bytearray(), bytearray()
            _posting(one, item, None, places=places)
        out += one
        previous = item
    if out:
        parts.append(bytes(out))
    return parts


def pack_group(
    ordinal: int,
    term: str,
    items: Sequence[Packed],
    seal_places: Callable[[bytes, str, str], Any] | None,
    *,
    bound: int | None = None,
) -> list[dict[str, Any]]:
    """One task's groups in the postings of `term`: ``{t: ordinal, p: <binary>}`` each,
    the task named by its ordinal (`IndexState.ordinals`), at most `bound` bytes of
    postings apiece (`split`). Under a keyring (`seal_places`: the codec's) each group's
    positions are sealed apart (``x``, bound to the ordinal: `place_binding`) and ``p``
    keeps the counts."""
    groups: list[dict[str, Any]] = [
        {"t": ordinal, "p": Binary(part)}
        for part in split(items, places=seal_places is None, bound=bound)
    ]
    if seal_places is not None:  # the positions of each group's postings, in their order
        done = 0
        for group in groups:
            count = len(_walk(bytes(group["p"]), places=False))
            gaps = bytearray()
            for item in items[done : done + count]:
                _varint(gaps, len(item.positions))
                _gaps(gaps, item.positions)
            done += count
            group["x"] = seal_places(bytes(gaps), place_binding(ordinal), term)
    return groups


def _number(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` of `data`, and where the next begins."""
    byte = data[at]
    if byte < 0x80:
        return byte, at + 1
    value, shift = byte & 0x7F, 7
    while True:
        at += 1
        byte = data[at]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at + 1
        shift += 7


_Row = tuple[int, int, tuple[int, ...]]


def _walk(data: bytes, *, places: bool) -> list[_Row]:
    """(index, count, positions) of each posting of a group. (One loop, varints of one
    byte read inline: a search decodes every posting of its terms.)"""
    at, end, rows = 0, len(data), []
    index = 0
    while at < end:
        step = data[at]
        if step < 0x80:
            at += 1
        else:
            step, at = _number(data, at)
        index += step
        count = data[at]
        if count < 0x80:
            at += 1
        else:
            count, at = _number(data, at)
        positions: tuple[int, ...] = ()
        if places and count:
            last, held = 0, []
            for _ in range(count):
                gap = data[at]
                if gap < 0x80:
                    at += 1
                else:
                    gap, at = _number(data, at)
                last += gap
                held.append(last)
            positions = tuple(held)
        rows.append((index, count, positions))
    return rows


def unpack(
    group: dict[str, Any], reveal: Callable[[Any, str], bytes] | None = None
) -> list[Occurrence]:
    """The occurrences of one group (``{t, p}``); sealed positions (``x``, under a
    keyring) are opened by `reveal(sealed, binding)` (`place_binding` of the group's
    ordinal) when given, else left out (the counts stay)."""
    ordinal = as_ordinal(group.get("t")) or -1  # -1: names no task
    sealed = "x" in group
    rows = _walk(bytes(group.get("p") or b""), places=not sealed)
    opened: list[tuple[int, ...]] = []
    if sealed and reveal is not None:
        hidden = bytes(reveal(group["x"], place_binding(ordinal)))
        at = 0
        for _ in rows:
            count, at = _number(hidden, at)
            last, held = 0, []
            for _ in range(count):
                gap, at = _number(hidden, at)
                last += gap
                held.append(last)
            opened.append(tuple(held))
    return [
        Occurrence(ordinal, index, count, opened[n] if opened else positions)
        for n, (index, count, positions) in enumerate(rows)
    ]


def as_ordinal(value: object) -> int | None:
    """A task ordinal as stored (a positive int, BSON's int32 or int64), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return int(value)


# ------------------------------------------------------------------ a task's terms
def pack_terms(terms: Sequence[str]) -> Binary:
    """A catch-up's terms of one task (what a re-index or a delete pulls), each
    length-prefixed, zlib-compressed: a task's terms document holds one per catch-up."""
    out = bytearray()
    for term in terms:
        raw = term.encode("utf-8", "surrogatepass")
        _varint(out, len(raw))
        out += raw
    return Binary(zlib.compress(bytes(out), 6))


def unpack_terms(stored: Sequence[Any]) -> list[str]:
    """Every term of a task's terms document (``k``: `pack_terms` values), each once."""
    found: dict[str, None] = {}
    for value in stored:
        data = zlib.decompress(bytes(value))
        at = 0
        while at < len(data):
            size, at = _number(data, at)
            found[data[at : at + size].decode("utf-8", "surrogatepass")] = None
            at += size
    return list(found)
