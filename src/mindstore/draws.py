"""The ids and times a call draws, kept so that its retry draws the same ones.

A write whose reply was lost may have landed. Retrying the call is exactly-once when the
retry can tell its own earlier write apart from anything else, and that needs the retry
to carry what the first attempt carried: the message ids, task ids, node ids and
timestamps it made up, not new ones. So while an operation runs (`mindstore.operations`)
a `Tape` records every id (`model.base.new_id`) and every time (`clock.utcnow`,
`model.base.now_ts`) drawn, and the notes its writes leave (what each sent: the version
a guarded update was pinned to, the time it stamped); a retry of the same call replays
the ids and times in the same order and reads the notes back, so each write can ask
whether its earlier attempt landed (docs/write-paths.md, "Lost replies and retries").

Pure bookkeeping: no I/O, and nothing here decides anything. Outside an operation (a
test planning in memory, the in-memory `Task`) there is no tape and draws are fresh.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["Tape", "current_tape", "draw", "recording"]

T = TypeVar("T")

_TAPE: ContextVar[Tape | None] = ContextVar("mindstore_draws", default=None)


class Tape:
    """What one attempt of an operation drew and noted; `replay`: an earlier attempt's
    tape, whose draws come back first, in order, and whose notes `recall` returns."""

    def __init__(self, replay: Tape | None = None) -> None:
        self.drawn: dict[str, list[object]] = {}
        self.notes: dict[Hashable, list[object]] = {}
        self._replay = replay
        self._positions: dict[str, int] = {}
        self._recalled: dict[Hashable, int] = {}

    @property
    def replaying(self) -> bool:
        """Is this attempt the retry of an earlier one whose outcome is unknown?"""
        return self._replay is not None

    def draw(self, kind: str, fresh: Callable[[], T]) -> T:
        """The next value of `kind` ("id", "time", "ts"): the earlier attempt's, while it
        has one left, else `fresh()`; recorded either way."""
        position = self._positions.get(kind, 0)
        self._positions[kind] = position + 1
        earlier = self._replay.drawn.get(kind, []) if self._replay is not None else []
        value: T = earlier[position] if position < len(earlier) else fresh()  # type: ignore[assignment]
        self.drawn.setdefault(kind, []).append(value)
        return value

    def note(self, key: Hashable, value: object) -> None:
        """Record what a write under `key` is about to send (before it is sent)."""
        self.notes.setdefault(key, []).append(value)

    def recall(self, key: Hashable) -> object | None:
        """The earlier attempt's next note under `key` (each write under one key recalls
        the notes in the order they were made), or None."""
        if self._replay is None:
            return None
        position = self._recalled.get(key, 0)
        earlier = self._replay.notes.get(key, [])
        if position >= len(earlier):
            return None
        self._recalled[key] = position + 1
        return earlier[position]

    def later(self, key: Hashable) -> list[object]:
        """The earlier attempt's notes under `key` from the last one `recall` returned on
        (what that write and the ones after it sent)."""
        if self._replay is None:
            return []
        position = self._recalled.get(key, 0)
        return list(self._replay.notes.get(key, [])[max(position - 1, 0) :])


def current_tape() -> Tape | None:
    """The running operation's tape, if one runs."""
    return _TAPE.get()


def draw(kind: str, fresh: Callable[[], T]) -> T:
    """`fresh()`, through the running operation's tape when there is one."""
    tape = _TAPE.get()
    return fresh() if tape is None else tape.draw(kind, fresh)


@contextmanager
def recording(tape: Tape) -> Iterator[Tape]:
    """Draws inside the block go through `tape`."""
    token = _TAPE.set(tape)
    try:
        yield tape
    finally:
        _TAPE.reset(token)
