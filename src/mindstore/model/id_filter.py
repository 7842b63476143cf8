"""Which message ids a task's sealed pages may hold, kept in the task document (pure).

Exactly-once appends rest on one guarded update: its filter refuses a caller-named id the
task already holds. For the open page that is `messages.id $nin [...]`; sealed messages
are not in the task document, and reading the pages before every append would cost the
common path a round trip. So each seal also records the ids it moves in a Bloom filter
kept in the task document (`id_filter`), and an append's filter adds, per caller-named
id, "not all of this id's bits are set", which the server evaluates on the document it
updates:

    {"id_filter.<word>": {"$not": {"$bitsAllSet": <mask>}}}

An id never sealed passes (a fresh append stays one update and reads no page); a sealed
one never does. A false positive (every bit set by other ids: well under 1% of fresh ids
when the filter is full, far fewer below) only makes that write miss once: the writer
then looks the ids up in the pages and writes without the clause, pinned to the state it
checked. Ids and the store's own order decide; no clock does.

The filter is *blocked* at the word: an array of 63-bit integers, and all of an id's bits
fall in one word, so the clause is one small number (about 50 bytes per named id on an
append), and a seal sends only the words its ids touch (at most one per sealed message,
whatever the history length). Words keep bit 63 clear, as a numeric `$bitsAllSet` mask
must be a non-negative 64-bit integer. The filter has room for `capacity` ids (a power of
two, `BITS_PER_ID` bits each); a seal that would pass it rebuilds the filter at twice the
size from every sealed id (one read of the pages' ids per doubling, so the cost per
message stays constant). The size stops at `MAX_WORDS`: past that the false-positive rate
rises, which costs page lookups, never correctness, and the task document stays bounded.

Positions come from BLAKE2b of the id, so every process, version and backend computes the
same ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WORD_BITS = 63
BITS_PER_ID = 16
HASHES = 6
MIN_CAPACITY = 1024
MAX_WORDS = 128 * 1024
"""The largest filter a task document carries (about 2 MiB stored; full at ~500,000 ids)."""

Words = list[int]


@dataclass(frozen=True)
class Probe:
    """Where one id's bits are: a word and the mask of its bits in it."""

    word: int
    mask: int


def words_for(count: int) -> int:
    """The filter size (words) for `count` sealed ids: room for a power of two of at least
    that many (and `MIN_CAPACITY`), at most `MAX_WORDS`."""
    capacity = MIN_CAPACITY
    while capacity < count:
        capacity *= 2
    return min(capacity * BITS_PER_ID // 64, MAX_WORDS)


def _valid(words: object) -> bool:
    return isinstance(words, list) and all(
        isinstance(w, int) and not isinstance(w, bool) and 0 <= w < 1 << WORD_BITS for w in words
    )


def needs_rebuild(words: Words | None, count: int) -> bool:
    """Must a filter (None: none yet) be rebuilt to hold `count` ids at its rate?"""
    if not words or not _valid(words):
        return True
    return len(words) < MAX_WORDS and words_for(count) > len(words)


def probe(message_id: str, words: int) -> Probe:
    """The word and the mask of an id's `HASHES` bits in a filter of `words` words."""
    digest = hashlib.blake2b(message_id.encode(), digest_size=16, person=b"mindstore.ids").digest()
    word = int.from_bytes(digest[:8], "little") % words
    rest, mask = int.from_bytes(digest[8:], "little"), 0
    for _ in range(HASHES):
        rest, position = divmod(rest, WORD_BITS)
        mask |= 1 << position
    return Probe(word, mask)


def add(words: Words, ids: Iterable[str]) -> dict[int, int]:
    """Add `ids` to the filter: the words that changed, by index, with their new value."""
    changed: dict[int, int] = {}
    for message_id in ids:
        found = probe(message_id, len(words))
        changed[found.word] = changed.get(found.word, words[found.word]) | found.mask
    return {index: value for index, value in changed.items() if value != words[index]}


def build(count: int, ids: Iterable[str]) -> Words:
    """A new filter sized for `count` ids, holding `ids`."""
    words: Words = [0] * words_for(count)
    for index, value in add(words, ids).items():
        words[index] = value
    return words


def may_hold(words: Words | None, message_id: str) -> bool:
    """What the server's `$bitsAllSet` test says of one id (False: certainly not sealed)."""
    if not words:
        return False
    found = probe(message_id, len(words))
    return words[found.word] & found.mask == found.mask


def guard(words: int, ids: Sequence[str]) -> list[dict[str, object]]:
    """Filter clauses that match only if none of `ids` may be sealed (one per id), for a
    filter of `words` words (the task header's `id_filter_words`)."""
    clauses: list[dict[str, object]] = []
    for message_id in ids:
        found = probe(message_id, words)
        clauses.append({f"id_filter.{found.word}": {"$not": {"$bitsAllSet": found.mask}}})
    return clauses
