"""Which message ids a task's sealed pages may hold, kept in the task document (pure).

Exactly-once appends rest on one guarded update: its filter refuses a caller-named id the
task already holds. For the open page that is `messages.id $nin [...]`; sealed messages
are not in the task document, and reading the pages before every append would cost the
common path a round trip. So each seal also records the ids it moves in a Bloom filter
kept in the task document (`id_filter`), and an append's filter adds, per caller-named
id, "not all of this id's bits are set", which the server evaluates on the document it
updates:

    {"id_filter.<block>": {"$not": {"$bitsAllSet": [positions]}}}

An id never sealed passes (a fresh append stays one update and reads no page); a sealed
one never does. A false positive (every bit set by other ids: about 0.5% of fresh ids
when the filter is full, far fewer below) only makes that write miss once: the writer
then looks the ids up in the pages and writes without the clause, pinned to the state it
checked. Ids and the store's own order decide; no clock does.

The filter is *blocked*: an array of `BLOCK_BYTES` BinData blocks, and all of an id's
bits fall in one block, so a seal sends only the blocks its ids touch (at most one per
sealed message, whatever the history length), and an append's clause names one block.
It has room for `capacity` ids (a power of two, `BITS_PER_ID` bits each); a seal that
would pass it rebuilds the filter at twice the size from every sealed id (one read of the
pages' ids per doubling, so the cost per message stays constant). The size stops at
`MAX_BLOCKS`: past that the false-positive rate rises, which costs page lookups, never
correctness, and the task document stays bounded.

Positions come from BLAKE2b of the id, so every process, version and backend computes the
same ones. In a block, bit `p` is bit ``p % 8`` of byte ``p // 8`` (MongoDB reads BinData
as a little-endian number for its bit operators).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BLOCK_BYTES = 64
BLOCK_BITS = BLOCK_BYTES * 8
BITS_PER_ID = 12
HASHES = 8
MIN_CAPACITY = 1024
MAX_BLOCKS = 32 * 1024
"""2 MiB of blocks: the largest filter a task document carries (full at ~1.4 million ids)."""

Blocks = list[bytes]


@dataclass(frozen=True)
class Probe:
    """Where one id's bits are: a block and the positions inside it."""

    block: int
    positions: tuple[int, ...]


def blocks_for(count: int) -> int:
    """The filter size (blocks) for `count` sealed ids: room for a power of two of at
    least that many (and `MIN_CAPACITY`), at most `MAX_BLOCKS`."""
    capacity = MIN_CAPACITY
    while capacity < count:
        capacity *= 2
    return min(capacity * BITS_PER_ID // BLOCK_BITS, MAX_BLOCKS)


def needs_rebuild(blocks: Blocks | None, count: int) -> bool:
    """Must a filter (None: none yet) be rebuilt to hold `count` ids at its rate?"""
    if not blocks or any(len(block) != BLOCK_BYTES for block in blocks):
        return True
    return len(blocks) < MAX_BLOCKS and blocks_for(count) > len(blocks)


def probe(message_id: str, blocks: int) -> Probe:
    """The block and the `HASHES` bit positions of an id in a filter of `blocks` blocks."""
    digest = hashlib.blake2b(message_id.encode(), digest_size=16, person=b"mindstore.ids").digest()
    block = int.from_bytes(digest[:8], "little") % blocks
    first, step = digest[8] | digest[9] << 8, (digest[10] | digest[11] << 8) | 1
    return Probe(block, tuple(sorted({(first + i * step) % BLOCK_BITS for i in range(HASHES)})))


def add(blocks: Blocks, ids: Iterable[str]) -> dict[int, bytes]:
    """Add `ids` to the filter: the blocks that changed, by index, in their new form."""
    changed: dict[int, bytearray] = {}
    for message_id in ids:
        found = probe(message_id, len(blocks))
        block = changed.setdefault(found.block, bytearray(blocks[found.block]))
        for position in found.positions:
            block[position // 8] |= 1 << (position % 8)
    return {index: bytes(block) for index, block in changed.items()}


def build(count: int, ids: Iterable[str]) -> Blocks:
    """A new filter sized for `count` ids, holding `ids`."""
    blocks: Blocks = [bytes(BLOCK_BYTES)] * blocks_for(count)
    for index, block in add(blocks, ids).items():
        blocks[index] = block
    return blocks


def may_hold(blocks: Blocks | None, message_id: str) -> bool:
    """What the server's `$bitsAllSet` test says of one id (False: certainly not sealed)."""
    if not blocks:
        return False
    found = probe(message_id, len(blocks))
    block = blocks[found.block]
    return all(block[p // 8] >> (p % 8) & 1 for p in found.positions)


def guard(blocks: int, ids: Sequence[str]) -> list[dict[str, object]]:
    """Filter clauses that match only if none of `ids` may be sealed (one per id), for a
    filter of `blocks` blocks (the task header's `id_filter_blocks`)."""
    clauses: list[dict[str, object]] = []
    for message_id in ids:
        found = probe(message_id, blocks)
        test = {"$bitsAllSet": list(found.positions)}
        clauses.append({f"id_filter.{found.block}": {"$not": test}})
    return clauses
