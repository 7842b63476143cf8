"""The last header each task was written with, so the next append needs no read.

An agent appends to the same conversation turn after turn. Reading the task header
before every append doubles the round trips and sends ~400 bytes for nothing when this
process wrote the previous turn itself: it already knows the header the task has now.
After a successful write the repository keeps `(version, updated_at, header)`; the next
write plans from it and guards on both `version` and `updated_at`. If anyone else wrote
the task in between, the guard matches nothing and the repository re-reads, exactly as
after a lost race. `updated_at` in the guard closes the ABA gap a counter alone leaves:
a task deleted and re-created under the same id (or restored from an older backup) can
reach the same `version` again, but not the same millisecond the cached write stamped.

An entry also keeps the stored form of the task's last message as that write left it
(`tail`), so a verb that changes the last message (`add_text_part`, a stream's next
part, `finish_assistant_message`) plans from it without reading the message either. It is
the message's exact stored document (the appended document, or the previous one with the
write's `$set` paths applied), dropped with the header, and not kept when larger than
`MAX_TAIL_BYTES` (a read is cheaper than holding big messages for 10,000 tasks).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mindstore.model.header import TaskHeader

CacheKey = tuple[str, str]
"""(tenant, task id)"""


MAX_TAIL_BYTES = 64 * 1024
"""The largest last message an entry keeps (BSON bytes)."""


@dataclass(frozen=True)
class CachedHeader:
    version: int
    updated_at: datetime
    header: TaskHeader
    tail: dict[str, Any] | None = None
    """The stored document of the message at `header.tail.index` (None: not known)."""

    def tail_document(self, message_id: str) -> tuple[int, dict[str, Any]] | None:
        """(index, a copy of the stored document) when `message_id` is the last message and
        its stored form is known."""
        tail = self.header.tail
        if self.tail is None or tail is None or tail.id != message_id:
            return None
        return tail.index, copy.deepcopy(self.tail)


def apply_sets(document: Mapping[str, Any], sets: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of a stored document with `$set` paths (relative to it) applied as MongoDB
    applies them, or None for a path this does not model (a list index past the end, a
    step into a scalar): the caller then forgets the document rather than guess."""
    result = copy.deepcopy(dict(document))
    for path, value in sets.items():
        *steps, last = path.split(".")
        target: Any = result
        for step in steps:
            if isinstance(target, dict):
                target = target.setdefault(step, {})
            elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
                target = target[int(step)]
            else:
                return None
        if isinstance(target, dict):
            target[last] = copy.deepcopy(value)
        elif isinstance(target, list) and last.isdigit() and int(last) <= len(target):
            if int(last) == len(target):
                target.append(copy.deepcopy(value))
            else:
                target[int(last)] = copy.deepcopy(value)
        else:
            return None
    return result


class HeaderCache:
    """A bounded LRU map; `capacity` 0 turns caching off (every write reads first)."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity = capacity
        self._entries: OrderedDict[CacheKey, CachedHeader] = OrderedDict()

    def get(self, key: CacheKey) -> CachedHeader | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: CacheKey, entry: CachedHeader) -> None:
        if not self.capacity:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def forget(self, key: CacheKey) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)
