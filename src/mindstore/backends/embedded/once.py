"""Run an installer once per process, whatever threads call it.

The embedded backend patches mongomock's classes and module functions when the first
client opens; two threads may open their first clients at once, so each patch is applied
under a lock, and checked first without it (the common case, on every later open)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

__all__ = ["once"]


def once(install: Callable[[], None]) -> Callable[[], None]:
    """`install`, run at its first call only (later calls return at once)."""
    lock = threading.Lock()
    done = False

    @functools.wraps(install)
    def run() -> None:
        nonlocal done
        if done:
            return
        with lock:
            if done:
                return
            install()
            done = True

    return run
