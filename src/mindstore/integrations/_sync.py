"""Sync methods over the async store, for the frameworks whose interfaces have both.

A sync call cannot wait on the event loop it is running in (that would deadlock), so:

* called from a thread whose event loop is the store's: refused (`RuntimeError`), use the
  async method (this is also what LangGraph's own async savers do);
* the store's loop runs in another thread (an async app running a sync graph in a worker
  thread): the coroutine is run there and this thread waits for it;
* no loop is running (a plain script): the coroutine runs in a fresh loop
  (`asyncio.run`). The embedded backend works from any loop; a MongoDB client is bound to
  the loop it was first used in, so give such a script a store opened the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


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
    return asyncio.run(coro)
