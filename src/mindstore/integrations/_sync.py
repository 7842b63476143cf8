"""Sync methods over the async store, for the frameworks whose interfaces have both.

A sync call cannot wait on the event loop it is running in (that would deadlock), so:

* called from a thread whose event loop is the store's: refused (`RuntimeError`), use the
  async method (this is also what LangGraph's own async savers do);
* the store's loop runs in another thread (an async app running a sync graph in a worker
  thread): the coroutine is run there and this thread waits for it;
* no loop is running (a plain script, or threads of one): the coroutine runs in a fresh
  loop (`asyncio.run`), one per call. A store may be shared by any number of threads
  doing so at once: its per-task locks are per loop, its header cache and live feed are
  thread-safe, and the embedded backend runs each command under a lock, so concurrent
  writers lose nothing (docs/integrations.md, "Sync methods and threads"). A MongoDB
  client, however, is bound to the event loop it was first used on: a second call, in a
  new loop, fails. That error is re-raised saying what to do: run the store's loop in a
  thread of its own and create the object from a coroutine on it, so that sync calls go
  to that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LOOP_BOUND = ("different event loop", "attached to a different loop")
"""What pymongo and asyncio say when an object bound to one loop is used from another."""


def current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def run_sync(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None, what: str) -> T:
    """Run `coro` to completion for a sync caller (see the module doc)."""
    running = current_loop()
    if running is not None:
        coro.close()
        raise RuntimeError(
            f"{what}: a sync method was called from a running event loop; use its async "
            "form (or call it from another thread)"
        )
    if loop is not None and loop.is_running() and not loop.is_closed():
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    try:
        return asyncio.run(coro)
    except RuntimeError as error:
        if not any(words in str(error) for words in LOOP_BOUND):
            raise
        raise RuntimeError(
            f"{what}: the store's client is bound to the event loop it was first used on, "
            "and a sync call with no loop running runs in a new loop. With a MongoDB "
            "server, run one event loop in a thread of its own, open the store and create "
            "this object from a coroutine on that loop; its sync methods then run there, "
            "from any thread (or use the async methods). See docs/integrations.md, "
            f'"Sync methods and threads". ({error})'
        ) from error
