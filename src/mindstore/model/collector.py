"""Pausing Python's cyclic garbage collector around one bulk, synchronous decode.

Reading 10,000 messages builds about 90,000 container objects (models, their field sets,
lists, dicts). Every 700 of them start a young collection, and as they pile up the
collector runs *full* passes over every live object of the process: with the collector
on, those passes cost as much as the validation itself, and more the bigger the process.
The decoded message trees hold no reference cycles (plain data, parents pointing at
children), so nothing they allocate needs the cyclic collector: reference counting frees
them. `collector_paused` switches automatic collection off for the duration of one
synchronous step and restores the previous state, even when the step raises.

Limits, on purpose: it is used only around synchronous code (never across an `await`, so
no other coroutine runs with the collector off), it leaves the collector off if the
caller had switched it off, and `gc.disable()` is process-wide: a thread that switches
the collector on or off *during* the pause may see its choice overridden when the pause
ends. The objects allocated meanwhile are collected later, normally (they are still
counted); the benchmark reports the decode time with and without the pause, measured
in a loop so that the deferred collections land in the figures too. Why this is a
deliberate choice: docs/design.md ("Reading stored messages").
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block; the previous state afterwards."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
