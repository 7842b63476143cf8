"""The live feed of a task: its new messages and part updates, in order, resumable.

A watcher holds a cursor (the index from which messages may still change) and the last
form of each message it has yielded. On every wake-up it reads the range from the cursor
(`read_range`, so only what may have changed travels) and yields what is new or changed;
a message is final once it is finished and a later one exists. Wake-ups come from the
task's writes: on the embedded backend an in-process notification after each successful
guarded update (`Notifier`), on a server a change stream on the task's document. Neither
carries data; the range read does, so a dropped notification only delays a message,
never loses it, and a watcher that reconnects with its last id (`since_id`) resumes
exactly after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mindstore.model.messages import AnyMessage, message_to_dict

Key = tuple[str, str]
"""(tenant, task id)"""


class Notifier:
    """In-process wake-ups for watchers, keyed by task (one per `Store`).

    A store may be shared by several event loops in several threads (the sync
    integrations run each call in a loop of its own), so a write may have to wake a
    watcher waiting on another loop. An `asyncio.Event` is not thread-safe: setting it
    from another thread schedules its waiter on a loop that is asleep in `select` and
    nobody wakes. So each subscription remembers its loop, and a wake-up for another loop
    goes through that loop's `call_soon_threadsafe`. The subscriptions themselves are
    changed under a lock, as any thread may subscribe or notify.
    """

    def __init__(self) -> None:
        self._events: dict[Key, dict[asyncio.Event, asyncio.AbstractEventLoop]] = {}
        self._guard = threading.Lock()

    def notify(self, key: Key) -> None:
        with self._guard:
            waiting = list(self._events.get(key, {}).items())
        if not waiting:
            return
        current = _running_loop()
        for event, loop in waiting:
            if loop is current:
                event.set()
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed: no one waits
                    loop.call_soon_threadsafe(event.set)

    @contextlib.contextmanager
    def subscribe(self, key: Key) -> Any:
        event = asyncio.Event()
        loop = asyncio.get_running_loop()
        with self._guard:
            self._events.setdefault(key, {})[event] = loop
        try:
            yield event
        finally:
            with self._guard:
                waiting = self._events.get(key)
                if waiting is not None:
                    waiting.pop(event, None)
                    if not waiting:
                        del self._events[key]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass(frozen=True)
class FeedEvent:
    """One message of the feed: `new` the first time it is seen, `updated` after a change
    (a part added, a turn finished, a redaction)."""

    kind: str
    index: int
    message: AnyMessage


@dataclass
class FeedCursor:
    """Where a watcher stands: messages before `start` are final and were yielded."""

    start: int
    seen: dict[int, dict[str, Any]] = field(default_factory=dict)

    def events(self, first_index: int, messages: list[AnyMessage]) -> list[FeedEvent]:
        out: list[FeedEvent] = []
        for offset, message in enumerate(messages):
            index = first_index + offset
            current = message_to_dict(message)
            previous = self.seen.get(index)
            if previous is None:
                out.append(FeedEvent("new", index, message))
            elif previous != current:
                out.append(FeedEvent("updated", index, message))
            self.seen[index] = current
        last = first_index + len(messages) - 1
        # a message is final once finished and followed by another: move the cursor past it
        while self.start < last and self.seen.get(self.start, {}).get("finished_ts") is not None \
                and self.seen[self.start].get("status", "completed") != "loading":  # fmt: skip
            self.seen.pop(self.start, None)
            self.start += 1
        return out


async def follow(
    read_range: Callable[[int], Awaitable[list[AnyMessage]]],
    wait: Callable[[], Awaitable[None]],
    start: int,
) -> AsyncIterator[FeedEvent]:
    """Yield feed events from index `start` on: read, yield, wait for a write, repeat."""
    cursor = FeedCursor(start)
    while True:
        first = cursor.start
        for event in cursor.events(first, await read_range(first)):
            yield event
        await wait()


async def wait_for_change(event: asyncio.Event, stream: Any, heartbeat: float | None) -> None:
    """Until this process writes the task (`event`), a change arrives on the server's stream,
    or `heartbeat` seconds pass (None: no periodic wake-up)."""
    waiters = [asyncio.ensure_future(event.wait())]
    if stream is not None:
        waiters.append(asyncio.ensure_future(stream.try_next()))
    try:
        await asyncio.wait(waiters, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        event.clear()
