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
write's `$set` paths applied), dropped with the header. Memory stays bounded: a message
larger than `MAX_TAIL_BYTES` is not kept, and the kept ones together stay under
`tail_budget` bytes (the least recently written tasks lose theirs first; their next verb
on the last message reads it, as it would without a cache).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from mindstore.model.header import TaskHeader

CacheKey = tuple[str, str]
"""(tenant, task id)"""


MAX_TAIL_BYTES = 64 * 1024
"""The largest last message an entry keeps (BSON bytes)."""
TAIL_BUDGET_BYTES = 32 * 1024 * 1024
"""What the kept last messages of all entries may hold together (BSON bytes)."""


@dataclass(frozen=True)
class CachedHeader:
    version: int
    updated_at: datetime
    header: TaskHeader
    tail: dict[str, Any] | None = None
    """The stored document of the message at `header.tail.index` (None: not known)."""
    tail_bytes: int = 0
    """Its BSON size."""

    def tail_document(self, message_id: str) -> tuple[int, dict[str, Any]] | None:
        """(index, a copy of the stored document) when `message_id` is the last message and
        its stored form is known."""
        tail = self.header.tail
        if self.tail is None or tail is None or tail.id != message_id:
            return None
        return tail.index, copy.deepcopy(self.tail)


_UNMODELLED = object()
"""A path step `apply_sets` does not model (a list index past the end, a step into a scalar)."""


def _container(document: dict[str, Any], steps: list[str], *, create: bool) -> Any:
    """What a path's last step is taken in: `create` makes missing sub-documents (as `$set`
    does); without it a missing one is None (nothing there for `$unset` to remove)."""
    target: Any = document
    for step in steps:
        if isinstance(target, dict):
            target = target.setdefault(step, {}) if create else target.get(step)
        elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
            target = target[int(step)]
        elif target is None and not create:
            return None
        else:
            return _UNMODELLED
    return target


def apply_sets(
    document: Mapping[str, Any],
    sets: Mapping[str, Any],
    unsets: Iterable[str] = (),
    pushes: Mapping[str, Any] = MappingProxyType({}),
) -> dict[str, Any] | None:
    """A copy of a stored document with `$set`, `$unset` and single-value `$push` paths
    (relative to it) applied as MongoDB applies them, or None for a path this does not
    model (a list index past the end, a step into a scalar, an `$unset` inside a list, a
    push onto a value that is not a list): the caller then forgets the document rather
    than guess."""
    result = copy.deepcopy(dict(document))
    for path in unsets:
        *steps, last = path.split(".")
        parent = _container(result, steps, create=False)
        if isinstance(parent, dict):
            parent.pop(last, None)
        elif parent is not None:
            return None  # unmodelled, or a list item (`$unset` leaves a null there)
    for path, value in sets.items():
        *steps, last = path.split(".")
        target = _container(result, steps, create=True)
        if isinstance(target, dict):
            target[last] = copy.deepcopy(value)
        elif isinstance(target, list) and last.isdigit() and int(last) <= len(target):
            if int(last) == len(target):
                target.append(copy.deepcopy(value))
            else:
                target[int(last)] = copy.deepcopy(value)
        else:
            return None
    for path, value in pushes.items():
        *steps, last = path.split(".")
        target = _container(result, steps, create=True)
        if not isinstance(target, dict) or not isinstance(target.setdefault(last, []), list):
            return None
        if isinstance(value, dict) and any(str(key).startswith("$") for key in value):
            return None  # `$each` and its modifiers: not modelled
        target[last].append(copy.deepcopy(value))
    return result


class HeaderCache:
    """A bounded LRU map; `capacity` 0 turns caching off (every write reads first).

    One cache serves a whole `Store`, which threads may share (each running its own event
    loop, as the sync integrations do): every read-and-change of the map and of the byte
    count is one step under a lock. What an entry says may still be stale (another loop's
    write can land between a `get` and its use); the guarded write catches that, as it
    catches another process's write.
    """

    def __init__(self, capacity: int = 10_000, tail_budget: int = TAIL_BUDGET_BYTES) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        self.capacity = capacity
        self.tail_budget = tail_budget
        self.tail_bytes = 0
        """BSON bytes of the last messages kept now."""
        self._entries: OrderedDict[CacheKey, CachedHeader] = OrderedDict()
        self._guard = threading.Lock()

    def get(self, key: CacheKey) -> CachedHeader | None:
        with self._guard:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: CacheKey, entry: CachedHeader) -> None:
        if not self.capacity:
            return
        if entry.tail is not None and entry.tail_bytes > min(MAX_TAIL_BYTES, self.tail_budget):
            entry = replace(entry, tail=None, tail_bytes=0)
        with self._guard:
            self._drop(key)
            self._entries[key] = entry
            self.tail_bytes += entry.tail_bytes
            while len(self._entries) > self.capacity:
                _key, dropped = self._entries.popitem(last=False)
                self.tail_bytes -= dropped.tail_bytes
            if self.tail_bytes > self.tail_budget:
                for older, kept in list(self._entries.items()):  # least recently written first
                    if self.tail_bytes <= self.tail_budget:
                        break
                    if kept.tail is not None:
                        self._entries[older] = replace(kept, tail=None, tail_bytes=0)
                        self.tail_bytes -= kept.tail_bytes

    def forget(self, key: CacheKey) -> None:
        with self._guard:
            self._drop(key)

    def _drop(self, key: CacheKey) -> None:
        dropped = self._entries.pop(key, None)
        if dropped is not None:
            self.tail_bytes -= dropped.tail_bytes

    def __len__(self) -> int:
        with self._guard:
            return len(self._entries)
