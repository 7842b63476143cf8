"""The per-task write queue of one `Store`, safe to share between event loops and threads.

Writers of one task in one process queue on an `asyncio.Lock`, so they do not race each
other's guarded updates. An `asyncio.Lock` belongs to the loop it first waits on: a lock
shared by coroutines of two loops raises ("bound to a different event loop") or, woken
from the wrong thread, never wakes its waiter. A store is shared by several loops whenever
a sync caller runs each call in a loop of its own (`integrations/_sync.py`: no loop
running -> `asyncio.run`), so its locks are kept per loop: a task has one lock in each
loop that writes it. Writers on different loops are then serialized only by the guarded
update and its retry, exactly like writers in different processes, which is correct (a
lost race costs a re-read, never a wrong write).

The loops are held weakly, and so are the locks: a lock lives while a writer holds or
waits on it, a closed loop's map goes with the loop.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Hashable


class TaskLocks:
    """`lock(key)`: the running loop's lock for `key` (a task), made on first use."""

    def __init__(self) -> None:
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, weakref.WeakValueDictionary[Hashable, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()
        """Threads share the maps: a get-or-create must not race another one."""

    def lock(self, key: Hashable) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._guard:
            locks = self._loops.get(loop)
            if locks is None:
                locks = self._loops[loop] = weakref.WeakValueDictionary()
            lock = locks.get(key)
            if lock is None:
                lock = locks[key] = asyncio.Lock()
            return lock

    def __len__(self) -> int:
        """How many locks are alive now, over every loop."""
        with self._guard:
            return sum(len(locks) for locks in self._loops.values())
