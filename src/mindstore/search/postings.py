"""The index's stored forms, as pure logic (no I/O): the `_id`s and partitions of its
documents, the statistics document read back (`IndexState`), and the packing of postings
(`pack`, `pack_group`, `unpack`): one string per task and term, not a sub-document per message.
docs/search.md ("The model").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .tokenize import TOKENIZER_VERSION

PARTITIONS = 8
"""Postings documents per term: a term's postings are split by task so that no document
grows past a few MB before a tenant holds millions of messages, and an indexing write
touches a small document. (Beanie's documents are not imported here: `import mindstore`
does not load Beanie.)"""

FORMAT = 2
"""The stored form of postings (2: times in microseconds, word positions). A tenant's
index of another form is dropped and rebuilt by its next search."""


def stats_id(tenant: str) -> str:
    """The `_id` of a tenant's statistics document (no postings `_id` ends in ``/``)."""
    return f"{tenant}/"


def partition(task_id: str) -> int:
    """The postings partition of a task's messages (stable across processes)."""
    digest = hashlib.blake2b(task_id.encode("utf-8", "surrogatepass"), digest_size=4)
    return int.from_bytes(digest.digest(), "big") % PARTITIONS


def postings_id(tenant: str, term: str, part: int) -> str:
    """The `_id` of partition `part` of `term`'s postings."""
    return f"{tenant}/{term}/{part}"


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
        )


def micros(ts: float) -> int:
    """A message's time in whole microseconds (what its hit's `time` shows, and what
    `since` and `until`, datetimes, are compared with)."""
    return round(float(ts) * 1_000_000)


ROLE_CODES = {
    "system": "s", "user": "u", "assistant": "a", "tool": "t", "informational": "i",
    "compression": "c", "taskconfig": "g", "taskentry": "e", "taskexit": "x",
}  # fmt: skip
"""A known role is stored as one letter; another (an unknown message's) as it is."""
ROLES_BY_CODE = {code: role for role, code in ROLE_CODES.items()}
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36_slow(number: int) -> str:
    if number <= 0:
        return "0" if number == 0 else "-" + _base36_slow(-number)
    out = []
    while number:
        number, digit = divmod(number, 36)
        out.append(_DIGITS[digit])
    return "".join(reversed(out))


_SMALL = [_base36_slow(n) for n in range(36 * 36)]
"""Indexes, counts, lengths and positions are mostly below 1,296: their digits are looked up."""


def _base36(number: int) -> str:
    return _SMALL[number] if 0 <= number < 1296 else _base36_slow(number)


def pack(index: int, length: int, role: str, time: int, positions: Sequence[int]) -> str:
    """One posting as stored: ``index,length,role,time,positions`` (a string, so a postings
    document is a few values per task, not a sub-document per message): numbers in base
    36, the role as one letter, the time in microseconds, the term's positions among the
    message's words as gaps joined by ``.`` (their count is the term's frequency; none: a
    tool name, a filter). A phrase is checked on the positions, never on the text."""
    code = ROLE_CODES.get(role, role.replace(",", "_").replace(";", "_"))
    gaps = ".".join(_base36(b - a) for a, b in zip((0, *positions), positions, strict=False))
    return f"{_base36(index)},{_base36(length)},{code},{_base36(time)},{gaps}"


@dataclass(frozen=True)
class Posting:
    """One message holding a term: where, how often (at which of its words), how long,
    whose, when."""

    task: str
    owner: str | None
    index: int
    count: int
    length: int
    role: str
    ts: float
    """Epoch seconds, exact to the microsecond."""
    positions: tuple[int, ...] = ()


def pack_group(
    task_id: str,
    owner: str | None,
    term: str,
    packed: list[str],
    seal_places: Callable[[str, str, str], Any] | None,
) -> dict[str, Any]:
    """One task's group in the postings document of `term`: ``{t, o, p}``, and under a
    keyring (`seal_places`: the codec's) the positions sealed apart (``x``), each posting
    keeping ``*<count>``."""
    if seal_places is None:
        return {"t": task_id, "o": owner, "p": ";".join(packed)}
    heads, places = [], []
    for item in packed:
        head, gaps = item.rsplit(",", 1)
        heads.append(f"{head},*{_base36(gaps.count('.') + 1 if gaps else 0)}")
        places.append(gaps)
    sealed = seal_places(";".join(places), task_id, term)
    return {"t": task_id, "o": owner, "p": ";".join(heads), "x": sealed}


def unpack(group: dict[str, Any], reveal: Callable[[Any, str], str] | None = None) -> list[Posting]:
    """The postings of one task's group in a postings document (``{t, o, p}``); sealed
    positions (``x``, under a keyring) are opened by `reveal(sealed, task)` when given,
    else left out (the counts stay)."""
    task, owner = str(group.get("t")), group.get("o")
    hidden: list[str] = []
    if "x" in group and reveal is not None:
        hidden = reveal(group["x"], task).split(";")
    out = []
    for n, item in enumerate(str(group.get("p") or "").split(";")):
        if not item:
            continue
        index, length, code, time, gaps = item.split(",", 4)
        count = None
        if gaps.startswith("*"):
            count = int(gaps[1:], 36)
            gaps = hidden[n] if n < len(hidden) else ""
        at, places = 0, []
        for gap in gaps.split(".") if gaps else ():
            at += int(gap, 36)
            places.append(at)
        out.append(Posting(task, owner, int(index, 36), len(places) if count is None else count,
                           int(length, 36), ROLES_BY_CODE.get(code, code),
                           int(time, 36) / 1_000_000, tuple(places)))  # fmt: skip
    return out
