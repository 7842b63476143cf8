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
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from mindstore.model.header import TaskHeader

CacheKey = tuple[str, str]
"""(tenant, task id)"""


@dataclass(frozen=True)
class CachedHeader:
    version: int
    updated_at: datetime
    header: TaskHeader


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
